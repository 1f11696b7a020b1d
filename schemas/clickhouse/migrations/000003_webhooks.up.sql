-- The Webhooks API's own state: accounts, API keys, webhooks, watched
-- addresses and shared secrets. ClickHouse is the source of truth; the query
-- service mirrors webhooks, addresses and accounts onto the compacted
-- address-watch topic (query/internal/watch) and repairs the topic from these
-- tables after a crash.
--
-- Every table is a ReplacingMergeTree(version): a change inserts the whole new
-- row with a higher version and readers use FINAL (or argMax over version).
-- Nothing is ever deleted: a removed address, a revoked key or a deactivated
-- webhook is a newer row with a flag, so the latest state of every key stays
-- readable. version is a nanosecond clock, monotonic per writer and strictly
-- above the version of the row a change was based on.
--
-- Timestamps are Unix milliseconds in UInt64 (no DateTime64 on 18.16).

CREATE TABLE IF NOT EXISTS accounts (
    id String,
    name String,
    plan String,
    created_at UInt64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY id;

-- Keys are stored only as the hex SHA-256 of the whole key; key_prefix is its
-- first characters, for operators to recognise it. Ordered by hash so that
-- authenticating a request is a point read.
CREATE TABLE IF NOT EXISTS api_keys (
    key_hash String,
    key_id String,
    key_prefix String,
    account_id String,
    created_at UInt64,
    revoked_at UInt64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY key_hash;

-- One row per webhook, keyed by its account so that every read is scoped to
-- the caller's account. DELETE /v1/webhooks/{id} only sets status inactive.
-- request_hash is the SHA-256 of the create request, to answer a retried
-- create (the SDK retries POSTs) with the webhook it already made.
CREATE TABLE IF NOT EXISTS webhooks (
    account_id String,
    id String,
    url String,
    chain_id String,
    event_type String,
    name String,
    description String,
    event_signatures Array(String),
    include_internal_txs UInt8,
    include_logs UInt8,
    status String,
    created_at UInt64,
    request_hash String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (account_id, id);

-- One row per (webhook, lowercase address); address_given keeps the case the
-- client used, which the API echoes. Listing pages by address range.
CREATE TABLE IF NOT EXISTS webhook_addresses (
    webhook_id String,
    address String,
    address_given String,
    removed UInt8,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (webhook_id, address)
SETTINGS index_granularity = 1024;

-- The account's webhook signing secret (64 lowercase hex characters).
CREATE TABLE IF NOT EXISTS shared_secrets (
    account_id String,
    secret String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY account_id
