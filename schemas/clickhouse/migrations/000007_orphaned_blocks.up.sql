-- Every block ever marked removed (orphaned by a reorg), filled by a
-- materialized view on every insert into `blocks`. The query service reads
-- it whole every few seconds: a history row of a block deeper than the
-- reorg window (--query.reorg-window) is canonical unless its block is
-- here, so list pages of such blocks need no block_lookup read
-- (query/internal/store keepCanonical). Reorgs are rare and shallow, so the
-- table stays small. A block that became canonical again is still listed;
-- readers check its rows against block_lookup as they do a recent block's.
-- Blocks marked removed before this migration are not listed; their
-- address_index rows were written without block timestamps and are always
-- checked against block_lookup.

CREATE TABLE IF NOT EXISTS orphaned_blocks (
    chain_id UInt64,
    number UInt64,
    hash FixedString(32),
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (chain_id, number, hash);

CREATE MATERIALIZED VIEW IF NOT EXISTS orphaned_blocks_mv TO orphaned_blocks AS
SELECT chain_id, number, hash, version
FROM blocks
WHERE removed = 1
