-- Webhook delivery: the log of every attempt (read by the query service's
-- GET /v1/webhooks/{id}/deliveries) and the failure strikes that decide
-- automatic deactivation (CONTRACT.md section 5.5). Written by delivery.
--
-- Timestamps are Unix milliseconds in UInt64 (no DateTime64 on 18.16).

-- One row per attempt (and per message dropped because its webhook is
-- inactive). Best-effort: rows are buffered and inserted in batches, so a
-- crash loses the last few hundred milliseconds of them; a redelivered
-- message adds rows (duplicates are real attempts). Ordered for the API's
-- newest-first pages of one webhook, which read a bounded attempted_at range.
-- ClickHouse 18.16 has no TTL: monthly partitions let operators drop old
-- months (ALTER TABLE deliveries DROP PARTITION 202601).
CREATE TABLE IF NOT EXISTS deliveries (
    webhook_id String,
    attempted_at UInt64,
    message_id String,
    attempt UInt8,
    account_id String,
    chain_id UInt64,
    tx_hash String,
    status UInt16,
    result String,
    latency_ms UInt32,
    error String,
    next_attempt_at UInt64
) ENGINE = MergeTree
PARTITION BY toYYYYMM(toDateTime(intDiv(attempted_at, 1000)))
ORDER BY (webhook_id, attempted_at, message_id, attempt)
SETTINGS index_granularity = 1024;

-- Strikes against a webhook, written synchronously before the message that
-- caused them is acknowledged, so a restart of delivery never forgets one:
--   double_failure  a message failed attempts 1 and 2 (it enters the retry queue)
--   exhausted       a message failed its last attempt
--   deactivated     delivery deactivated the webhook (detail: the reason);
--                   strikes before the latest one no longer count
-- One row per (webhook, kind, message): a redelivered message counts once.
CREATE TABLE IF NOT EXISTS delivery_strikes (
    webhook_id String,
    kind String,
    message_id String,
    at UInt64,
    detail String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (webhook_id, kind, message_id)
