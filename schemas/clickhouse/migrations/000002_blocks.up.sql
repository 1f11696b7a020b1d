-- Blocks and what they contain. Every table is a ReplacingMergeTree whose
-- version is the Kafka offset of the record that wrote the row: a redelivered
-- record writes identical rows (collapsed by merges and by FINAL), and a later
-- record for the same key (a reorg's replacement) wins.
--
-- Child rows (transactions, logs, internal transactions) are keyed by block
-- hash as well as number, so rows of an orphaned block never mix with the
-- canonical block's rows: readers join through the canonical hash.
--
-- Hashes are FixedString(32); addresses are String holding the 20 raw bytes
-- (empty when absent); wei amounts are decimal String (no UInt256 on 18.16).

CREATE TABLE IF NOT EXISTS blocks (
    chain_id UInt64,
    number UInt64,
    hash FixedString(32),
    parent_hash FixedString(32),
    timestamp UInt64,
    timestamp_ms Nullable(UInt64),
    min_delay_excess Nullable(UInt64),
    base_fee String,
    gas_used UInt64,
    gas_limit UInt64,
    gas_cost String,
    ext_data_gas_used String,
    fees_spent String,
    tx_count UInt32,
    cumulative_transactions UInt64,
    miner String,
    state_root FixedString(32),
    receipts_root FixedString(32),
    transactions_root FixedString(32),
    size UInt64,
    extra_data String,
    removed UInt8,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (chain_id, number)
SETTINGS index_granularity = 1024;

-- Hash -> number, for GET /blocks/{hash}. A separate table ordered by hash
-- answers in one granule instead of scanning the chain (FIELD-NOTES).
CREATE TABLE IF NOT EXISTS block_hashes (
    chain_id UInt64,
    hash FixedString(32),
    number UInt64,
    removed UInt8,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (chain_id, hash)
SETTINGS index_granularity = 1024;

-- The newest block of each chain, so readers know the head without a max() scan.
CREATE TABLE IF NOT EXISTS chain_heads (
    chain_id UInt64,
    number UInt64,
    hash FixedString(32),
    timestamp UInt64,
    cumulative_transactions UInt64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY chain_id;

CREATE TABLE IF NOT EXISTS transactions (
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
    status UInt8,
    gas_used UInt64,
    cumulative_gas_used UInt64,
    effective_gas_price String,
    contract_address String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (chain_id, block_number, block_hash, tx_index);

CREATE TABLE IF NOT EXISTS logs (
    chain_id UInt64,
    block_number UInt64,
    block_hash FixedString(32),
    block_timestamp UInt64,
    tx_index UInt32,
    tx_hash FixedString(32),
    log_index UInt32,
    address String,
    topic0 String,
    topic1 String,
    topic2 String,
    topic3 String,
    data String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (chain_id, block_number, block_hash, log_index);

CREATE TABLE IF NOT EXISTS internal_transactions (
    chain_id UInt64,
    block_number UInt64,
    block_hash FixedString(32),
    block_timestamp UInt64,
    tx_index UInt32,
    tx_hash FixedString(32),
    trace_position UInt32,
    call_index String,
    depth UInt32,
    type String,
    from_address String,
    to_address String,
    value String,
    gas UInt64,
    gas_used UInt64,
    error String,
    revert_reason String,
    input String,
    output String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (chain_id, block_number, block_hash, tx_index, trace_position)
