package balances

import (
	"context"
	"math"

	"github.com/ClickHouse/clickhouse-go/v2"

	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// Progress is how far a chain's balances go (balance_progress).
type Progress struct {
	// First is the first block whose deltas were written; HasFirst is
	// false until the sink wrote any.
	First    uint64
	HasFirst bool
	// Buckets: every level-1 bucket below it is summed (level-1 rows), from
	// the bucket of First on. Epochs: the same for level-2 buckets.
	Buckets, Epochs uint64
}

// Complete reports whether the balances include every transfer of the
// chain: its deltas start at its first block (block 0 or 1: no chain has a
// transaction in its genesis block). Otherwise they need opening balances,
// read at OpeningBlock.
func (p Progress) Complete() bool { return !p.HasFirst || p.First <= 1 }

// OpeningBlock is the block opening balances are read at: the one before
// the first with deltas.
func (p Progress) OpeningBlock() uint64 { return p.First - 1 }

const qProgress = `SELECT kind, argMax(value, version)
FROM balance_progress
WHERE chain_id = ?
GROUP BY kind`

// ReadProgress reads a chain's progress.
func ReadProgress(ctx context.Context, db DB, chainID uint64) (Progress, error) {
	const name = "balance_progress"
	rows, done, err := db.Query(ctx, name, nil, qProgress, chainID)
	if err != nil {
		return Progress{}, err
	}
	defer done()
	var p Progress
	err = each(name, rows, func() error {
		var (
			kind  uint8
			value uint64
		)
		if err := rows.Scan(&kind, &value); err != nil {
			return scanErr(name, err)
		}
		switch kind {
		case schema.ProgressFirstBlock:
			p.First, p.HasFirst = value, true
		case schema.ProgressBuckets:
			p.Buckets = value
		case schema.ProgressEpochs:
			p.Epochs = value
		}
		return nil
	})
	return p, err
}

// ProgressColumns are the columns of a balance_progress INSERT.
const ProgressColumns = "chain_id, kind, value, version"

// ProgressVersion is the version a progress row is written with: the
// highest value wins, except for the first block, where the lowest does.
func ProgressVersion(kind uint8, value uint64) uint64 {
	if kind == schema.ProgressFirstBlock {
		return math.MaxUint64 - value
	}
	return value
}

// writeProgress records one progress value.
func writeProgress(ctx context.Context, db DB, chainID uint64, kind uint8, value uint64) error {
	b, err := db.Insert(ctx, "INSERT INTO balance_progress ("+ProgressColumns+")")
	if err != nil {
		return err
	}
	if err := b.Append(chainID, kind, value, ProgressVersion(kind, value)); err != nil {
		_ = b.Abort()
		return err
	}
	if err := b.Send(); err != nil {
		return classify(err, "insert balance_progress")
	}
	return nil
}

// settings for reads that must not read more than budget rows: ClickHouse
// refuses such a read from its index before reading data (code 158).
func rowBudget(budget int) clickhouse.Settings {
	return clickhouse.Settings{"max_rows_to_read": budget} // read_overflow_mode is "throw" by default
}
