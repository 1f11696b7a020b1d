package sink

import (
	"testing"

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
	if b.Blocks != 3 || b.Txs != 3 || b.Len() != 4+4+3+3+9 {
		t.Errorf("Blocks %d, Txs %d, Len %d", b.Blocks, b.Txs, b.Len())
	}
	if h := b.heads[1]; h.b.Number != 11 || h.version != 13 {
		t.Errorf("head: block %d version %d, want the replacing block 11 at offset 13", h.b.Number, h.version)
	}
}
