package sink

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/balances"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// The balance tables (migration 12; package balances): each block's net
// token changes per holder (balances, level 0) and their pairs
// (balance_pairs), its NFT transfers by token id (nft_transfers), and per
// chain the lowest block written (balance_progress), which tells readers whether a chain's balances need
// opening balances. They are child rows like the transaction-history
// tables: written before the block rows, versioned by the same offsets.
// Summing settled buckets is the Roller's, which the consumer notifies of
// each head it writes.

// insertBalances inserts b's balance rows: one INSERT per table.
func (w *Writer) insertBalances(ctx context.Context, b *Batch) error {
	d, n := b.balances.Deltas, b.balances.NFTs
	err := w.send(ctx, "balances", balances.BalanceColumns, len(d), func(batch driver.Batch, i int) error {
		return batch.Append(view(d[i].Key[:]), d[i].Amount, b.deltaVersions[i])
	})
	if err != nil {
		return err
	}
	// The pair directory: one row per delta (duplicates collapse).
	err = w.send(ctx, "balance_pairs", "pair_key, version", len(d), func(batch driver.Batch, i int) error {
		k := schema.PairKeyOf(&d[i].Key)
		return batch.Append(string(k[:]), b.deltaVersions[i])
	})
	if err != nil {
		return err
	}
	err = w.send(ctx, "nft_transfers", "nft_key, entry, version", len(n), func(batch driver.Batch, i int) error {
		return batch.Append(view(n[i].Key[:]), view(n[i].Entry), b.nftVersions[i])
	})
	if err != nil {
		return err
	}
	type first struct{ chainID, number uint64 }
	firsts := make([]first, 0, len(b.firstBlocks))
	for c, n := range b.firstBlocks {
		firsts = append(firsts, first{c, n})
	}
	return w.send(ctx, "balance_progress", balances.ProgressColumns, len(firsts), func(batch driver.Batch, i int) error {
		f := firsts[i]
		return batch.Append(f.chainID, schema.ProgressFirstBlock, f.number, balances.ProgressVersion(schema.ProgressFirstBlock, f.number))
	})
}
