package store

// Named queries. Every one is bounded: a key-prefix filter on the table's
// sort key (chain_id, then number/hash/block) so ClickHouse reads only the
// granules it needs (18.16 has no read-in-order: an unbounded
// ORDER BY ... LIMIT reads the whole chain), and a LIMIT. Parameters are
// bound with clickhouse-go's positional binding, never spliced.
//
// FINAL collapses the versions of a ReplacingMergeTree key before the WHERE
// runs (18.16 does not move WHERE to PREWHERE under FINAL, which the reorg
// test checks), so a replaced or removed row is never served.
const (
	blockColumns = `chain_id, number, hash, parent_hash, timestamp, timestamp_ms, min_delay_excess,
	base_fee, gas_used, gas_limit, gas_cost, fees_spent, tx_count, cumulative_transactions`

	// qHeads reads the head of every tracked chain (chain_heads holds one
	// key per chain).
	qHeads = `SELECT chain_id, number, hash, timestamp
FROM chain_heads FINAL
WHERE chain_id IN ?
LIMIT 10000`

	// qLookupRange reads the newest version of the blocks in [lo, hi] from
	// block_lookup (migration 5): one column, where qBlocksRange reads 14
	// columns of blocks (half the server's CPU for a range of 11 or 64
	// blocks on the 5,000,000-transaction corpus: bench/history.md, "The
	// newest blocks from block_lookup"). The caller checks removed.
	qLookupRange = `SELECT number, argMax(header, version), argMax(removed, version)
FROM block_lookup
WHERE chain_id = ? AND number >= ? AND number <= ?
GROUP BY number`

	// qBlocksRange reads the canonical blocks in [lo, hi], newest first:
	// the blocks written before block_lookup existed.
	qBlocksRange = `SELECT ` + blockColumns + `
FROM blocks FINAL
WHERE chain_id = ? AND number >= ? AND number <= ? AND removed = 0
ORDER BY number DESC
LIMIT ?`

	// qHashToNumber resolves a hash through block_hashes (sorted by hash).
	qHashToNumber = `SELECT number
FROM block_hashes FINAL
WHERE chain_id = ? AND hash = unhex(?) AND removed = 0
LIMIT 1`

	// qBlockTxLists reads the block_transactions rows of blocks (numbers IN
	// ?): one row and one column per block (migration 18). Every block at
	// those numbers is read (child rows are keyed by block hash), and the
	// caller keeps the canonical block's: filtering here by (number, hash)
	// pairs made a read of four blocks cost the server a fifth more
	// (bench/history.md, "Coalesced point reads").
	qBlockTxLists = `SELECT block_number, block_hash, entry
FROM block_transactions FINAL
WHERE chain_id = ? AND block_number IN ?
LIMIT 10000`

	// qBlockTxs reads the transactions of blocks processed before migration
	// 18, which have no block_transactions row, from transactions_by_block:
	// from index ? on, at most ? of each block, as qBlockTxLists.
	qBlockTxs = `SELECT block_number, block_hash, tx_index, hash, type, from_address, to_address, contract_address, value, gas,
	gas_price, effective_gas_price, nonce, input_selector, toUInt64(input_length), status, gas_used
FROM transactions_by_block FINAL
WHERE chain_id = ? AND block_number IN ? AND tx_index >= ?
ORDER BY block_number, block_hash, tx_index
LIMIT ? BY block_number, block_hash`

	qMigrations = `SELECT max(version) FROM schema_migrations`
)
