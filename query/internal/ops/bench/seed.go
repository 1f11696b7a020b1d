// Package bench holds the query service's benchmark tools: a seeder that
// fills the blocks tables with synthetic chains fast, and an open-loop HTTP
// load generator that reports latency percentiles. cmd/querybench wraps
// both.
package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// SeedConfig describes one synthetic chain.
type SeedConfig struct {
	ChainID uint64
	// First is the first block number; Blocks blocks are written, Step
	// numbers apart (Step 100 makes the every-100th-block gaps of replays).
	First, Blocks, Step uint64
	// Chunk is the rows per INSERT ... SELECT (default 1,000,000).
	Chunk uint64
	// Version of every row (default 1).
	Version uint64
}

// Synthetic rows are computed by ClickHouse from numbers(): hashes are
// SHA256("chain:number"), parents link to the previous block, blocks are 2 s
// apart from 2023-11-14, and a block has number % 5 transactions.
const (
	seedBlocks = `INSERT INTO blocks (chain_id, number, hash, parent_hash, timestamp, base_fee, gas_used, gas_limit,
	gas_cost, fees_spent, tx_count, cumulative_transactions, removed, version)
SELECT chain, n, SHA256(concat(toString(chain), ':', toString(n))), SHA256(concat(toString(chain), ':', toString(n - step))),
	toUInt64(1700000000 + n * 2), '25000000000', toUInt64(21000 * (n % 5)), toUInt64(15000000), '0',
	toString(toUInt64(21000 * (n % 5)) * 25000000000), toUInt32(n % 5), toUInt64(n * 2), toUInt8(0), toUInt64(ver)
FROM (SELECT toUInt64(?) AS chain, toUInt64(?) AS step, toUInt64(?) AS ver, toUInt64(? + number * step) AS n FROM numbers(?, ?))`

	seedHashes = `INSERT INTO block_hashes (chain_id, hash, number, removed, version)
SELECT chain, SHA256(concat(toString(chain), ':', toString(n))), n, toUInt8(0), toUInt64(ver)
FROM (SELECT toUInt64(?) AS chain, toUInt64(?) AS step, toUInt64(?) AS ver, toUInt64(? + number * step) AS n FROM numbers(?, ?))`

	seedHead = `INSERT INTO chain_heads (chain_id, number, hash, timestamp, cumulative_transactions, version)
SELECT chain_id, number, hash, timestamp, cumulative_transactions, version
FROM blocks WHERE chain_id = ? AND number = ? LIMIT 1`
)

// Seed writes the chain in chunks of INSERT ... SELECT (fast on 18.16:
// the rows never cross the wire) and sets its head. Each chunk has its own
// deadline.
func Seed(ctx context.Context, conn driver.Conn, c SeedConfig, logger *slog.Logger) error {
	if c.Blocks == 0 {
		return errors.New("bench: Blocks must be positive")
	}
	if c.Step == 0 {
		c.Step = 1
	}
	if c.Chunk == 0 {
		c.Chunk = 1_000_000
	}
	if c.Version == 0 {
		c.Version = 1
	}
	start := time.Now()
	for off := uint64(0); off < c.Blocks; off += c.Chunk {
		n := min(c.Chunk, c.Blocks-off)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		err := conn.Exec(cctx, seedBlocks, c.ChainID, c.Step, c.Version, c.First, off, n)
		if err == nil {
			err = conn.Exec(cctx, seedHashes, c.ChainID, c.Step, c.Version, c.First, off, n)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("bench: seed rows %d..%d: %w", off, off+n, err)
		}
		logger.Info("seeded", "chain_id", c.ChainID, "rows", off+n, "of", c.Blocks, "elapsed", time.Since(start).Round(time.Millisecond))
	}
	hctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	last := c.First + (c.Blocks-1)*c.Step
	if err := conn.Exec(hctx, seedHead, c.ChainID, last); err != nil {
		return fmt.Errorf("bench: seed head: %w", err)
	}
	return nil
}
