package sink

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/evm"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
	"github.com/moraine-data/moraine/schemas/record"
)

func addr(n byte) []byte {
	a := make([]byte, 20)
	a[0], a[19] = 0xa0, n
	return a
}

func word(n uint64) []byte {
	w := make([]byte, 32)
	for i := 31; n > 0; i-- {
		w[i] = byte(n)
		n >>= 8
	}
	return w
}

func topicOf(a []byte) []byte { return append(make([]byte, 12), a...) }

// The actors of indexedTx.
var (
	alice, bob, carol = addr(1), addr(2), addr(3)
	usd, nft, items   = addr(10), addr(11), addr(12)
	router, relay     = addr(20), addr(21)
	child, orphanKid  = addr(30), addr(31)
	deployed          = addr(40)
)

// indexedTx: alice calls the router, which moves USD from alice to bob,
// NFT #7 from bob to carol, a TransferBatch of items (ids 1, 2) from carol to
// alice, and sends value on to the relay (which pays carol); the router also
// creates child, and a reverted branch creates orphanKid. Delegate and static
// calls, and a zero-value call, are not internal transactions.
func indexedTx() *record.Transaction {
	batch := append(append(word(64), word(160)...), append(append(word(2), word(1)...), word(2)...)...)
	batch = append(batch, append(append(word(2), word(5)...), word(6)...)...)
	return &record.Transaction{
		Hash: word(0xfeed), Index: 3, From: alice, To: router, Value: "9", Status: 1, Input: []byte{1, 2, 3, 4, 5},
		Logs: []*record.Log{
			{Address: usd, LogIndex: 7, Topics: [][]byte{evm.TopicTransfer[:], topicOf(alice), topicOf(bob)}, Data: word(1000)},
			{Address: nft, LogIndex: 8, Topics: [][]byte{evm.TopicTransfer[:], topicOf(bob), topicOf(carol), word(7)}},
			{Address: items, LogIndex: 9, Topics: [][]byte{evm.TopicTransferBatch[:], topicOf(router), topicOf(carol), topicOf(alice)}, Data: batch},
			{Address: usd, LogIndex: 10, Topics: [][]byte{word(0x1234), topicOf(alice)}}, // not a transfer
		},
		InternalTransactions: []*record.InternalTransaction{
			{TracePosition: 0, Depth: 0, Type: "CALL", From: alice, To: router, Value: "9"},
			{TracePosition: 1, Depth: 1, Type: "DELEGATECALL", From: router, To: usd, Value: "0"},
			{TracePosition: 2, Depth: 1, Type: "CALL", From: router, To: relay, Value: "5"},
			{TracePosition: 3, Depth: 2, Type: "CALL", From: relay, To: carol, Value: "5"},
			{TracePosition: 4, Depth: 1, Type: "STATICCALL", From: router, To: usd, Value: "0"},
			{TracePosition: 5, Depth: 1, Type: "CALL", From: router, To: bob, Value: "0"},
			{TracePosition: 6, Depth: 1, Type: "CREATE2", From: router, To: child, Value: "0"},
			{TracePosition: 7, Depth: 1, Type: "CALL", From: router, To: relay, Value: "1", Error: "execution reverted"},
			{TracePosition: 8, Depth: 2, Type: "CREATE", From: relay, To: orphanKid, Value: "0"},
		},
	}
}

// describe renders the rows as sorted lines "address list position/sub:
// fields", decoding each row's detail by its list.
func describe(t *testing.T, rows []indexRow) []string {
	names := map[string]string{}
	for n, a := range map[string][]byte{"alice": alice, "bob": bob, "carol": carol, "usd": usd, "nft": nft, "items": items,
		"router": router, "relay": relay, "child": child, "orphanKid": orphanKid, "deployed": deployed} {
		names[string(a)] = n
	}
	name := func(a []byte) string { return names[string(a)] }
	var out []string
	for _, r := range rows {
		s := fmt.Sprintf("%s %d %d/%d:", name(r.address[:]), r.list, r.position, r.sub)
		switch r.list {
		case schema.ListTransactions:
			var d record.TxDetail
			require.NoError(t, d.UnmarshalVT(r.detail))
			s += fmt.Sprintf(" roles=%d transfers=%d internals=%d", r.roles, len(d.Transfers), len(d.InternalTransactions))
		case schema.ListInternal:
			var c record.CallDetail
			require.NoError(t, c.UnmarshalVT(r.detail))
			s += fmt.Sprintf(" %s %s->%s %s reverted=%v", c.Type, name(c.From), name(c.To), c.Value, c.Reverted)
		case schema.ListDeployments, schema.ListCreation:
			var d record.Deployment
			require.NoError(t, d.UnmarshalVT(r.detail))
			s += fmt.Sprintf(" %s by %s via %s", name(d.Contract), name(d.Deployer), name(d.Creator))
		default:
			var x record.TokenTransfer
			require.NoError(t, x.UnmarshalVT(r.detail))
			s += fmt.Sprintf(" kind=%d %s %s->%s %s id=%s", x.Kind, name(x.Token), name(x.From), name(x.To), x.Value, x.TokenId)
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func TestIndexRows(t *testing.T) {
	creation := &record.Transaction{Hash: word(0xc0de), Index: 4, From: bob, ContractAddress: deployed, Status: 1}
	failedCreation := &record.Transaction{Hash: word(0xdead), Index: 5, From: bob, ContractAddress: addr(41), Status: 0}
	ms, excess := uint64(1_700_000_000_250), uint64(7)
	events := []Event{{Offset: 5, Event: &record.ChainEvent{Event: &record.ChainEvent_Block{Block: &record.Block{
		ChainId: 1, Number: 100, Hash: word(0xb10c), Timestamp: 1_700_000_000, TimestampMilliseconds: &ms,
		MinDelayExcess: &excess, BaseFee: "25000000000",
		Transactions: []*record.Transaction{indexedTx(), creation, failedCreation}}}}}}
	b, err := NewBatch(events, true)
	require.NoError(t, err)
	const (
		tr, e20, e721, e1155, tok, internal, dep, cre = 1, 2, 3, 4, 5, 6, 7, 8
	)
	want := []string{
		// The transactions list: every party once, with its roles and the
		// transfers and internal transactions it sent or received (the
		// root frame is the transaction, not an internal one).
		fmt.Sprintf("alice %d 0/0: roles=%d transfers=3 internals=0", tr, schema.RoleSender|schema.RoleTransferParty),
		fmt.Sprintf("router %d 0/0: roles=%d transfers=0 internals=3", tr, schema.RoleRecipient|schema.RoleInternalParty),
		fmt.Sprintf("bob %d 0/0: roles=%d transfers=2 internals=0", tr, schema.RoleTransferParty),
		fmt.Sprintf("carol %d 0/0: roles=%d transfers=3 internals=1", tr, schema.RoleTransferParty|schema.RoleInternalParty),
		fmt.Sprintf("usd %d 0/0: roles=%d transfers=0 internals=0", tr, schema.RoleToken),
		fmt.Sprintf("nft %d 0/0: roles=%d transfers=0 internals=0", tr, schema.RoleToken),
		fmt.Sprintf("items %d 0/0: roles=%d transfers=0 internals=0", tr, schema.RoleToken),
		fmt.Sprintf("relay %d 0/0: roles=%d transfers=0 internals=4", tr, schema.RoleInternalParty),
		fmt.Sprintf("child %d 0/0: roles=%d transfers=0 internals=1", tr, schema.RoleInternalParty),
		fmt.Sprintf("orphanKid %d 0/0: roles=%d transfers=0 internals=1", tr, schema.RoleInternalParty),
		// Transfers, by party and by token; a batch is one row per element.
		fmt.Sprintf("alice %d 7/0: kind=1 usd alice->bob 1000 id=", e20),
		fmt.Sprintf("bob %d 7/0: kind=1 usd alice->bob 1000 id=", e20),
		fmt.Sprintf("usd %d 7/0: kind=1 usd alice->bob 1000 id=", tok),
		fmt.Sprintf("bob %d 8/0: kind=2 nft bob->carol 1 id=7", e721),
		fmt.Sprintf("carol %d 8/0: kind=2 nft bob->carol 1 id=7", e721),
		fmt.Sprintf("nft %d 8/0: kind=2 nft bob->carol 1 id=7", tok),
		fmt.Sprintf("carol %d 9/0: kind=3 items carol->alice 5 id=1", e1155),
		fmt.Sprintf("alice %d 9/0: kind=3 items carol->alice 5 id=1", e1155),
		fmt.Sprintf("items %d 9/0: kind=3 items carol->alice 5 id=1", tok),
		fmt.Sprintf("carol %d 9/1: kind=3 items carol->alice 6 id=2", e1155),
		fmt.Sprintf("alice %d 9/1: kind=3 items carol->alice 6 id=2", e1155),
		fmt.Sprintf("items %d 9/1: kind=3 items carol->alice 6 id=2", tok),
		// Internal transactions: value calls and creations below the root;
		// the reverted branch is listed with status 0.
		fmt.Sprintf("router %d 2/0: CALL router->relay 5 reverted=false", internal),
		fmt.Sprintf("relay %d 2/0: CALL router->relay 5 reverted=false", internal),
		fmt.Sprintf("relay %d 3/0: CALL relay->carol 5 reverted=false", internal),
		fmt.Sprintf("carol %d 3/0: CALL relay->carol 5 reverted=false", internal),
		fmt.Sprintf("router %d 6/0: CREATE2 router->child 0 reverted=false", internal),
		fmt.Sprintf("child %d 6/0: CREATE2 router->child 0 reverted=false", internal),
		fmt.Sprintf("router %d 7/0: CALL router->relay 1 reverted=true", internal),
		fmt.Sprintf("relay %d 7/0: CALL router->relay 1 reverted=true", internal),
		fmt.Sprintf("relay %d 8/0: CREATE relay->orphanKid 0 reverted=true", internal),
		fmt.Sprintf("orphanKid %d 8/0: CREATE relay->orphanKid 0 reverted=true", internal),
		// Deployments: the surviving CREATE2 (deployer alice, through the
		// router), not the reverted CREATE.
		fmt.Sprintf("child %d 6/0: child by alice via router", cre),
		fmt.Sprintf("alice %d 6/0: child by alice via router", dep),
		fmt.Sprintf("router %d 6/0: child by alice via router", dep),
		// The top-level creation; the failed one created nothing.
		fmt.Sprintf("deployed %d 0/0: deployed by bob via ", cre),
		fmt.Sprintf("bob %d 0/0: deployed by bob via ", dep),
		fmt.Sprintf("bob %d 0/0: roles=%d transfers=0 internals=0", tr, schema.RoleSender),
		fmt.Sprintf("deployed %d 0/0: roles=%d transfers=0 internals=0", tr, schema.RoleRecipient),
		fmt.Sprintf("bob %d 0/0: roles=%d transfers=0 internals=0", tr, schema.RoleSender),
		fmt.Sprintf("%s %d 0/0: roles=%d transfers=0 internals=0", "", tr, schema.RoleRecipient), // the failed creation's would-be address
	}
	sort.Strings(want)
	got := describe(t, b.index)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if b.Len() != 1+1+3+1+4+9+3+len(b.index) { // block, hash, txs, the block's tx list, logs, frames, lookups
		t.Errorf("Len %d", b.Len())
	}
	if plain, err := NewBatch(events, false); err != nil || plain.index != nil || plain.Len() != 1+1+3+1+4+9 {
		t.Error("index rows without the address index")
	}
	// The transaction's lookup detail: every transfer and internal
	// transaction, the whole input.
	var d record.TxDetail
	require.NoError(t, d.UnmarshalVT(b.txs[0].lookup))
	require.Len(t, d.Transfers, 4)
	require.Len(t, d.InternalTransactions, 5)
	require.Equal(t, []byte{1, 2, 3, 4, 5}, d.Input)
	require.True(t, d.InternalTransactions[3].Reverted)
	require.Equal(t, "9", d.Value)

	// Every index row's detail and the lookup detail carry the block's
	// timestamps, the lookup detail the rest of what its route renders of
	// the block; the messages nested in a TxDetail carry none of it.
	type blockTimed interface {
		GetBlockTimestamp() uint64
		GetBlockTimestampMilliseconds() uint64
	}
	nestedUntimed := func(d *record.TxDetail) {
		require.Nil(t, d.BlockTimestamp)
		for _, x := range d.Transfers {
			require.Nil(t, x.BlockTimestamp)
		}
		for _, x := range d.InternalTransactions {
			require.Nil(t, x.BlockTimestamp)
		}
	}
	require.Equal(t, uint64(1_700_000_000), d.GetBlockTimestamp())
	require.Equal(t, ms, d.GetBlockTimestampMilliseconds())
	require.Equal(t, excess, d.GetBlockMinDelayExcess())
	require.Equal(t, "25000000000", d.BlockBaseFee)
	d.BlockTimestamp = nil
	nestedUntimed(&d)
	for _, r := range b.index {
		var m interface {
			blockTimed
			UnmarshalVT([]byte) error
		}
		switch r.list {
		case schema.ListTransactions:
			m = &record.TxDetail{}
		case schema.ListInternal:
			m = &record.CallDetail{}
		case schema.ListDeployments, schema.ListCreation:
			m = &record.Deployment{}
		default:
			m = &record.TokenTransfer{}
		}
		require.NoError(t, m.UnmarshalVT(r.detail))
		require.Equal(t, uint64(1_700_000_000), m.GetBlockTimestamp(), "list %d", r.list)
		require.Equal(t, ms, m.GetBlockTimestampMilliseconds(), "list %d", r.list)
		if d, ok := m.(*record.TxDetail); ok {
			d.BlockTimestamp = nil
			nestedUntimed(d)
		}
	}
}
