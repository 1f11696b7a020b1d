// Package replay runs webhook replay jobs (POST /v1/webhooks/{id}:replay,
// or fromBlock on create): it re-derives a webhook's messages of a block
// range from the indexed tables and produces them to the replay topic, for
// delivery (receivers' guide: docs/webhook-stream.md, "Replay").
//
// # What a replay produces
//
// For each chunk of blocks (at most --replay.chunk-blocks blocks and
// --replay.chunk-messages messages, whole blocks), in one Kafka
// transaction:
//
//   - every message the webhook's stream carried for those blocks, from the
//     message ledger (package ledger): activity and retractions, of
//     canonical and of orphaned blocks, with their sequence numbers and
//     messageIds, the activity rebuilt with the settings it was built with
//     (Activity.Retransmission);
//   - the activity the webhook's addresses and filters of now match in the
//     canonical blocks that the stream never carried, numbered anew with
//     the webhook's next sequence numbers;
//   - the job's progress (replay:<id> on the webhook-stream topic) and the
//     webhook's new last sequence.
//
// Payloads are built by the matcher's own code: the blocks are read back
// from ClickHouse (source.go) into the records the sink wrote them from,
// matched by package match against a watch table holding the webhook
// alone, and built by package payload, with token metadata from the
// matcher's resolver. TestReplayIntegration compares the bytes with live
// ones.
//
// # Exactly once, and never beside the live numbering
//
//   - Where: a job runs in the processor whose matcher owns the blocks
//     partition of the webhook's chain (the instance that numbers the
//     webhook's live messages), found by the partition of the chain's key;
//     it moves with the partition and continues from its last committed
//     chunk.
//   - Fencing: each partition has its replay producer, whose transactional
//     id (<prefix><matcher group>-replay-<partition>) the new owner
//     initializes when the matcher gets the partition, before it matches
//     any of its records (matcher.Partitions): the previous owner's open
//     replay transaction is ended, and the stream state the new owner
//     reads holds its outcome. A transaction whose end is unknown (an
//     EndTransaction error) is settled the same way, and the stream state
//     read, before anyone numbers again; if the partition moved away
//     meanwhile, the new owner's initialization settles it, and this
//     instance's state stays in doubt until it has read the outcome
//     (stream.State.AbortInDoubt). A producer whose id Kafka refused for
//     good (franz-go then fails all its transactions) is replaced by a new
//     client under the same id before the partition's next chunk.
//   - Membership: initializing the transactional id does not say who owns
//     the partition now (an instance that lost it without knowing yet may
//     initialize it after the new owner, to settle a transaction of its
//     own). So every replay transaction also commits, in the matcher's
//     consumer group, with the matcher's member id and generation
//     (Matcher.GroupMember), the offset of the moraine.replay-fence topic,
//     which carries no records (kafkautil.FenceByGroup): the group's
//     coordinator refuses it once the group left the generation in which
//     this instance owns the partition, as it refuses the matcher's own
//     offsets (KIP-447), and the transaction is aborted. A replay commits
//     only where the chain's live messages are numbered.
//   - Numbering: the chunk takes the stream state's numbering lock
//     (stream.Batch.Hold), reads the webhook-stream topic up to its end
//     while holding it (so a transaction whose end was in doubt is settled
//     first), numbers, and commits; the matcher's transactions take it from
//     their first numbered message to their end. Retransmissions, which
//     take no number, are produced (and flushed) before the lock.
//   - Barrier: before its first chunk, a job waits until the matcher group
//     committed past the block toBlock + the webhook's confirmations
//     (nothing of the range is still pending) and the ledger holds every
//     number of the webhook's stream so far (ledger.Complete): the ledger
//     then says exactly which messages the stream carried.
//   - Reorgs: a chunk that reaches within --matcher.retraction-window of
//     the head is read only once the sink's committed offset is at least
//     the matcher's (ClickHouse holds every reorg the matcher handled), and
//     read again if the matcher commits a reorg of the chain meanwhile
//     (stream.State.Reorgs); its new messages of such blocks are recorded
//     under the blocks' emitted entries, so a later reorg retracts them.
//   - Cancel: checked before each chunk; the end (done or cancelled) is
//     committed as the job's progress, so no runner starts it again, and
//     reported to ClickHouse (replay_progress), which the API reads.
//
// Jobs are paced at their messages per second (the plan's) on average: a
// chunk holds a second's worth and what the job is behind its schedule by
// (at most 10 s's worth), so the fixed price of a chunk does not lower the
// rate (pace.go); a chunk reads about twice the blocks the last one used.
// A webhook's jobs run one at a time, oldest first; --replay.concurrency
// bounds the jobs of an instance.
//
// # Metrics
//
//	moraine_processor_replay_messages_total{kind}          retransmitted|renumbered
//	moraine_processor_replay_chunk_duration_seconds{stage} derive|commit
//	moraine_processor_replay_jobs_running
//	moraine_processor_replay_jobs_finished_total{status}   done|cancelled|failed
//	moraine_processor_replay_chunks_rederived_total
//	moraine_processor_replay_missing_messages_total
package replay
