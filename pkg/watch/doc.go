// Package watch keeps the compacted address-watch topic (schemas/topics
// AddressWatch, records in schemas/proto/moraine/v1/watch.proto) equal to
// the webhook state in ClickHouse, so the processor (matching) and delivery
// (URLs, secrets) see every change within about a second, and never a change
// that did not happen.
//
// # Records and keys
//
//	<webhookId>                  a webhook's settings (chain, status, url, flags, event signatures)
//	<webhookId>/<0x…lowercase>   one watched address; a tombstone when removed
//	account:<accountId>          an account's plan and shared secret
//
// Every record carries the version of the ClickHouse row it mirrors (in the
// value and in the "version" header, which tombstones carry too). All
// records of a webhook go to one partition (Partitioner).
//
// # Design: ClickHouse is the source of truth
//
// A change runs in this order, holding the webhook's (or account's) lock
// from Locks throughout. The query service's API (query/internal/webhooks/webhookapi)
// makes every kind of change; delivery deactivates failing webhooks. Both
// go through Writer (CreateWebhook, UpdateWebhook, UpdateAddresses,
// PutSecret), the one implementation of these steps:
//
//  1. validate and read the current state;
//  2. insert the new rows into ClickHouse (version: accountdb.Clock);
//  3. produce the records built from exactly those rows, synchronously
//     (Publish, bounded by --watch.produce-timeout);
//  4. acknowledge the request.
//
// A failed produce in step 3 (or a row that cannot be turned into a record:
// Update.PublishErr reports both) does not fail the request: the change is
// durable in ClickHouse, so it is acknowledged, and the query service's
// reconciler (query/internal/webhooks/reconcile) publishes it: it reads the topic
// (kafkautil.TableReader) and ClickHouse, and republishes every key whose
// last record differs from ClickHouse's latest row.
//
// # Why a crash loses nothing and invents nothing
//
// No phantom: a record is only ever built from a row ClickHouse already
// holds (step 3 publishes the rows step 2 wrote; the reconciler publishes
// rows it read), so the topic never holds a change ClickHouse does not. A
// create writes its addresses before its webhook row; the webhook row is
// the commit point: addresses of a webhook row that was never written are
// invisible to the API and never published (tombstoned if they ever were).
//
// No loss: a change is acknowledged only after step 2 succeeded. A crash
// (or failed produce) after step 2 leaves a row the topic lacks; the next
// reconciliation pass of any instance, at the latest the full pass at the
// restart, finds that the topic's last record for the key differs and
// publishes the row. Step by step:
//
//   - before step 2: nothing written, nothing acknowledged.
//   - between the address insert and the webhook insert of a create:
//     invisible leftovers, not acknowledged; the client's retry creates the
//     webhook.
//   - after step 2, before step 3 finished: the change exists in
//     ClickHouse (reads show it) and reaches the topic within
//     reconcile-interval + grace of a live reconciler. Not acknowledged: a
//     retried PATCH/DELETE is idempotent, and a retried create is answered
//     with the webhook already made (webhookapi's create dedupe window).
//   - after step 3, before step 4: both hold the change; retries as above.
//
// # Readers: one rule (Versions)
//
// Every reader that builds state from the topic (the processor's watch
// table, delivery's settings) applies a record only when its version is at
// least the highest it has seen for the key, tombstones included, so a late
// or republished record never resurrects a removed address or reactivates
// a deactivated webhook (Versions states why this agrees with ClickHouse).
// Readers wait for the table with kafkautil.TableReader.WaitReady. The
// reconciler is not such a reader: it compares each key's last record with
// ClickHouse, and republishes the row when a stale record came last.
//
// Order: records of one key reach the topic in version order within a
// process, because writers and the reconciler hold the key's lock from the
// ClickHouse write (or re-read) to the end of the produce. Across instances
// two concurrent changes of one key can reach the topic out of order;
// readers drop the older one (Versions), and the reconciler sees that the
// last record is not ClickHouse's latest row and republishes it within one
// interval, so the compacted topic keeps the latest. Rows younger than --watch.grace
// are left to their writer, so a reconciler does not race a healthy
// in-flight produce.
//
// Other writers: delivery changes webhooks through a Writer over a bare
// Publisher (no reconciler, no topic table); a change it fails to publish is in
// ClickHouse, and every incremental pass of the query service's reconciler
// compares every webhook row with the topic, so it is published within
// one --watch.reconcile-interval. Its Locks are its own: two processes
// changing one webhook at once are ordered by version, as below.
//
// Several instances: every query instance runs a reconciler; they may
// republish the same row at the same time, which writes identical records
// (same key, version and value). Versions come from each instance's clock
// (see accountdb.Clock for what clock skew can and cannot do).
//
// Durability below this package is the stores': ClickHouse acknowledges an
// insert once the part is written (it does not fsync by default), and
// records are produced with acks=all and idempotence (franz-go defaults).
//
// TestCrashAtEveryStep (query/internal/webhooks/webhookapi) kills a process at each step of each
// change and checks, after a restart, that topic and ClickHouse agree
// exactly, that acknowledged changes are present, and that a retried create
// does not make a second webhook.
//
// # Metrics
//
//	moraine_<service>_watch_records_produced_total{result}  ok, error (service: query, delivery)
//	moraine_<service>_watch_produce_duration_seconds
//
// The reconciler's metrics are listed in query/internal/webhooks/reconcile.
package watch
