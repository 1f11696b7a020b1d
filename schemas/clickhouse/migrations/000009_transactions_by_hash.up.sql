-- Transactions by hash again (migration 6's transaction_lookup), laid out as
-- address_lists is (migration 8): a transaction that misses the page cache
-- costs two column reads instead of six, and, with the block's header
-- fields in its detail, no block_lookup read once its block is settled.
--
--   tx_key  FixedString(72): chain_id (8 bytes, big-endian) | hash (32) |
--           block_hash (32): one row per block that included the
--           transaction; a lookup is the range of the first 40 bytes
--           (schemas/clickhouse/transactions.go).
--   entry   block_number (8, big-endian) | tx_index (4, big-endian) | the
--           TxDetail protobuf, which carries the block's timestamps, base fee
--           and minimum delay excess (history.proto).
--
-- Idempotence and reorgs as in migration 6. The processor writes this table
-- in place of transaction_lookup; rows written there before are copied by
-- schemas/clickhouse/upgrades/000009_copy_transaction_lookup.sql (docs/
-- transactions.md, "Upgrading").
CREATE TABLE IF NOT EXISTS transactions_by_hash (
    tx_key FixedString(72),
    entry String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY tx_key
SETTINGS index_granularity = 256
