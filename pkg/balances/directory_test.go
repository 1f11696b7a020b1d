package balances

import (
	"context"
	"sync"
	"testing"

	"github.com/moraine-data/moraine/pkg/evm"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// A directory is read once per holder and head, again under a new head
// (a new block, or a reorg's new hash at the same height), never
// remembered for a holder of too many pairs, and forgotten a generation
// after the budget fills.
func TestDirectoryRemembers(t *testing.T) {
	ctx := context.Background()
	d := newDirectory(10, 4)
	sizes := map[evm.Address]int{alice: 3, bob: 5, carol: 4}
	var mu sync.Mutex
	reads := map[evm.Address]int{}
	get := func(h evm.Address, head Head) ([]schema.PairBytes, bool) {
		t.Helper()
		ps, ok, err := d.get(ctx, dirKey{1, h}, head, func(_ context.Context, n int) ([]schema.PairBytes, bool, error) {
			mu.Lock()
			reads[h]++
			mu.Unlock()
			out := make([]schema.PairBytes, min(n, sizes[h]))
			for i := range out {
				out[i][0] = byte(i)
			}
			return out, len(out) < n, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return ps, ok
	}
	h1, h1b, h2 := Head{Number: 100, Hash: [32]byte{1}}, Head{Number: 100, Hash: [32]byte{2}}, Head{Number: 101}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if ps, ok := get(alice, h1); !ok || len(ps) != 3 {
				t.Errorf("alice: %d pairs, %v", len(ps), ok)
			}
		})
	}
	wg.Wait()
	if reads[alice] != 1 {
		t.Fatalf("20 pages under one head read the directory %d times", reads[alice])
	}
	get(alice, h1b)
	get(alice, h2)
	get(alice, h2)
	if reads[alice] != 3 {
		t.Fatalf("two new heads: %d reads, want 3", reads[alice])
	}
	for range 3 {
		if _, ok := get(bob, h2); ok {
			t.Fatal("bob's 5 pairs remembered, past the limit of 4")
		}
	}
	if reads[bob] != 1 {
		t.Fatalf("bob's directory read %d times, want once (then known too large)", reads[bob])
	}
	// The budget of 10 pairs: two generations of 5. Carol's 4 go on
	// alice's 3 (7 > 5): alice moves to the old generation, still found.
	get(carol, h2)
	get(alice, h2)
	if reads[alice] != 3 || reads[carol] != 1 {
		t.Fatalf("reads %v", reads)
	}
}
