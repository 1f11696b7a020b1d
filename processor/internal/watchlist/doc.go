// Package watchlist holds the matcher's watch table: which webhooks watch
// which address on which chain, and each webhook's settings, built from the
// compacted address-watch topic (schemas/proto/moraine/v1/watch.proto).
//
// What stays with the caller: reading the topic (kafkautil.TableReader calls
// ApplyRecord for every record, from the start, then tails), readiness (the
// reader's Ready), and when to catch up (the matcher calls CatchUp before
// each batch).
//
// # Records
//
//	<webhookId>                  WatchedWebhook: settings (status, chain, flags, event signatures)
//	<webhookId>/<0x…lowercase>   WatchedAddress: one watched address (tombstone: removed)
//	account:<accountId>          ignored here (delivery's)
//
// Records are applied by the one rule of pkg/watch (Versions): a record
// whose version is below the highest the table has seen for its key,
// tombstones included, is dropped (counted as stale); otherwise it replaces
// what its key held, a tombstone deletes the key, and a malformed record
// deletes what its key held (counted, logged).
// Address records carry their chain id, so an address is indexed before its
// webhook's settings arrive; until then (and after the settings' tombstone)
// the webhook has no settings and never matches. A deactivated webhook
// keeps its addresses in the table (status INACTIVE) and does not match;
// reactivation needs no re-read.
//
// # Layout
//
// chain -> map[[20]byte]uint32 -> webhook slot. The map value is a slot
// index, or (flag | list index) for an address several webhooks watch, so the
// map holds no pointers: a million watched addresses cost the garbage
// collector nothing to scan. Webhook settings are immutable snapshots,
// replaced on change, so a matcher can use them after releasing the lock.
// One writer (Apply), many readers (Read, under a read lock).
//
// # Metrics
//
//	moraine_processor_watchlist_addresses                 (webhook, address) entries
//	moraine_processor_watchlist_webhooks                  webhooks with settings (any status)
//	moraine_processor_watchlist_records_applied_total{kind}  webhook, address, account, tombstone
//	moraine_processor_watchlist_malformed_records_total
//	moraine_processor_watchlist_stale_records_total        dropped by the version rule
package watchlist
