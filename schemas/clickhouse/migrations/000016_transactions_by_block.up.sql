-- The transactions of each block, as migration 2's `transactions` held them
-- (with migration 14's access_list), at index granularity 1,024 instead of
-- the default 8,192.
--
-- Why: a block holds about ten transactions, and GET /blocks/{n}/transactions
-- reads one block's rows with FINAL: at 8,192 rows per granule it read
-- 8,000-9,000 rows (3.8-4.4 MB) per request at rest and 21,000-33,000 while
-- a backfill kept several parts unmerged; at 1,024 it reads about 1,024 rows
-- (0.49 MB, 1.9 ms against 7.2 ms) for 2.1% more bytes on disk (bench/
-- history.md, "Reads during a backfill on a quiet machine").
--
-- The listings show an input's method selector and size, never the input
-- itself: input_selector and input_length are computed by ClickHouse on
-- every insert (MATERIALIZED), so a listing does not read the input, the
-- largest column (about half of the bytes a block's transactions read).
--
-- The processor writes this table in place of `transactions`, and every
-- reader reads it (block transactions, the latest-transactions lists,
-- webhook replay). Rows written to `transactions` before are copied by
-- schemas/clickhouse/upgrades/000016_copy_transactions.sql (docs/
-- transactions.md, "Upgrading").
CREATE TABLE IF NOT EXISTS transactions_by_block (
    chain_id UInt64,
    block_number UInt64,
    block_hash FixedString(32),
    block_timestamp UInt64,
    tx_index UInt32,
    hash FixedString(32),
    type UInt8,
    from_address String,
    to_address String,
    value String,
    gas UInt64,
    gas_price String,
    max_fee_per_gas String,
    max_priority_fee_per_gas String,
    nonce UInt64,
    input String,
    input_selector String MATERIALIZED substring(input, 1, 4),
    input_length UInt32 MATERIALIZED length(input),
    status UInt8,
    gas_used UInt64,
    cumulative_gas_used UInt64,
    effective_gas_price String,
    contract_address String,
    access_list String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (chain_id, block_number, block_hash, tx_index)
SETTINGS index_granularity = 1024
