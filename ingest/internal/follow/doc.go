// Package follow ingests one EVM chain into the Kafka blocks topic: it
// backfills from the checkpoint, then follows the head, and emits reorg
// events. It is the only writer of its chain's records.
//
// # Records
//
// Every record has key = the decimal EVM chain id, value =
// codec.EncodeChainEvent (a record.Block or a record.Reorg) and the header
// codec.SchemaHeader = codec.ChainEventSchema. The key puts all of a chain's
// events on one partition (franz-go's sticky key partitioner, murmur2 like the
// Java client), so consumers see them in the order they were produced. A
// block the chain reached while ingest watched it (the head) has as its
// timestamp the moment ingest's node pool first heard of it (rpc.Pool.SeenAt:
// the newHeads announcement, or the head poll, that reached it), so that the
// time from the record's timestamp to a webhook's activity includes ingest's
// own fetch and verification; other records carry their produce time.
//
// # Guarantees
//
//   - Order: blocks are produced in ascending number order. Up to
//     Concurrency batches of BatchBlocks blocks are fetched in parallel (one
//     JSON-RPC batch each) and put back in order by a bounded reorder
//     buffer before anything is produced.
//   - No gap, no double count: a batch of records is produced (ProduceSync)
//     only once the previous batch is acknowledged, and after a failure
//     nothing more is sent, so what Kafka holds is always a prefix of what
//     was produced. cumulative_transactions of a block is that of the block
//     before it plus its transaction count (the chain's
//     StartCumulativeTransactions before StartBlock). A null answer from the
//     node for a block at or below the head means "not yet" (a lagging node)
//     and is asked again, never skipped.
//   - Checkpoint from Kafka: nothing else stores ingest state. At start, and
//     after a produce failure, the follower reads the tail of the partition
//     its key maps to (all partitions if that one holds nothing of the
//     chain, in case the partition count changed), replays the chain's
//     events (a block appends to the window of recent blocks, a reorg removes
//     the blocks it orphaned) until it has Window blocks or the start of the
//     log, and resumes after the last block with its hash and cumulative
//     count. With nothing found it starts at the chain's StartBlock (in
//     replay mode at the recording's first block if that is higher).
//   - Replay mode (chains.Chain.Replay): recordings may skip numbers and
//     their parents need not link. Over spans sized from the density seen
//     so far, the follower asks the source which numbers it holds with one
//     moraine_recordedBlockNumbers(first, last) call (moraine's replay
//     source answers it); a source without that method is probed with a
//     cheap eth_getBlockByNumber(n, false) per number instead, and numbers it
//     answers null for are skipped. There is no reorg detection.
//   - Nodes: every node of the chain is used through its rpc.Pool. A batch
//     goes only to a node whose head has reached its last block (AtBlock),
//     at the head it is hedged on a second node, and a node that fails is
//     replaced by another within seconds (package pkg/rpc).
//   - Complete blocks only: before a block is produced it is verified
//     (package verify: receipts root and logs bloom from the converted
//     receipts and logs, transactions root from the signed transactions,
//     one trace per transaction), unless the chain's skipChecks relaxes a
//     check. Answers that fail are counted against the node that gave them
//     and the block is fetched again from the other nodes. When every
//     node's answer fails, the chain stops at that block: an error log line
//     names it and the check, moraine_ingest_halted is 1, readiness fails,
//     nothing after it is produced, and the block is asked again every
//     HaltRetry until a node answers it completely. The block, its receipts
//     and its traces must be one block: receipts or traces of another block
//     (answers from nodes on different forks) are fetched again.
//   - Shutdown: on ctx's end the follower stops fetching, produces what was
//     fetched in order, and waits up to ShutdownTimeout for Kafka.
//
// # Reorg protocol
//
// When a block's parentHash is not the hash produced for number-1, the
// follower stops fetching and walks back over the node's canonical blocks
// (eth_getBlockByNumber(n, false), newest first, 16 per batch) to the newest
// number whose hash equals the one it produced: the common ancestor A. It
// then produces
//
//	Reorg{chain_id, fork_number: A+1, orphaned: [(number, hash) of every produced block above A, ascending]}
//
// and resumes at A+1 with A's cumulative count, so the new branch's counts are
// recomputed from the ancestor. Consumers undo the orphaned blocks when they
// see the event; the replacing blocks follow it on the same partition. If
// the node's chain still contains the last produced block (the new block came
// from a branch that is not canonical), no event is produced and the block is
// fetched again. No ancestor within the Window most recent blocks is fatal
// (ErrReorgTooDeep): the process stops rather than guess. A reorg to a
// shorter chain is seen when that chain grows past the last produced block.
//
// # Metrics
//
//	moraine_ingest_head_block{chain}                      highest block the node announced
//	moraine_ingest_last_produced_block{chain}             last block Kafka acknowledged
//	moraine_ingest_last_produced_block_timestamp_seconds{chain} its timestamp: time() - it is the lag behind the wall clock
//	moraine_ingest_blocks_produced_total{chain}           blocks acknowledged
//	moraine_ingest_transactions_produced_total{chain}     their transactions
//	moraine_ingest_reorgs_total{chain}                    reorg events produced
//	moraine_ingest_orphaned_blocks_total{chain}           blocks those events orphaned
//	moraine_ingest_block_fetch_retries_total{chain,reason} not_found, incomplete, rpc_error, invalid, unverified
//	moraine_ingest_stage_duration_seconds{chain,stage}    fetch (one span), convert, verify, encode (one block), produce (one batch)
//	moraine_ingest_verification_failures_total{chain,node,check} answers that failed a check, by node and check
//	moraine_ingest_halted{chain}                          1 while stopped at a block no node answers completely
//	moraine_ingest_checkpoint_recoveries_total{chain}      checkpoint reads from Kafka
//	moraine_ingest_produce_buffered_bytes{chain}          encoded bytes queued or in flight
//	moraine_ingest_backfill_lead_records{chain}           records the sink's group has not committed (--ingest.max-lead)
//	moraine_ingest_backfill_waiting{chain}                1 while the backfill waits for the sink (lead.go)
//
// # Progress
//
// Every ProgressInterval (30 s) while it has work, the follower logs one
// line per chain, "ingesting" while behind and "following the head" once
// within ReadyLag: head (the node's), ingested (the last block Kafka
// acknowledged), behind (blocks), lag (age of the ingested block), blocks_per_s
// and txs_per_s over the interval, and eta (behind at that rate). The same
// figures come from the metrics: rate(moraine_ingest_blocks_produced_total)
// and (head_block - last_produced_block) / that rate (deploy/grafana).
//
// The JSON-RPC client adds moraine_ingest_rpc_requests_total{chain,method,result}
// and moraine_ingest_rpc_request_duration_seconds{chain,method} (package rpc).
// The _sum of the stage histograms gives each stage's share of the work.
package follow
