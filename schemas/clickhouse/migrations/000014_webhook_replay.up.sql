-- Webhook replay (a moraine extension, docs/webhook-stream.md "Replay"):
-- what a replay needs to re-derive a webhook's messages from the indexed
-- tables byte for byte, the ledger of every message a webhook's stream
-- carried, and the replay jobs.

-- A transaction's access list (EIP-2930), which the webhook payload shows
-- (accessList) and no other table holds: the protobuf encoding of
-- moraine.v1.AccessList (schemas/codec EncodeAccessList), '' when empty.
-- Rows written before this migration have '' here whatever the
-- transaction's access list was.
ALTER TABLE transactions ADD COLUMN access_list String DEFAULT '';

-- The ledger: one row per message a webhook's stream numbered (live
-- activity, retractions, and the messages replays numbered anew), written
-- by the processor's ledger consumer from the activity and replay topics
-- (read_committed). A replay repeats every ledger message of its range with
-- its sequence number and messageId, so a receiver that lost messages
-- recovers them with no gap. Rows are deterministic per (webhook, sequence):
-- a redelivered record rewrites an identical row (ReplacingMergeTree;
-- version = the record's matched_at, equal for equal rows). Ordered by
-- block for the replay's range reads; kept for as long as the chain is.
--   kind                   0 activity, 1 retraction (record.ActivityKind)
--   block_hash, tx_hash    the message's block (orphaned or not) and transaction
--   receipts_root          the block's (an orphaned block's row in blocks is replaced)
--   include_logs, include_internal_txs
--                          the webhook's settings the payload was built with
--   replay_id              the replay that numbered it; '' for live messages
CREATE TABLE IF NOT EXISTS webhook_messages (
    webhook_id String,
    block_number UInt64,
    sequence UInt64,
    message_id String,
    kind UInt8,
    chain_id UInt64,
    block_hash FixedString(32),
    receipts_root FixedString(32),
    tx_hash FixedString(32),
    retracted_message_id String,
    include_logs UInt8,
    include_internal_txs UInt8,
    replay_id String,
    produced_at UInt64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (webhook_id, block_number, sequence)
SETTINGS index_granularity = 1024;

-- Replay jobs as requested through the API (POST /v1/webhooks/{id}:replay,
-- or fromBlock on create). Written only by the query service: at creation,
-- and again with cancel_requested_at set to cancel. Timestamps are Unix
-- milliseconds; from_timestamp and to_timestamp (Unix seconds) are the
-- time range asked for, 0 for a block range. to_live (fromBlock on create):
-- the replay runs to where the webhook's live stream began, so its runner
-- raises to_block to the blocks the matcher had matched before the webhook
-- existed (replay_progress.to_block).
CREATE TABLE IF NOT EXISTS replay_jobs (
    webhook_id String,
    id String,
    account_id String,
    chain_id UInt64,
    from_block UInt64,
    to_block UInt64,
    from_timestamp UInt64,
    to_timestamp UInt64,
    messages_per_second UInt32,
    created_at UInt64,
    cancel_requested_at UInt64,
    to_live UInt8,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (webhook_id, id);

-- A replay job's progress as its runner (the processor owning the chain)
-- reports it, after each chunk it committed; written only by the
-- processor. status: waiting (for the stream to pass the range), running,
-- done, cancelled, failed. to_block is the job's, raised for a to_live job
-- (0 until the runner knows it). Best-effort: the exact progress is on the
-- webhook-stream topic (replay:<id>), which a runner resumes from.
CREATE TABLE IF NOT EXISTS replay_progress (
    webhook_id String,
    id String,
    status String,
    to_block UInt64,
    next_block UInt64,
    retransmitted UInt64,
    renumbered UInt64,
    error String,
    started_at UInt64,
    updated_at UInt64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (webhook_id, id);

-- Which replay a delivery attempt belonged to ('' for live messages), so a
-- replay's result counts its deliveries.
ALTER TABLE deliveries ADD COLUMN replay_id String DEFAULT ''
