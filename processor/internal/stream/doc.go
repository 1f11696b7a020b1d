// Package stream turns the matcher's matches into each webhook's message
// stream: it numbers every message of a webhook (sequence), holds the
// messages of webhooks with confirmations until enough blocks are on top,
// and withdraws delivered messages whose block a reorg orphaned
// (retractions). Receivers' view of it: docs/webhook-stream.md.
//
// # State, and why it is exactly once
//
// What the stream must remember lives on the compacted webhook-stream topic
// (schemas/proto/moraine/v1/stream.proto), written by the matcher in the
// same Kafka transaction as the activity messages it concerns:
//
//	seq:<webhookId>                        the webhook's last sequence number
//	pending:<chain>:<blockHash>:<webhookId> built messages of a block waiting for confirmations
//	emitted:<chain>:<blockHash>            messages delivered for a block, kept for the
//	                                       retraction window (--matcher.retraction-window)
//	replay:<replayId>                      how far a replay job has produced (package replay)
//
// A batch (Batch) works on an overlay of the State: a committed transaction
// applies it (Commit), an aborted one drops it, and the matcher then
// re-reads the same blocks from the same state. Every instance reads the
// topic (kafkautil.TableReader, read_committed) into its State, and the
// matcher catches the reader up before each batch, so an instance that
// takes a chain over after a rebalance or a crash continues from the last
// committed transaction of the previous owner. Records carry versions (the
// sequence for seq: keys, the blocks-topic offset of the record that
// changed them for block keys) and are applied by the rule of pkg/watch
// Versions, so the reader's late copy of a key never undoes a newer commit.
// A block key's version is forgotten once the key is tombstoned (block keys
// never return), so what the state remembers stays as small as the window;
// a webhook's sequence keeps its version.
//
// # Two writers: the matcher and the replays
//
// A webhook's numbers are taken by its chain's matcher and by its replays
// (package replay), in the same instance, each in its own transactions.
// A batch holds the state's numbering lock from its first numbered message
// (or its first reorg) until it commits or aborts (Commit, Abort), so each
// starts from what the other committed. A transaction whose end failed may
// still have committed: AbortInDoubt leaves the state in doubt, and the
// next holder must catch it up while holding the lock (the catch-up reads
// to the topic's end and so waits for that transaction's outcome) before
// its numbers may commit; a batch that numbered in doubt (Doubted) is
// aborted and built again. Replayed messages that repeat one
// the stream carried keep their number (Batch.Replayed); the others are
// numbered and, for blocks a reorg can still orphan, recorded under the
// block's emitted entry like live ones. Reorgs counts the reorg batches
// committed per chain, for a replay to tell that its blocks may have
// changed.
//
// # Rules
//
//   - Sequence: every message of a webhook (activity, retraction, a
//     released pending message) gets the webhook's last sequence + 1 when
//     the matcher produces it. A webhook's messages share one partition of
//     the activity topic (key: webhook id) and one producer at a time (the
//     owner of its chain's blocks partition), so the topic holds them in
//     sequence order with no gap and no repeat.
//   - Confirmations 0: a block's messages are produced when the block is
//     matched and recorded under emitted:; if a reorg orphans the block
//     within the retraction window, each is followed by a retraction
//     (payload.Retraction). A transaction included again in the new branch
//     is matched again there and delivered again with the same messageId
//     and a new sequence.
//   - Confirmations N: a block's messages are held under pending: until a
//     block numbered at least its number + N is matched on the chain, then
//     produced (in block order, then webhook id, then transaction order). A
//     reorg that orphans the block first drops them: nothing of an orphaned
//     block is delivered. Once produced they are recorded under emitted:
//     like any other, so a reorg deeper than N retracts them.
//   - Window: emitted: entries are dropped (tombstoned) once the chain's
//     head is --matcher.retraction-window blocks past them; ingest finds
//     reorgs only within its own --ingest.reorg-window, which the default
//     (256) equals.
package stream
