package balances

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/evm"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
	"github.com/moraine-data/moraine/schemas/record"
)

func addr(n byte) evm.Address { return evm.Address{0xa0, 19: n} }

func word(v *big.Int) []byte { return v.FillBytes(make([]byte, 32)) }

func wordN(n uint64) []byte { return word(new(big.Int).SetUint64(n)) }

func topicOf(a evm.Address) []byte { return append(make([]byte, 12), a[:]...) }

// Logs of the four transfer shapes.
func erc20Log(token, from, to evm.Address, v *big.Int) *record.Log {
	return &record.Log{Address: token[:], Topics: [][]byte{evm.TopicTransfer[:], topicOf(from), topicOf(to)}, Data: word(v)}
}

func erc721Log(token, from, to evm.Address, id uint64) *record.Log {
	return &record.Log{Address: token[:], Topics: [][]byte{evm.TopicTransfer[:], topicOf(from), topicOf(to), wordN(id)}}
}

func single1155Log(token, operator, from, to evm.Address, id, v uint64) *record.Log {
	return &record.Log{Address: token[:], Topics: [][]byte{evm.TopicTransferSingle[:], topicOf(operator), topicOf(from), topicOf(to)},
		Data: append(wordN(id), wordN(v)...)}
}

func batch1155Log(token, operator, from, to evm.Address, ids, values []uint64) *record.Log {
	data := append(wordN(64), wordN(uint64(96+32*len(ids)))...)
	data = append(data, wordN(uint64(len(ids)))...)
	for _, id := range ids {
		data = append(data, wordN(id)...)
	}
	data = append(data, wordN(uint64(len(values)))...)
	for _, v := range values {
		data = append(data, wordN(v)...)
	}
	return &record.Log{Address: token[:], Topics: [][]byte{evm.TopicTransferBatch[:], topicOf(operator), topicOf(from), topicOf(to)}, Data: data}
}

var (
	alice, bob, carol = addr(1), addr(2), addr(3)
	usd, art, items   = addr(10), addr(11), addr(12)
	// multi is a contract that emits both ERC-20 and ERC-1155 transfers.
	multi = addr(13)
)

// describeRows renders rows as sorted "holder kind token#id amount" lines.
func describeRows(rows Rows) []string {
	names := map[evm.Address]string{alice: "alice", bob: "bob", carol: "carol", usd: "usd", art: "art", items: "items", multi: "multi"}
	var out []string
	for _, d := range rows.Deltas {
		p := d.Key.Pair()
		out = append(out, fmt.Sprintf("%s %d %s#%s %s", names[d.Key.Holder()], p.Kind, names[p.Token], evm.Decimal(p.TokenID[:]), d.Amount))
	}
	slices.Sort(out)
	return out
}

func TestFromBlock(t *testing.T) {
	e18 := new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil)
	huge := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)) // 2^256-1
	var zero evm.Address
	b := &record.Block{ChainId: 7, Number: 2049, Hash: wordN(0xb10c), Transactions: []*record.Transaction{
		{Status: 1, Logs: []*record.Log{
			erc20Log(usd, zero, alice, huge),                // mint: no debit of the zero address
			erc20Log(usd, alice, bob, e18),                  //
			erc20Log(usd, bob, bob, e18),                    // self-transfer: nothing
			erc20Log(usd, bob, zero, big.NewInt(1)),         // burn: no credit of the zero address
			erc721Log(art, zero, carol, 5),                  // NFT mint
			erc721Log(art, carol, alice, 5),                 // and on the same block to alice
			single1155Log(items, carol, zero, carol, 1, 10), // the operator is not a party
			batch1155Log(items, bob, carol, bob, []uint64{1, 2}, []uint64{4, 0}),
			erc20Log(multi, alice, bob, big.NewInt(3)),                    // a contract of two kinds
			single1155Log(multi, alice, alice, bob, 0, 3),                 // the same token, id 0, as ERC-1155
			{Address: usd[:], Topics: [][]byte{wordN(1), topicOf(alice)}}, // not a transfer
		}},
		// A failed transaction moves nothing, whatever a node put in it.
		{Status: 0, Logs: []*record.Log{erc20Log(usd, alice, carol, e18)}},
	}}
	for i, l := range b.Transactions[0].Logs {
		l.LogIndex = uint32(i)
	}
	var rows Rows
	FromBlock(&rows, b)
	want := []string{
		"alice 1 multi#0 -3",
		"alice 1 usd#0 " + new(big.Int).Sub(huge, e18).String(),
		"alice 2 art#5 1",
		"alice 3 multi#0 -3",
		"bob 1 multi#0 3",
		"bob 1 usd#0 999999999999999999",
		"bob 3 items#1 4",
		"bob 3 multi#0 3",
		"carol 3 items#1 6",
	}
	if got := describeRows(rows); !slices.Equal(got, want) {
		t.Fatalf("deltas:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, d := range rows.Deltas {
		if d.Key.ChainID() != 7 || d.Key.Level() != schema.BalanceLevelDelta || d.Key.Bucket() != 2049 || d.Key.Parent() != 2 ||
			d.Key.BlockHash() != [32]byte(wordN(0xb10c)) {
			t.Fatalf("delta key %x is not the block's", d.Key)
		}
	}
	if !slices.IsSortedFunc(rows.Deltas, func(a, b Delta) int { return strings.Compare(string(a.Key[:]), string(b.Key[:])) }) {
		t.Fatal("deltas are not in key order")
	}
	// Every NFT transfer by token id, the elements of a batch apart, the
	// zero-value one too.
	var nfts []string
	for _, n := range rows.NFTs {
		p := n.Key.Position()
		from, to, amount, err := schema.ParseNFTEntry(string(n.Entry))
		if err != nil {
			t.Fatal(err)
		}
		id := n.Key.TokenID()
		nfts = append(nfts, fmt.Sprintf("%d#%s kind %d log %d.%d %02x>%02x %s", p.Block, evm.Decimal(id[:]), p.Kind, p.LogIndex, p.Sub, from[19], to[19], amount))
	}
	wantNFTs := []string{
		"2049#5 kind 2 log 4.0 00>03 1", "2049#5 kind 2 log 5.0 03>01 1",
		"2049#1 kind 3 log 6.0 00>03 10", "2049#1 kind 3 log 7.0 03>02 4", "2049#2 kind 3 log 7.1 03>02 0",
		"2049#0 kind 3 log 9.0 01>02 3",
	}
	if !slices.Equal(nfts, wantNFTs) {
		t.Fatalf("nft rows:\n%s\nwant:\n%s", strings.Join(nfts, "\n"), strings.Join(wantNFTs, "\n"))
	}
	// The same block gives the same rows.
	var again Rows
	FromBlock(&again, b)
	if !slices.Equal(describeRows(again), describeRows(rows)) || again.Deltas[0].Key != rows.Deltas[0].Key {
		t.Fatal("FromBlock is not deterministic")
	}
}
