// Package reconcile keeps the compacted address-watch topic equal to the
// webhook state in ClickHouse for the query service: it publishes what a
// request wrote but could not publish (a failed or interrupted produce),
// what another process changed (delivery's deactivations, moraine-admin),
// and tombstones keys ClickHouse does not back. Package watch describes the
// records, the order of a change's steps (watch.Writer) and why a crash
// loses nothing; this package is the half of that argument that repairs.
//
// The Reconciler reads the whole topic through kafkautil.TableReader (the
// reader the processor and delivery use) into a table of each key's last
// record (version, live or tombstone, offset) and keeps tailing it. A pass
// takes the topic's end offsets, waits until the table has reached them
// (TableReader.CatchUpOffsets), reads ClickHouse, and for every key whose
// last record differs from ClickHouse's latest row re-reads the row under
// the key's lock (watch.Locks, shared with the API) and publishes it.
// Passes run at start-up (full; Ready turns true after it), every
// --watch.reconcile-interval (incremental: every account and webhook, and
// the addresses changed within --watch.lookback or since the oldest change
// this process failed to publish), and every --watch.full-reconcile-interval
// (full: every address too, plus a tombstone for every live key ClickHouse
// does not have at all, unless those are so many that a misconfigured
// database is the likelier cause: then it refuses, logs an error and counts
// moraine_query_watch_phantom_tombstones_refused_total).
//
// Keys whose last record arrived after the pass began are left alone (a
// writer is at work on them), and so are rows younger than --watch.grace
// (their writer may still be producing them).
//
// # Metrics
//
//	moraine_query_watch_pending_versions                    failed publishes not yet covered by a pass
//	moraine_query_watch_reconcile_runs_total{mode,result}   incremental|full, ok|error
//	moraine_query_watch_reconcile_duration_seconds{mode}
//	moraine_query_watch_republished_total{kind}             webhook, address, tombstone, account, phantom
//	moraine_query_watch_topic_keys
//	moraine_query_watch_ready                               1 after the first full pass
//	moraine_query_watch_phantom_tombstones_refused_total    see "Safety valve" on tombstonePhantoms
package reconcile
