package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/balances"
)

// The balance routes read through pkg/balances, on the store's connection
// and with its reads' settings, deadline, metrics and retries (BalanceDB),
// and with the store's knowledge of settled blocks (AreCanonical).

// BalanceDB is the store as pkg/balances' DB. Its outages wrap both
// ErrUnavailable and balances.ErrUnavailable.
func (s *ClickHouse) BalanceDB() balances.DB { return balanceDB{s} }

type balanceDB struct{ s *ClickHouse }

func (d balanceDB) Query(ctx context.Context, name string, settings clickhouse.Settings, q string, args ...any) (driver.Rows, func(), error) {
	rows, done, err := d.s.queryWith(ctx, name, settings, q, args...)
	if err != nil {
		return nil, func() {}, balanceError(err)
	}
	return rows, func() { _ = rows.Close(); done() }, nil
}

func (d balanceDB) Insert(ctx context.Context, q string) (driver.Batch, error) {
	conn, err := d.s.conn.Get(ErrUnavailable)
	if err != nil {
		return nil, balanceError(err)
	}
	b, err := conn.PrepareBatch(ctx, q)
	if err != nil {
		return nil, balanceError(classify("prepare insert", err))
	}
	return b, nil
}

func balanceError(err error) error {
	if errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("%w: %w", balances.ErrUnavailable, err)
	}
	return err
}

// AreCanonical implements balances.Canonical: a block of the settled
// snapshot is canonical without a read (settled.go), the others are
// checked against block_lookup.
func (s *ClickHouse) AreCanonical(ctx context.Context, chainID uint64, blocks []balances.BlockRef) (map[balances.BlockRef]bool, error) {
	out := make(map[balances.BlockRef]bool, len(blocks))
	settled := s.settled(ctx)
	var numbers []uint64
	seen := map[uint64]bool{}
	for _, b := range blocks {
		if settled.settledBlock(chainID, b.Number, Hash(b.Hash)) {
			out[b] = true
		} else if !seen[b.Number] {
			seen[b.Number] = true
			numbers = append(numbers, b.Number)
		}
	}
	if len(numbers) == 0 {
		return out, nil
	}
	canon, err := s.CanonicalBlocks(ctx, chainID, numbers)
	if err != nil {
		return nil, balanceError(err)
	}
	for _, b := range blocks {
		if c, ok := canon[b.Number]; ok && c.Hash == Hash(b.Hash) {
			out[b] = true
		}
	}
	return out, nil
}
