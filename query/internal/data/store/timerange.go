package store

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// qBlocksBetween bounds the blocks of a chain whose timestamps fall in a
// range. Without FINAL and without the removed flag: an orphaned block has
// about the timestamp of the one that replaced it, so the bounds stay
// right to within a reorg, and callers that need exact times filter the
// rows they read by their canonical block's timestamp.
const qBlocksBetween = `SELECT count(), min(number), max(number) FROM blocks
WHERE chain_id = ? AND timestamp >= ? AND timestamp < ?`

// BlocksBetween returns the lowest and highest block number of chainID
// with a timestamp (Unix seconds) in [from, to); ok is false when there is
// none. It reads the chain's timestamp column whole (about a second for
// 100 million blocks): for background work (export jobs), not for pages.
func (s *ClickHouse) BlocksBetween(ctx context.Context, chainID, from, to uint64) (lo, hi uint64, ok bool, err error) {
	// Every core: it is one scan, not a point read (queryWith's default).
	rows, done, err := s.queryWith(ctx, "blocks_between", clickhouse.Settings{"max_threads": 0}, qBlocksBetween, chainID, from, to)
	if err != nil {
		return 0, 0, false, err
	}
	defer done()
	var n uint64
	err = eachRow("blocks_between", rows, func() error { return rows.Scan(&n, &lo, &hi) })
	return lo, hi, n > 0, err
}
