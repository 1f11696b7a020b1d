package balances

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// BlockRef names one block.
type BlockRef struct {
	Number uint64
	Hash   [32]byte
}

// Canonical says which blocks are canonical. Deltas and NFT transfers are
// keyed by their block's hash, so the rows of an orphaned block stay and
// are dropped by every read that is not of settled, summed buckets.
type Canonical interface {
	// AreCanonical returns the blocks, of those given, that are canonical
	// now (a number whose block a reorg removed and whose replacement is
	// not written yet has none).
	AreCanonical(ctx context.Context, chainID uint64, blocks []BlockRef) (map[BlockRef]bool, error)
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

// AreCanonical implements Canonical.
func (t BlockTable) AreCanonical(ctx context.Context, chainID uint64, blocks []BlockRef) (map[BlockRef]bool, error) {
	out := make(map[BlockRef]bool, len(blocks))
	if len(blocks) == 0 {
		return out, nil
	}
	seen := map[uint64]bool{}
	var set []any
	for _, b := range blocks {
		if !seen[b.Number] {
			seen[b.Number] = true
			set = append(set, b.Number)
		}
	}
	hashes := map[uint64][32]byte{}
	if err := t.read(ctx, hashes, "canonical_blocks", qCanonicalIn, chainID, clickhouse.GroupSet{Value: set}); err != nil {
		return nil, err
	}
	for _, b := range blocks {
		if h, ok := hashes[b.Number]; ok && h == b.Hash {
			out[b] = true
		}
	}
	return out, nil
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
