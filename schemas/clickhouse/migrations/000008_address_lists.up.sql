-- The per-address lists again (migration 6's address_index), laid out so a
-- page that misses the page cache costs two column reads instead of eleven.
-- A page is a few rows of one address; what it costs cold is one random
-- disk read per column file it touches, so the key that selects and orders
-- the rows is one column, and what a row shows is another:
--
--   list_key  FixedString(81): chain_id (8 bytes) | address (20) | list (1)
--             | block_number (8) | tx_index (4) | position (4) | sub_index (4)
--             | block_hash (32); integers big-endian, so the bytes sort as
--             the list does (schemas/clickhouse/addresslists.go). A page is
--             one range of it: the list's prefix, and the seek bound and
--             block window as the rest.
--   roles     the address's role bits on ListTransactions rows (0 on others),
--             read only by the reads that filter on them.
--   entry     the transaction hash (32 bytes) followed by the detail protobuf
--             of the list (as address_index.detail).
--
-- Lists, roles, details, idempotence (ReplacingMergeTree(version), the Kafka
-- offset of the block record) and reorg handling (the block hash in the key,
-- checked against the canonical block by readers) are as in migration 6.
-- The processor writes this table in place of address_index; rows written
-- to address_index before are copied by schemas/clickhouse/upgrades/
-- 000008_copy_address_index.sql (docs/transactions.md, "Upgrading").
CREATE TABLE IF NOT EXISTS address_lists (
    list_key FixedString(81),
    roles UInt8,
    entry String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY list_key
SETTINGS index_granularity = 256
