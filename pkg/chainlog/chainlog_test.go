package chainlog

import (
	"strings"
	"testing"

	"github.com/moraine-data/moraine/schemas/record"
)

func block(n uint64, hash, parent byte, txs int, cum uint64) *record.ChainEvent {
	b := &record.Block{Number: n, Hash: []byte{hash}, ParentHash: []byte{parent}, CumulativeTransactions: cum}
	for range txs {
		b.Transactions = append(b.Transactions, &record.Transaction{})
	}
	return &record.ChainEvent{Event: &record.ChainEvent_Block{Block: b}}
}

func reorg(fork uint64, orphaned ...*record.OrphanedBlock) *record.ChainEvent {
	return &record.ChainEvent{Event: &record.ChainEvent_Reorg{Reorg: &record.Reorg{ForkNumber: fork, Orphaned: orphaned}}}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []*record.ChainEvent
		err    string
		length int
	}{
		{name: "linked chain", events: []*record.ChainEvent{block(1, 1, 0, 2, 2), block(2, 2, 1, 1, 3), block(3, 3, 2, 0, 3)}, length: 3},
		{name: "reorg then the new branch", events: []*record.ChainEvent{
			block(1, 1, 0, 2, 2), block(2, 2, 1, 1, 3), block(3, 3, 2, 0, 3),
			reorg(2, &record.OrphanedBlock{Number: 2, Hash: []byte{2}}, &record.OrphanedBlock{Number: 3, Hash: []byte{3}}),
			block(2, 9, 1, 5, 7), block(3, 8, 9, 0, 7), block(4, 7, 8, 1, 8)}, length: 4},
		// What a second writer of the chain would leave behind.
		{name: "block produced twice", events: []*record.ChainEvent{block(1, 1, 0, 2, 2), block(2, 2, 1, 1, 3), block(2, 2, 1, 1, 3)}, err: "produced twice"},
		{name: "gap", events: []*record.ChainEvent{block(1, 1, 0, 2, 2), block(3, 3, 2, 0, 2)}, err: "a gap"},
		{name: "parent does not link", events: []*record.ChainEvent{block(1, 1, 0, 2, 2), block(2, 2, 7, 0, 2)}, err: "does not link"},
		{name: "cumulative count", events: []*record.ChainEvent{block(1, 1, 0, 2, 2), block(2, 2, 1, 1, 4)}, err: "cumulative"},
		{name: "reorg orphans a block not produced", events: []*record.ChainEvent{block(1, 1, 0, 0, 0), block(2, 2, 1, 0, 0),
			reorg(2, &record.OrphanedBlock{Number: 2, Hash: []byte{5}})}, err: "reorg orphans"},
		{name: "reorg without ancestor", events: []*record.ChainEvent{block(1, 1, 0, 0, 0), reorg(1, &record.OrphanedBlock{Number: 1, Hash: []byte{1}})}, err: "no produced common ancestor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chain, _, err := Check(tc.events, 0, true)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(chain) != tc.length {
				t.Fatalf("chain of %d blocks, want %d", len(chain), tc.length)
			}
		})
	}
}
