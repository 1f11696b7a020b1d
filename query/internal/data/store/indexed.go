package store

import (
	"context"
	"sync"
	"time"
)

// What a webhook replay may cover (query/internal/webhooks/webhookapi): the
// blocks of a chain ClickHouse holds, and the blocks of a time range.
const (
	// qFirstBlock reads the number column of the chain's rows: a scan, so
	// its answer is kept a minute (the lowest block changes only when an
	// operator backfills below it).
	qFirstBlock = `SELECT min(number), count() FROM blocks WHERE chain_id = ? AND removed = 0`
	// qBlockAtOrAfter and qBlockAtOrBefore find the blocks bounding a time
	// range. They scan the chain's timestamps (no index on them); a range
	// is asked for once per replay. Without FINAL: an orphaned block's row
	// has its canonical successor's number and a timestamp as close.
	qBlockAtOrAfter  = `SELECT min(number), count() FROM blocks WHERE chain_id = ? AND timestamp >= ? AND removed = 0`
	qBlockAtOrBefore = `SELECT max(number), count() FROM blocks WHERE chain_id = ? AND timestamp <= ? AND removed = 0`
)

// IndexedRange is what of a chain ClickHouse holds: its lowest and its
// head block (ok false: nothing yet).
type IndexedRange struct {
	First, Head                   uint64
	FirstTimestamp, HeadTimestamp uint64
}

// firstBlocks caches qFirstBlock per chain.
type firstBlocks struct {
	mu sync.Mutex
	m  map[uint64]firstBlock
}

type firstBlock struct {
	number, timestamp uint64
	at                time.Time
}

// Indexed returns the chain's indexed range (ok false: no block yet).
func (s *ClickHouse) Indexed(ctx context.Context, chainID uint64) (IndexedRange, bool, error) {
	heads, err := s.Heads(ctx)
	if err != nil {
		return IndexedRange{}, false, err
	}
	h, ok := heads[chainID]
	if !ok || !h.Exists {
		return IndexedRange{}, false, nil
	}
	r := IndexedRange{Head: h.Number, HeadTimestamp: h.Timestamp}
	c := &s.first
	c.mu.Lock()
	f, cached := c.m[chainID]
	c.mu.Unlock()
	if !cached || s.now().Sub(f.at) > time.Minute {
		n, found, err := s.boundary(ctx, "first_block", qFirstBlock, chainID)
		if err != nil {
			return IndexedRange{}, false, err
		}
		if !found {
			return IndexedRange{}, false, nil
		}
		b, err := s.BlockByNumber(ctx, chainID, n)
		if err != nil {
			return IndexedRange{}, false, err
		}
		f = firstBlock{number: n, timestamp: b.Timestamp, at: s.now()}
		c.mu.Lock()
		if c.m == nil {
			c.m = map[uint64]firstBlock{}
		}
		c.m[chainID] = f
		c.mu.Unlock()
	}
	r.First, r.FirstTimestamp = f.number, f.timestamp
	return r, true, nil
}

// BlockAtTime is the first block at or after unix seconds ts (after), or
// the last at or before it; found false when there is none.
func (s *ClickHouse) BlockAtTime(ctx context.Context, chainID, ts uint64, after bool) (uint64, bool, error) {
	if after {
		return s.boundary(ctx, "block_at_or_after", qBlockAtOrAfter, chainID, ts)
	}
	return s.boundary(ctx, "block_at_or_before", qBlockAtOrBefore, chainID, ts)
}

// boundary runs a min/max query that also counts its rows.
func (s *ClickHouse) boundary(ctx context.Context, name, q string, args ...any) (uint64, bool, error) {
	rows, done, err := s.query(ctx, name, q, args...)
	if err != nil {
		return 0, false, err
	}
	defer done()
	var n, count uint64
	err = eachRow(name, rows, func() error { return scanError(name, rows.Scan(&n, &count)) })
	return n, count > 0, err
}
