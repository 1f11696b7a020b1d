-- What an address holds: ERC-20, ERC-721 and ERC-1155 balances derived from
-- the indexed transfer logs, at any block (docs/balances.md). Written by the
-- processor's sink (--processor.balances) with the block tables and with
-- their idempotence: ReplacingMergeTree(version), version = the Kafka offset
-- of the block record, so a redelivered record rewrites identical rows.
--
-- balances: one table of signed amounts whose sum over the right rows is a
-- holder's balance of a token at a block. Four levels of rows, each ordered
-- so that the rows one read needs are a few key ranges whatever the holder's
-- number of transfers:
--
--   bal_key  FixedString(130): chain_id (8 bytes) | level (1) | parent (8)
--            | holder (20) | token (20) | token_id (32) | kind (1) |
--            bucket (8) | block_hash (32); integers big-endian, so the
--            bytes sort as the levels are read and the pairs as lists show
--            them (schemas/clickhouse/balances.go).
--   amount   the signed amount, decimal ("-1000000000000000000").
--
--   level 0  deltas: a holder's net change of one token in one block, one
--            row per (holder, token, token id, block, block hash); parent =
--            block / 1024, bucket = block. Rows of orphaned blocks stay and
--            are never counted: readers keep the canonical block hashes.
--   level 1  sums of the canonical deltas of a settled bucket of 1,024
--            blocks; parent = block / 1,048,576, bucket = block / 1,024.
--   level 2  sums of the level-1 rows of a settled bucket of 1,048,576
--            blocks; parent = 0, bucket = block / 1,048,576.
--   level 3  opening balances of a chain indexed from a block after genesis:
--            the node's balanceOf at the block before the first indexed one
--            (bucket), fetched once per (holder, token) when first read.
--
-- kind is the transfer's standard (1 ERC-20, 2 ERC-721, 3 ERC-1155, from the
-- log's shape), so a contract that is several kinds at once has a balance
-- per kind; token_id is zero for ERC-20. The sums of levels 1 and 2 cover
-- only settled blocks (below the head by more than any reorg can reach), so
-- no reorg ever changes them.
CREATE TABLE IF NOT EXISTS balances (
    bal_key FixedString(130),
    amount String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY bal_key
SETTINGS index_granularity = 256;

-- The pairs (token, token id, kind) each holder ever had a delta of, one
-- row per (holder, pair) once merged: the directory a page of a balance
-- list takes its pairs from, so it reads the rows of those pairs only.
--
--   pair_key  FixedString(81): chain_id (8) | holder (20) | token (20) |
--             token_id (32) | kind (1).
--
-- Written by the sink with each delta (version: the Kafka offset). A pair
-- only an orphaned block had stays listed here and reads as a zero balance.
CREATE TABLE IF NOT EXISTS balance_pairs (
    pair_key FixedString(81),
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY pair_key
SETTINGS index_granularity = 256;

-- Per chain, how far the balances go:
--   kind 0  value = the first block whose deltas were written (version =
--           2^64-1 - value, so the lowest wins): a chain whose balances
--           start after its first blocks needs opening balances;
--   kind 1  value = level-1 buckets summed, from bucket 0 (version = value);
--   kind 2  value = level-2 buckets summed, from bucket 0 (version = value).
CREATE TABLE IF NOT EXISTS balance_progress (
    chain_id UInt64,
    kind UInt8,
    value UInt64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (chain_id, kind);

-- Every ERC-721 and ERC-1155 transfer again, by token and token id: who owns
-- an NFT, and which token ids a collection has.
--
--   nft_key  FixedString(109): chain_id (8) | token (20) | token_id (32) |
--            kind (1) | block_number (8) | log_index (4) | sub_index (4, the
--            element of a TransferBatch) | block_hash (32).
--   entry    from (20 bytes) | to (20) | the amount, decimal.
--
-- Idempotence and reorgs as balances' level 0.
CREATE TABLE IF NOT EXISTS nft_transfers (
    nft_key FixedString(109),
    entry String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY nft_key
SETTINGS index_granularity = 256
