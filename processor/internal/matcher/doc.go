// Package matcher is the processor's address-activity matcher: it joins
// every block of the blocks topic against the watch table and produces one
// activity record per (webhook, transaction) to the activity topic, for
// delivery.
//
// # Exactly-once into the activity topic
//
// The matcher is a kgo.GroupTransactSession: it begins a Kafka transaction,
// produces each polled batch's activity records (key: webhook id, value:
// codec.EncodeActivity, header schema=moraine.v1.Activity) and commits the
// consumed offsets inside the same transaction. A batch that produced
// activity ends its transaction at once; batches that matched nothing keep
// it open (nothing is sent to Kafka for it until it ends) for up to
// --matcher.idle-commit-interval (1 s), so that a backfill of unwatched
// blocks, polled in one small batch per produce of ingest, costs a few
// transactions instead of one per batch. Consumers
// reading the activity topic read_committed (delivery does) therefore see
// a batch's messages exactly when its offsets are committed: a matcher
// killed mid-batch neither loses activity (the offsets did not move; the
// batch is read again) nor duplicates it (what it had produced is aborted).
// A rebalance during a batch aborts the transaction the same way
// (GroupTransactSession's rule), and the new owner of the partitions reads
// only committed offsets (RequireStableFetchOffsets, KIP-447).
//
// Transactional id (--matcher.transactional-id, default
// moraine-matcher-<hostname>): every running instance needs its own, and an
// instance should keep it across restarts. A restart under the same id
// fences the dead incarnation and aborts its open transaction at once; a
// new id leaves that transaction open until --matcher.transaction-timeout,
// holding back read_committed readers of the activity topic (no loss, a
// delay). Hostnames are stable for a StatefulSet or a VM; for a Deployment
// set the flag per pod (e.g. from the pod name of a StatefulSet). The same
// id is the static group instance id, so a restarted instance gets its
// partitions back without waiting for a session timeout. Both the group and
// the id get --kafka.topic-prefix in front, so deployments or tests sharing
// a broker and a host never fence each other.
//
// A group without committed offsets starts at --matcher.start-offset
// (start: every retained block; end: new blocks only, for adding the
// matcher to a deployment whose webhooks should not see history).
//
// # Watch table and "acknowledged changes are matched"
//
// The table (package watchlist) is read from the compacted address-watch
// topic by kafkautil.TableReader, from the start, then tailed. The matcher
// does not consume blocks and /readyz fails ("watchlist") until the table
// reached the topic's end offsets of start-up. Before matching each batch
// the matcher calls TableReader.CatchUp (bounded by
// --matcher.catchup-timeout; on timeout it logs, counts
// moraine_processor_watchlist_catchup_timeouts_total and matches with the
// table as it is): every record in the topic when the batch starts is
// applied first. The query service produces a change's record before it
// acknowledges the change, so an address added or removed through the API
// is matched, or no longer matched, from the next block processed after the
// acknowledgement. (Should that produce fail, the API still acknowledges and
// its reconciler publishes the record within its interval; the change then
// applies from the first batch after the record arrives.)
//
// # Webhook streams: sequence, confirmations, reorgs
//
// The matched messages go through package stream before they are produced:
// each gets its webhook's next sequence number; a webhook with
// confirmations N has its messages held until a block N higher is matched;
// a reorg marker retracts the messages already delivered for the orphaned
// blocks (within --matcher.retraction-window blocks) and drops those still
// held. The streams' state is on the compacted webhook-stream topic,
// written in the same transaction as the messages, and read back by every
// instance; before each batch the matcher waits until it has read it up to
// date (--matcher.stream-catchup-timeout; past it the batch's transaction
// is aborted and the batch read again), so numbers continue across crashes
// and rebalances. The replacing blocks are matched like any others; a
// transaction included again carries the same messageId (webhook, chain,
// tx hash) and a new sequence number. Receivers' guide:
// docs/webhook-stream.md.
//
// # Replays
//
// Replay jobs of a chain run beside the matcher that owns its blocks
// partition (package replay): Deps.Partitions is told of every assignment
// (and fences the partitions' replay producers before a record of them is
// matched), and the replays number in the same stream state, taking turns
// with the matcher's transactions (package stream). Every activity message
// carries the settings and receipts root its payload was built with, which
// the message ledger keeps (package ledger).
//
// # Poison input
//
// An undecodable block record, or a match whose payload cannot be built,
// is logged, counted and skipped rather than stalling the partition.
//
// # Metrics
//
//	moraine_processor_activities_emitted_total{chain}     committed activity messages
//	moraine_processor_match_batch_duration_seconds{stage} catchup|match|tokens|payload|transaction|total
//	moraine_processor_match_transactions_total{result}    committed|aborted
//	moraine_processor_match_records_total{kind}           records of committed batches: block|reorg|undecodable,
//	                                                      or unwatched: a chain without watched addresses, skipped
//	                                                      undecoded
//	moraine_processor_retractions_emitted_total{chain}    committed retraction messages (also in activities_emitted_total)
//	moraine_processor_stream_catchup_failures_total       batches aborted: the webhook-stream state was not read in time
//	moraine_processor_stream_emitted_blocks               recent blocks whose messages can still be retracted
//	moraine_processor_stream_pending_blocks               (block, webhook) pairs waiting for confirmations
//	moraine_processor_payload_errors_total
//	moraine_processor_watchlist_ready                     0/1
//	moraine_processor_watchlist_catchup_timeouts_total
//	moraine_processor_watchlist_addresses, _webhooks, _records_applied_total{kind}, _malformed_records_total,
//	  _stale_records_total (package watchlist)
//	moraine_processor_token_metadata_lookups_total{result} (package tokenmeta)
package matcher
