-- A block's transactions as GET /blocks/{n}/transactions lists them, one row
-- per block: entry is a BlockTxList protobuf (history.proto) of the
-- block's transactions in index order, each with what the listing renders
-- (the input cut to its method selector). The processor writes a row for
-- every block that has transactions, beside its transactions_by_block rows.
--
-- Why: the server's cost of a read is mostly a granule of every column it
-- reads. The listing read 17 columns of transactions_by_block (about 2.4 ms
-- of ClickHouse CPU a read at rest on the 5,000,000-transaction corpus, and
-- twice that during a backfill); one column here costs 0.9 ms, as much as a
-- block's header from block_lookup, for about 60 bytes more per transaction
-- on disk (bench/history.md, "A block's transactions in one row"). Index
-- granularity 32: a row holds about ten transactions.
--
-- Keyed by block hash as the other child rows are: an orphaned block's row
-- stays and is never joined to the canonical block. Blocks processed before
-- this migration have no row; the query service reads their transactions
-- from transactions_by_block (docs/transactions.md, "Upgrading past
-- migration 18").
CREATE TABLE IF NOT EXISTS block_transactions (
    chain_id UInt64,
    block_number UInt64,
    block_hash FixedString(32),
    entry String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (chain_id, block_number, block_hash)
SETTINGS index_granularity = 32
