package match

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/processor/internal/watchlist"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

const chain = 43114

func addr(n int) []byte {
	b := make([]byte, 20)
	b[0], b[19] = 0xaa, byte(n)
	return b
}

func topic(a []byte) []byte { return append(make([]byte, 12), a...) }

func word(n uint64) []byte {
	w := make([]byte, 32)
	for i := 31; n > 0; i-- {
		w[i] = byte(n)
		n >>= 8
	}
	return w
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	if err != nil {
		panic(err)
	}
	return b
}

// Addresses used by the cases: W is watched by hook "w", U is never watched.
var (
	W     = addr(1)
	U     = addr(2)
	U2    = addr(3)
	other = mustHex("ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef")
)

type hook struct {
	id       string
	status   record.WebhookStatus
	internal bool
	sigs     [][]byte
	chain    uint64
	noHook   bool // no settings record
	watching [][]byte
	// spelling writes the address keys in this case (checksum or upper).
	spelling func(evm.Address) string
}

func table(t testing.TB, hooks ...hook) *watchlist.Table {
	t.Helper()
	tbl := watchlist.New(watchlist.Deps{})
	for _, h := range hooks {
		c := h.chain
		if c == 0 {
			c = chain
		}
		if !h.noHook {
			status := h.status
			if status == 0 {
				status = record.WebhookStatus_WEBHOOK_STATUS_ACTIVE
			}
			v, _ := codec.EncodeWatchEntry(&record.WatchEntry{Entry: &record.WatchEntry_Webhook{Webhook: &record.WatchedWebhook{
				WebhookId: h.id, ChainId: c, Status: status, EventType: "address_activity",
				IncludeInternalTxs: h.internal, EventSignatures: h.sigs,
			}}})
			if err := tbl.Apply([]byte(codec.WatchWebhookKey(h.id)), v); err != nil {
				t.Fatal(err)
			}
		}
		for _, a := range h.watching {
			ea, _ := evm.AddressFrom(a)
			spelled := ea.Hex()
			if h.spelling != nil {
				spelled = h.spelling(ea)
			}
			v, _ := codec.EncodeWatchEntry(&record.WatchEntry{Entry: &record.WatchEntry_Address{Address: &record.WatchedAddress{
				WebhookId: h.id, ChainId: c, Address: a,
			}}})
			if err := tbl.Apply([]byte(codec.WatchAddressKey(h.id, spelled)), v); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tbl
}

func transferLog(emitter, from, to []byte, value uint64) *record.Log {
	return &record.Log{Address: emitter, Topics: [][]byte{evm.TopicTransfer[:], topic(from), topic(to)}, Data: word(value)}
}

func nftLog(emitter, from, to []byte, id uint64) *record.Log {
	return &record.Log{Address: emitter, Topics: [][]byte{evm.TopicTransfer[:], topic(from), topic(to), word(id)}}
}

func singleLog(emitter, operator, from, to []byte) *record.Log {
	return &record.Log{Address: emitter, Topics: [][]byte{evm.TopicTransferSingle[:], topic(operator), topic(from), topic(to)},
		Data: append(word(1), word(5)...)}
}

func batchLog(emitter, operator, from, to []byte) *record.Log {
	d := append(append(word(64), word(128)...), append(append(word(1), word(7)...), append(word(1), word(9)...)...)...)
	return &record.Log{Address: emitter, Topics: [][]byte{evm.TopicTransferBatch[:], topic(operator), topic(from), topic(to)}, Data: d}
}

func TestMatchRules(t *testing.T) {
	watchW := hook{id: "w", watching: [][]byte{W}}
	internalW := hook{id: "w", internal: true, watching: [][]byte{W}}
	for _, tc := range []struct {
		name  string
		hooks []hook
		tx    *record.Transaction
		want  []string // matching webhook ids
	}{
		{name: "sender", hooks: []hook{watchW}, tx: &record.Transaction{From: W, To: U}, want: []string{"w"}},
		{name: "recipient", hooks: []hook{watchW}, tx: &record.Transaction{From: U, To: W}, want: []string{"w"}},
		{name: "untouched", hooks: []hook{watchW}, tx: &record.Transaction{From: U, To: U2}},
		{name: "created contract", hooks: []hook{watchW}, tx: &record.Transaction{From: U, ContractAddress: W}, want: []string{"w"}},
		{name: "erc20 sender", hooks: []hook{watchW}, tx: &record.Transaction{From: U, To: U2, Logs: []*record.Log{transferLog(U2, W, U, 5)}}, want: []string{"w"}},
		{name: "erc20 recipient", hooks: []hook{watchW}, tx: &record.Transaction{From: U, To: U2, Logs: []*record.Log{transferLog(U2, U, W, 5)}}, want: []string{"w"}},
		{name: "erc721 sender", hooks: []hook{watchW}, tx: &record.Transaction{From: U, To: U2, Logs: []*record.Log{nftLog(U2, W, U, 5)}}, want: []string{"w"}},
		{name: "erc721 recipient", hooks: []hook{watchW}, tx: &record.Transaction{From: U, To: U2, Logs: []*record.Log{nftLog(U2, U, W, 5)}}, want: []string{"w"}},
		{name: "erc1155 single sender", hooks: []hook{watchW}, tx: &record.Transaction{From: U, To: U2, Logs: []*record.Log{singleLog(U2, U, W, U)}}, want: []string{"w"}},
		{name: "erc1155 single recipient", hooks: []hook{watchW}, tx: &record.Transaction{From: U, To: U2, Logs: []*record.Log{singleLog(U2, U, U, W)}}, want: []string{"w"}},
		{name: "erc1155 single operator is not a party", hooks: []hook{watchW}, tx: &record.Transaction{From: U, To: U2, Logs: []*record.Log{singleLog(U2, W, U, U)}}},
		{name: "erc1155 batch sender", hooks: []hook{watchW}, tx: &record.Transaction{From: U, To: U2, Logs: []*record.Log{batchLog(U2, U, W, U)}}, want: []string{"w"}},
		{name: "erc1155 batch recipient", hooks: []hook{watchW}, tx: &record.Transaction{From: U, To: U2, Logs: []*record.Log{batchLog(U2, U, U, W)}}, want: []string{"w"}},
		{name: "erc1155 batch operator is not a party", hooks: []hook{watchW}, tx: &record.Transaction{From: U, To: U2, Logs: []*record.Log{batchLog(U2, W, U, U)}}},
		{name: "log emitter (watched token contract)", hooks: []hook{watchW}, tx: &record.Transaction{From: U, To: U2, Logs: []*record.Log{transferLog(W, U, U2, 1)}}, want: []string{"w"}},
		{name: "address inside a non-transfer event is not a party", hooks: []hook{watchW},
			tx: &record.Transaction{From: U, To: U2, Logs: []*record.Log{{Address: U2, Topics: [][]byte{word(1), topic(W)}}}}},
		{name: "internal call without includeInternalTxs", hooks: []hook{watchW},
			tx: &record.Transaction{From: U, To: U2, InternalTransactions: []*record.InternalTransaction{{From: U, To: U2}, {From: U2, To: W}}}},
		{name: "internal call recipient with includeInternalTxs", hooks: []hook{internalW},
			tx: &record.Transaction{From: U, To: U2, InternalTransactions: []*record.InternalTransaction{{From: U, To: U2}, {From: U2, To: W}}}, want: []string{"w"}},
		{name: "internal call sender with includeInternalTxs", hooks: []hook{internalW},
			tx: &record.Transaction{From: U, To: U2, InternalTransactions: []*record.InternalTransaction{{From: U, To: U2}, {From: W, To: U}}}, want: []string{"w"}},
		{name: "internal contact plus a direct one, without includeInternalTxs", hooks: []hook{watchW},
			tx: &record.Transaction{From: W, To: U2, InternalTransactions: []*record.InternalTransaction{{From: U2, To: W}}}, want: []string{"w"}},
		{name: "eventSignatures admits a tx with the topic", hooks: []hook{{id: "w", sigs: [][]byte{evm.TopicTransfer[:]}, watching: [][]byte{W}}},
			tx: &record.Transaction{From: W, To: U2, Logs: []*record.Log{transferLog(U2, U, U2, 1)}}, want: []string{"w"}},
		{name: "eventSignatures rejects a tx without the topic", hooks: []hook{{id: "w", sigs: [][]byte{evm.TopicTransferSingle[:]}, watching: [][]byte{W}}},
			tx: &record.Transaction{From: W, To: U2, Logs: []*record.Log{transferLog(U2, U, U2, 1)}}},
		{name: "eventSignatures rejects a tx without logs", hooks: []hook{{id: "w", sigs: [][]byte{evm.TopicTransfer[:]}, watching: [][]byte{W}}},
			tx: &record.Transaction{From: W, To: U2}},
		{name: "eventSignatures given in upper case (parsed to bytes)", hooks: []hook{{id: "w", sigs: [][]byte{mustHex(strings.ToUpper("DDF252AD1BE2C89B69C2B068FC378DAA952BA7F163C4A11628F55A4DF523B3EF"))}, watching: [][]byte{W}}},
			tx: &record.Transaction{From: W, To: U2, Logs: []*record.Log{{Address: U2, Topics: [][]byte{other}}}}, want: []string{"w"}},
		{name: "address watched in checksum case", hooks: []hook{{id: "w", watching: [][]byte{mustHex("9702230a8ea53601f5cd2dc00fdbc13d4df4a8c7")}, spelling: evm.Address.Checksum}},
			tx: &record.Transaction{From: U, To: mustHex("9702230a8ea53601f5cd2dc00fdbc13d4df4a8c7")}, want: []string{"w"}},
		{name: "inactive webhook is skipped", hooks: []hook{{id: "w", status: record.WebhookStatus_WEBHOOK_STATUS_INACTIVE, watching: [][]byte{W}}},
			tx: &record.Transaction{From: W, To: U}},
		{name: "webhook without settings is skipped", hooks: []hook{{id: "w", noHook: true, watching: [][]byte{W}}},
			tx: &record.Transaction{From: W, To: U}},
		{name: "webhook of another chain", hooks: []hook{{id: "w", chain: 1, watching: [][]byte{W}}},
			tx: &record.Transaction{From: W, To: U}},
		{name: "one message per webhook however many addresses and roles",
			hooks: []hook{{id: "w", internal: true, watching: [][]byte{W, addr(4), addr(5)}}},
			tx: &record.Transaction{From: W, To: addr(4), Logs: []*record.Log{transferLog(addr(5), W, addr(4), 1), transferLog(addr(5), addr(4), W, 1)},
				InternalTransactions: []*record.InternalTransaction{{From: W, To: addr(4)}}},
			want: []string{"w"}},
		{name: "two webhooks on the same address, in id order",
			hooks: []hook{{id: "z", watching: [][]byte{W}}, {id: "a", watching: [][]byte{W}}},
			tx:    &record.Transaction{From: W, To: U}, want: []string{"a", "z"}},
		{name: "two webhooks, only the active one",
			hooks: []hook{{id: "z", watching: [][]byte{W}}, {id: "a", status: record.WebhookStatus_WEBHOOK_STATUS_INACTIVE, watching: [][]byte{W}}},
			tx:    &record.Transaction{From: W, To: U}, want: []string{"z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(table(t, tc.hooks...))
			b := &record.Block{ChainId: chain, Transactions: []*record.Transaction{{From: U, To: U2}, tc.tx, {From: U2, To: U}}}
			var got []string
			for _, mt := range m.Block(b, nil) {
				if mt.Tx != 1 {
					t.Fatalf("match on tx %d", mt.Tx)
				}
				got = append(got, mt.Webhook.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("matched %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMatchFollowsTableChanges: an added address matches from the next
// block matched, a removed one stops.
func TestMatchFollowsTableChanges(t *testing.T) {
	tbl := table(t, hook{id: "w", watching: [][]byte{U}})
	m := New(tbl)
	b := &record.Block{ChainId: chain, Transactions: []*record.Transaction{{From: W, To: U2}}}
	if n := len(m.Block(b, nil)); n != 0 {
		t.Fatalf("%d matches before the address was added", n)
	}
	ea, _ := evm.AddressFrom(W)
	v, _ := codec.EncodeWatchEntry(&record.WatchEntry{Entry: &record.WatchEntry_Address{Address: &record.WatchedAddress{WebhookId: "w", ChainId: chain, Address: W}}})
	_ = tbl.Apply([]byte(codec.WatchAddressKey("w", ea.Hex())), v)
	if n := len(m.Block(b, nil)); n != 1 {
		t.Fatalf("%d matches after the address was added", n)
	}
	_ = tbl.Apply([]byte(codec.WatchAddressKey("w", ea.Hex())), nil)
	if n := len(m.Block(b, nil)); n != 0 {
		t.Fatalf("%d matches after the address was removed", n)
	}
}

func TestMatchManyTransactions(t *testing.T) {
	m := New(table(t, hook{id: "w", watching: [][]byte{W}}, hook{id: "v", watching: [][]byte{U}}))
	b := &record.Block{ChainId: chain}
	for i := 0; i < 10; i++ {
		tx := &record.Transaction{From: U2, To: U2}
		switch i % 3 {
		case 0:
			tx.To = W
		case 1:
			tx.From, tx.To = W, U
		}
		b.Transactions = append(b.Transactions, tx)
	}
	var got []string
	for _, mt := range m.Block(b, nil) {
		got = append(got, fmt.Sprintf("%d:%s", mt.Tx, mt.Webhook.ID))
	}
	want := []string{"0:w", "1:v", "1:w", "3:w", "4:v", "4:w", "6:w", "7:v", "7:w", "9:w"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}
