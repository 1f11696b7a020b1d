package store

import (
	"context"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Settled blocks: a block at least Config.ReorgWindow blocks below its
// chain's indexed head can no longer be replaced (ingest stops on a reorg
// deeper than its own window), and every block a reorg ever orphaned is in
// orphaned_blocks (migration 7). So a history row of such a block, whose
// detail carries its block's timestamps, is canonical unless its block is
// in orphaned_blocks, and a list page renders it without reading
// block_lookup: one ClickHouse query per page instead of two.
//
// Why this holds with a snapshot read seconds ago: the head is read before
// the orphans. The sink writes a reorg's removal markers before it moves the
// head, so every orphaning the head read reflects is in the orphans read
// after it, and a later reorg can only orphan blocks within the window of a
// later, higher head. On a cluster the two tables replicate independently,
// so a replica may show a head before a removal marker written earlier; the
// window's margin over ingest's (1,024 against 256 by default) is how far
// the head may run ahead of a lagging marker, in blocks.

const (
	// settledRefresh is how often the snapshot is read again: the newest
	// blocks it leaves to block_lookup reads are those of the last few
	// seconds past the window.
	settledRefresh = 5 * time.Second
	// maxOrphans bounds the snapshot's size; with more orphaned blocks than
	// this every row is checked against block_lookup.
	maxOrphans = 100_000
)

// qOrphanedBlocks reads every block ever marked removed on the tracked
// chains (maxOrphans + 1 at most, to tell a full set from a cut one).
const qOrphanedBlocks = `SELECT chain_id, number, hash
FROM orphaned_blocks
WHERE chain_id IN ?
LIMIT 1 BY chain_id, number, hash
LIMIT ?`

type orphanKey struct {
	chainID, number uint64
	hash            Hash
}

// settledSnapshot tells settled canonical rows apart; the zero value (and
// nil) settles nothing.
type settledSnapshot struct {
	// below is, per chain, the first block number that is not settled.
	below   map[uint64]uint64
	orphans map[orphanKey]struct{}
}

// canonical reports whether r is known canonical without a block read: its
// block is settled, was never orphaned, and r carries its timestamps.
func (p *settledSnapshot) canonical(chainID uint64, r *IndexRow) bool {
	return r.blockTime && p.settledBlock(chainID, r.Block.Number, r.BlockHash)
}

// settledNumber reports whether the chain's block at number is settled:
// whichever block there was never orphaned is canonical.
func (p *settledSnapshot) settledNumber(chainID, number uint64) bool {
	return p != nil && number < p.below[chainID]
}

// settledBlock reports whether the block (number, hash) is settled and was
// never orphaned: canonical.
func (p *settledSnapshot) settledBlock(chainID, number uint64, hash Hash) bool {
	if !p.settledNumber(chainID, number) {
		return false
	}
	_, orphaned := p.orphans[orphanKey{chainID, number, hash}]
	return !orphaned
}

type settledCache struct {
	mu   sync.Mutex
	at   time.Time
	snap *settledSnapshot
}

// settled returns a snapshot at most settledRefresh old. When it cannot be
// read, the snapshot settles nothing: every row is then checked against
// block_lookup, whose own errors reach the caller.
func (s *ClickHouse) settled(ctx context.Context) *settledSnapshot {
	c := &s.settledBlocks
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap != nil && s.now().Sub(c.at) < settledRefresh {
		return c.snap
	}
	// Detached from the request: a cancelled request must not leave the
	// others without a snapshot until the next refresh.
	snap, err := s.readSettled(context.WithoutCancel(ctx))
	if err != nil {
		s.logger.Warn("store: settled blocks not read; history rows are checked against block_lookup", "err", err)
		snap = &settledSnapshot{} // tried again after settledRefresh
	}
	c.snap, c.at = snap, s.now()
	return snap
}

func (s *ClickHouse) readSettled(ctx context.Context) (*settledSnapshot, error) {
	heads, err := s.Heads(ctx) // read before the orphans, see above
	if err != nil {
		return nil, err
	}
	snap := &settledSnapshot{below: make(map[uint64]uint64, len(heads)), orphans: map[orphanKey]struct{}{}}
	if len(s.chains) == 0 {
		return snap, nil
	}
	rows, done, err := s.query(ctx, "orphaned_blocks", qOrphanedBlocks, clickhouse.GroupSet{Value: s.chains}, maxOrphans+1)
	if err != nil {
		return nil, err
	}
	defer done()
	err = eachRow("orphaned_blocks", rows, func() error {
		var (
			k    orphanKey
			hash string
		)
		if err := rows.Scan(&k.chainID, &k.number, &hash); err != nil {
			return scanError("orphaned_blocks", err)
		}
		copy(k.hash[:], hash)
		snap.orphans[k] = struct{}{}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(snap.orphans) > maxOrphans {
		s.logger.Warn("store: too many orphaned blocks to cache; history rows are checked against block_lookup",
			"orphaned_blocks", len(snap.orphans), "max", maxOrphans)
		return &settledSnapshot{}, nil
	}
	window := uint64(s.cfg.ReorgWindow)
	for id, h := range heads {
		if h.Exists && h.Number+1 > window {
			snap.below[id] = h.Number + 1 - window
		}
	}
	return snap, nil
}
