package balances

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Canonical says which block is canonical at a number. Deltas are keyed by
// their block's hash, so the rows of an orphaned block stay in balances and
// are dropped by every read that is not of settled, summed buckets.
type Canonical interface {
	// CanonicalHashes returns the canonical block hash of each number that
	// has a canonical block (a number whose block a reorg removed and whose
	// replacement is not written yet has none).
	CanonicalHashes(ctx context.Context, chainID uint64, numbers []uint64) (map[uint64][32]byte, error)
}

// BlockTable reads canonical hashes from the blocks table: the newest row
// of a number (the sink versions rows by Kafka offset, and writes a
// removed=1 row over each orphaned block) is its canonical block unless it
// is a removal.
type BlockTable struct{ DB DB }

const (
	qCanonicalIn = `SELECT number, argMax(hash, version), argMax(removed, version)
FROM blocks
WHERE chain_id = ? AND number IN ?
GROUP BY number`
	qCanonicalRange = `SELECT number, argMax(hash, version), argMax(removed, version)
FROM blocks
WHERE chain_id = ? AND number >= ? AND number <= ?
GROUP BY number`
)

// CanonicalHashes implements Canonical.
func (t BlockTable) CanonicalHashes(ctx context.Context, chainID uint64, numbers []uint64) (map[uint64][32]byte, error) {
	out := make(map[uint64][32]byte, len(numbers))
	if len(numbers) == 0 {
		return out, nil
	}
	set := make([]any, len(numbers))
	for i, n := range numbers {
		set[i] = n
	}
	return out, t.read(ctx, out, "canonical_blocks", qCanonicalIn, chainID, clickhouse.GroupSet{Value: set})
}

// CanonicalRange returns the canonical hashes of the blocks in [first, last].
func (t BlockTable) CanonicalRange(ctx context.Context, chainID, first, last uint64) (map[uint64][32]byte, error) {
	out := map[uint64][32]byte{}
	return out, t.read(ctx, out, "canonical_range", qCanonicalRange, chainID, first, last)
}

func (t BlockTable) read(ctx context.Context, out map[uint64][32]byte, name, q string, args ...any) error {
	rows, done, err := t.DB.Query(ctx, name, nil, q, args...)
	if err != nil {
		return err
	}
	defer done()
	return each(name, rows, func() error {
		var (
			number  uint64
			hash    string
			removed uint8
		)
		if err := rows.Scan(&number, &hash, &removed); err != nil {
			return scanErr(name, err)
		}
		if removed == 0 {
			var h [32]byte
			copy(h[:], hash)
			out[number] = h
		}
		return nil
	})
}
