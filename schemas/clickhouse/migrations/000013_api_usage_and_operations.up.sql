-- The API as a product: the request log and its usage rollups, operator
-- keys, the health check's write probe, and export operations.
--
-- Times are Unix milliseconds in UInt64 (no DateTime64 on 18.16), buckets
-- Unix seconds in UInt32. Partitions are UTC months or days, dropped whole
-- when they pass their retention (chclient.DropPartitionsBefore: 18.16 has
-- no TTL).

-- The request log: one row per request the query service answered on a /v1
-- route (schemas/proto/moraine/v1/usage.proto), written by the processor's
-- usage sink from the API-requests topic. The sink skips records at or
-- below the highest kafka_offset of their kafka_partition already here, so
-- a redelivered record is not written twice (processor/internal/usagesink).
-- Ordered for getApiLogs, an account's requests newest first over a
-- bounded time range. Retention: --usage.log-retention of the processor.
CREATE TABLE IF NOT EXISTS api_requests (
    account_id String,
    at UInt64,
    request_id FixedString(16),
    key_id String,
    key_alias String,
    route String,
    operation String,
    method String,
    chain_id String,
    status UInt16,
    duration_us UInt64,
    compute_units UInt32,
    client_ip String,
    user_agent String,
    host String,
    region String,
    kafka_partition UInt32,
    kafka_offset UInt64
) ENGINE = MergeTree
PARTITION BY toYYYYMM(toDateTime(intDiv(at, 1000), 'UTC'))
ORDER BY (account_id, at, request_id)
SETTINGS index_granularity = 1024;

-- The same log ordered by time, for an operator's getApiLogs over every
-- account: in api_requests a time window touches a granule of every
-- account (over 10 million requests of 1,000 accounts, a window of a minute
-- read a million rows). Filled by a materialized view; retention as the log.
CREATE TABLE IF NOT EXISTS api_requests_by_time (
    account_id String,
    at UInt64,
    request_id FixedString(16),
    key_id String,
    key_alias String,
    route String,
    operation String,
    method String,
    chain_id String,
    status UInt16,
    duration_us UInt64,
    compute_units UInt32,
    client_ip String,
    user_agent String,
    host String,
    region String
) ENGINE = MergeTree
PARTITION BY toYYYYMM(toDateTime(intDiv(at, 1000), 'UTC'))
ORDER BY (at, request_id)
SETTINGS index_granularity = 1024;

CREATE MATERIALIZED VIEW IF NOT EXISTS api_requests_by_time_mv TO api_requests_by_time AS
SELECT account_id, at, request_id, key_id, key_alias, route, operation, method, chain_id, status, duration_us, compute_units,
       client_ip, user_agent, host, region
FROM api_requests;

-- Usage rollups for getApiUsageMetrics: per account, bucket (the minute,
-- hour or day a request arrived in, UTC), route, status, chain and key,
-- the requests, compute units and a histogram of durations, filled by
-- materialized views as rows reach api_requests. A usage query reads the
-- coarsest rollup its interval allows instead of the log.
--
-- durations counts requests per duration bucket b = floor(4 * log2(us /
-- 100)), 0..63: bucket b starts at 0.1 ms x 2^(b/4), so a median read from
-- it is within 9% (usageapi interpolates within the bucket). A t-digest
-- (quantileTDigestState) was measured first: over 10 million requests its
-- states made the daily rollup three times larger on disk, and reading an
-- account's month of it five times slower, than these sums.
-- Retention: --usage.metrics-retention of the processor.
CREATE TABLE IF NOT EXISTS api_usage_minutes (
    account_id String,
    bucket UInt32,
    route String,
    status UInt16,
    chain_id String,
    key_id String,
    requests AggregateFunction(count),
    compute_units AggregateFunction(sum, UInt64),
    durations AggregateFunction(sumMap, Array(UInt8), Array(UInt64))
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(toDateTime(bucket, 'UTC'))
ORDER BY (account_id, bucket, route, status, chain_id, key_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS api_usage_minutes_mv TO api_usage_minutes AS
SELECT account_id, toUInt32(intDiv(at, 60000) * 60) AS bucket, route, status, chain_id, key_id,
       countState() AS requests, sumState(toUInt64(compute_units)) AS compute_units,
       sumMapState([toUInt8(least(63, greatest(0, floor(4 * log2(duration_us / 100)))))], [toUInt64(1)]) AS durations
FROM api_requests
GROUP BY account_id, bucket, route, status, chain_id, key_id;

CREATE TABLE IF NOT EXISTS api_usage_hours (
    account_id String,
    bucket UInt32,
    route String,
    status UInt16,
    chain_id String,
    key_id String,
    requests AggregateFunction(count),
    compute_units AggregateFunction(sum, UInt64),
    durations AggregateFunction(sumMap, Array(UInt8), Array(UInt64))
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(toDateTime(bucket, 'UTC'))
ORDER BY (account_id, bucket, route, status, chain_id, key_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS api_usage_hours_mv TO api_usage_hours AS
SELECT account_id, toUInt32(intDiv(at, 3600000) * 3600) AS bucket, route, status, chain_id, key_id,
       countState() AS requests, sumState(toUInt64(compute_units)) AS compute_units,
       sumMapState([toUInt8(least(63, greatest(0, floor(4 * log2(duration_us / 100)))))], [toUInt64(1)]) AS durations
FROM api_requests
GROUP BY account_id, bucket, route, status, chain_id, key_id;

CREATE TABLE IF NOT EXISTS api_usage_days (
    account_id String,
    bucket UInt32,
    route String,
    status UInt16,
    chain_id String,
    key_id String,
    requests AggregateFunction(count),
    compute_units AggregateFunction(sum, UInt64),
    durations AggregateFunction(sumMap, Array(UInt8), Array(UInt64))
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(toDateTime(bucket, 'UTC'))
ORDER BY (account_id, bucket, route, status, chain_id, key_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS api_usage_days_mv TO api_usage_days AS
SELECT account_id, toUInt32(intDiv(at, 86400000) * 86400) AS bucket, route, status, chain_id, key_id,
       countState() AS requests, sumState(toUInt64(compute_units)) AS compute_units,
       sumMapState([toUInt8(least(63, greatest(0, floor(4 * log2(duration_us / 100)))))], [toUInt64(1)]) AS durations
FROM api_requests
GROUP BY account_id, bucket, route, status, chain_id, key_id;

-- The same rollups over every account (no account or key): what an operator's
-- usage query reads unless it groups or filters by key. Per account, the
-- rollups above hardly shrink a sparse account's requests (most of its
-- (bucket, route, status, chain, key) hold one or two requests), so a read
-- over every account of them would read about as many rows as the log.
CREATE TABLE IF NOT EXISTS api_usage_global_minutes (
    bucket UInt32,
    route String,
    status UInt16,
    chain_id String,
    requests AggregateFunction(count),
    compute_units AggregateFunction(sum, UInt64),
    durations AggregateFunction(sumMap, Array(UInt8), Array(UInt64))
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(toDateTime(bucket, 'UTC'))
ORDER BY (bucket, route, status, chain_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS api_usage_global_minutes_mv TO api_usage_global_minutes AS
SELECT toUInt32(intDiv(at, 60000) * 60) AS bucket, route, status, chain_id,
       countState() AS requests, sumState(toUInt64(compute_units)) AS compute_units,
       sumMapState([toUInt8(least(63, greatest(0, floor(4 * log2(duration_us / 100)))))], [toUInt64(1)]) AS durations
FROM api_requests
GROUP BY bucket, route, status, chain_id;

CREATE TABLE IF NOT EXISTS api_usage_global_hours (
    bucket UInt32,
    route String,
    status UInt16,
    chain_id String,
    requests AggregateFunction(count),
    compute_units AggregateFunction(sum, UInt64),
    durations AggregateFunction(sumMap, Array(UInt8), Array(UInt64))
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(toDateTime(bucket, 'UTC'))
ORDER BY (bucket, route, status, chain_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS api_usage_global_hours_mv TO api_usage_global_hours AS
SELECT toUInt32(intDiv(at, 3600000) * 3600) AS bucket, route, status, chain_id,
       countState() AS requests, sumState(toUInt64(compute_units)) AS compute_units,
       sumMapState([toUInt8(least(63, greatest(0, floor(4 * log2(duration_us / 100)))))], [toUInt64(1)]) AS durations
FROM api_requests
GROUP BY bucket, route, status, chain_id;

CREATE TABLE IF NOT EXISTS api_usage_global_days (
    bucket UInt32,
    route String,
    status UInt16,
    chain_id String,
    requests AggregateFunction(count),
    compute_units AggregateFunction(sum, UInt64),
    durations AggregateFunction(sumMap, Array(UInt8), Array(UInt64))
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(toDateTime(bucket, 'UTC'))
ORDER BY (bucket, route, status, chain_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS api_usage_global_days_mv TO api_usage_global_days AS
SELECT toUInt32(intDiv(at, 86400000) * 86400) AS bucket, route, status, chain_id,
       countState() AS requests, sumState(toUInt64(compute_units)) AS compute_units,
       sumMapState([toUInt8(least(63, greatest(0, floor(4 * log2(duration_us / 100)))))], [toUInt64(1)]) AS durations
FROM api_requests
GROUP BY bucket, route, status, chain_id;

-- Per key, over hours and days, without route, status or chain (the
-- answers' classes summed instead): what an operator's usage query grouped by
-- key over every account reads when it filters on nothing else. Over 10
-- million requests of 1,000 accounts the daily per-account rollup holds 2
-- million rows, this one 60,000.
CREATE TABLE IF NOT EXISTS api_usage_key_hours (
    bucket UInt32,
    account_id String,
    key_id String,
    requests AggregateFunction(count),
    succeeded AggregateFunction(sum, UInt64),
    invalid AggregateFunction(sum, UInt64),
    units AggregateFunction(sum, UInt64),
    wasted_units AggregateFunction(sum, UInt64),
    durations AggregateFunction(sumMap, Array(UInt8), Array(UInt64))
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(toDateTime(bucket, 'UTC'))
ORDER BY (bucket, account_id, key_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS api_usage_key_hours_mv TO api_usage_key_hours AS
SELECT toUInt32(intDiv(at, 3600000) * 3600) AS bucket, account_id, key_id,
       countState() AS requests, sumState(toUInt64(status < 400)) AS succeeded,
       sumState(toUInt64(status >= 400 AND status < 500)) AS invalid, sumState(toUInt64(compute_units)) AS units,
       sumState(toUInt64(if(status >= 400 AND status < 500, compute_units, 0))) AS wasted_units,
       sumMapState([toUInt8(least(63, greatest(0, floor(4 * log2(duration_us / 100)))))], [toUInt64(1)]) AS durations
FROM api_requests
GROUP BY bucket, account_id, key_id;

CREATE TABLE IF NOT EXISTS api_usage_key_days (
    bucket UInt32,
    account_id String,
    key_id String,
    requests AggregateFunction(count),
    succeeded AggregateFunction(sum, UInt64),
    invalid AggregateFunction(sum, UInt64),
    units AggregateFunction(sum, UInt64),
    wasted_units AggregateFunction(sum, UInt64),
    durations AggregateFunction(sumMap, Array(UInt8), Array(UInt64))
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(toDateTime(bucket, 'UTC'))
ORDER BY (bucket, account_id, key_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS api_usage_key_days_mv TO api_usage_key_days AS
SELECT toUInt32(intDiv(at, 86400000) * 86400) AS bucket, account_id, key_id,
       countState() AS requests, sumState(toUInt64(status < 400)) AS succeeded,
       sumState(toUInt64(status >= 400 AND status < 500)) AS invalid, sumState(toUInt64(compute_units)) AS units,
       sumState(toUInt64(if(status >= 400 AND status < 500, compute_units, 0))) AS wasted_units,
       sumMapState([toUInt8(least(63, greatest(0, floor(4 * log2(duration_us / 100)))))], [toUInt64(1)]) AS durations
FROM api_requests
GROUP BY bucket, account_id, key_id;

-- Operator keys: an API key whose latest row has operator = 1 reads every
-- account's usage and request log (moraine-admin key create --operator,
-- key set-operator). A key without a row is an account's ordinary key.
CREATE TABLE IF NOT EXISTS operator_keys (
    key_id String,
    operator UInt8,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY key_id;

-- The write probe of GET /v1/health-check: each query instance rewrites its
-- own row, so the table holds one row per instance once merged.
CREATE TABLE IF NOT EXISTS health_checks (
    instance String,
    at UInt64
) ENGINE = ReplacingMergeTree(at)
ORDER BY instance;

-- Export operations (postTransactionExportJob, getOperationResult): one row
-- per version of an operation's state, the latest winning; and the files
-- they produce, in parts of about a megabyte, per attempt (a worker that
-- dies mid-job leaves its attempt's parts unread; the next attempt writes
-- its own). Partitioned by the day the operation was created, so an
-- operation and its files go together after --export.retention.
CREATE TABLE IF NOT EXISTS operations (
    id String,
    account_id String,
    type String,
    status String,
    code String,
    message String,
    request String,
    next_date String,
    attempt UInt32,
    parts UInt32,
    rows UInt64,
    bytes UInt64,
    created_at UInt64,
    updated_at UInt64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(toDateTime(intDiv(created_at, 1000), 'UTC'))
ORDER BY id;

CREATE TABLE IF NOT EXISTS operation_files (
    operation_id String,
    attempt UInt32,
    part UInt32,
    created_at UInt64,
    data String
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(toDateTime(intDiv(created_at, 1000), 'UTC'))
ORDER BY (operation_id, attempt, part)
SETTINGS index_granularity = 64
