package sink

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// NewBatch holds one row per block, hash, transaction, log and call frame
// (and a removed block and hash per orphan), in slices allocated once at
// their final size.
func TestNewBatchRowsAndSizes(t *testing.T) {
	tx := func(logs, frames int) *record.Transaction {
		out := &record.Transaction{}
		for range logs {
			out.Logs = append(out.Logs, &record.Log{})
		}
		for range frames {
			out.InternalTransactions = append(out.InternalTransactions, &record.InternalTransaction{})
		}
		return out
	}
	block := func(offset int64, n uint64, txs ...*record.Transaction) Event {
		return Event{Offset: offset, Event: &record.ChainEvent{Event: &record.ChainEvent_Block{
			Block: &record.Block{ChainId: 1, Number: n, Transactions: txs}}}}
	}
	events := []Event{
		block(10, 10, tx(2, 3), tx(0, 1)),
		block(11, 11),
		{Offset: 12, Event: &record.ChainEvent{Event: &record.ChainEvent_Reorg{Reorg: &record.Reorg{
			ChainId: 1, ForkNumber: 11, Orphaned: []*record.OrphanedBlock{{Number: 11}}}}}},
		block(13, 11, tx(1, 5)), // the block replacing the orphan
	}
	b, err := NewBatch(events, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name           string
		len, cap, want int
	}{
		{"blocks", len(b.blocks), cap(b.blocks), 4},
		{"hashes", len(b.hashes), cap(b.hashes), 4},
		{"txs", len(b.txs), cap(b.txs), 3},
		{"logs", len(b.logs), cap(b.logs), 3},
		{"internal", len(b.internal), cap(b.internal), 9},
	} {
		if c.len != c.want || c.cap != c.want {
			t.Errorf("%s: %d rows in a slice of capacity %d, want %d and %d", c.name, c.len, c.cap, c.want, c.want)
		}
	}
	if len(b.txLists) != 2 || b.txLists[0].b.Number != 10 || b.txLists[1].version != 13 {
		t.Errorf("%d transaction lists, want one per block with transactions (10, and the replacing 11)", len(b.txLists))
	}
	if b.Blocks != 3 || b.Txs != 3 || b.Len() != 4+4+3+2+3+9 {
		t.Errorf("Blocks %d, Txs %d, Len %d", b.Blocks, b.Txs, b.Len())
	}
	if h := b.heads[1]; h.b.Number != 11 || h.version != 13 {
		t.Errorf("head: block %d version %d, want the replacing block 11 at offset 13", h.b.Number, h.version)
	}
}

// A block's block_transactions entry lists its transactions in order, each
// as the listing renders it: the input cut to its selector, the effective
// gas price where the node gave no gas price; and the block's fields the
// listing renders.
func TestTxListEntry(t *testing.T) {
	txs := []*record.Transaction{
		{Index: 0, Hash: []byte{0xaa}, Type: 2, From: []byte{1}, To: []byte{2}, Value: "7", Gas: 21000, EffectiveGasPrice: "25",
			Nonce: 4, Input: []byte{1, 2, 3, 4, 5, 6}, Status: 1, GasUsed: 21000, MaxFeePerGas: "30"},
		{Index: 1, Hash: []byte{0xbb}, From: []byte{3}, ContractAddress: []byte{4}, GasPrice: "9", EffectiveGasPrice: "8",
			Input: []byte{7, 8}},
	}
	b, err := NewBatch([]Event{{Offset: 5, Event: &record.ChainEvent{Event: &record.ChainEvent_Block{
		Block: &record.Block{ChainId: 1, Number: 10, Timestamp: 1_700_000_000, TimestampMilliseconds: proto.Uint64(1_700_000_000_250),
			Transactions: txs}}}}}, false)
	if err != nil || len(b.txLists) != 1 {
		t.Fatalf("%d lists, %v", len(b.txLists), err)
	}
	l, err := codec.DecodeBlockTxList(b.txLists[0].entry)
	if err != nil || len(l.Txs) != 2 {
		t.Fatalf("%v, %v", l, err)
	}
	if l.GetBlockTimestamp() != 1_700_000_000 || l.GetBlockTimestampMilliseconds() != 1_700_000_000_250 || l.BlockMinDelayExcess != nil {
		t.Errorf("block fields %v, %v, %v", l.BlockTimestamp, l.BlockTimestampMilliseconds, l.BlockMinDelayExcess)
	}
	first, second := l.Txs[0], l.Txs[1]
	if first.Index != 0 || string(first.Hash) != "\xaa" || first.Detail.GasPrice != "25" || string(first.Detail.Input) != "\x01\x02\x03\x04" ||
		first.Detail.Gas != 21000 || first.Detail.Nonce != 4 || first.Detail.Value != "7" || first.Detail.Type != 2 ||
		first.InputLength != 6 || first.Detail.MaxFeePerGas != "" || first.Detail.EffectiveGasPrice != "" {
		t.Errorf("first transaction %v", first)
	}
	if second.Index != 1 || second.Detail.GasPrice != "9" || string(second.Detail.Input) != "\x07\x08" || second.InputLength != 2 ||
		string(second.Detail.ContractAddress) != "\x04" || len(second.Detail.To) != 0 {
		t.Errorf("second transaction %v", second)
	}
}
