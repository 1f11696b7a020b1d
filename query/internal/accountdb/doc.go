// Package accountdb reads and writes the Webhooks API's state in ClickHouse:
// accounts, API keys (SHA-256 only), webhooks, watched addresses and shared
// secrets (migration 000003_webhooks; tables described there).
//
// Every table is a ReplacingMergeTree(version). A change inserts a whole new
// row with a higher version (Clock); reads use FINAL, with filters on
// non-key columns outside the FINAL subquery so they see only the latest
// version of each row. Nothing is deleted: removed addresses, revoked keys
// and inactive webhooks are flagged rows, so the latest state of every key
// stays readable (the address-watch reconciler relies on that).
//
// Reads are scoped by account where an account owns the row: webhooks are
// keyed by (account_id, id), so another account's id is simply not found.
// Address listing pages by key range (address > cursor) within a bounded
// window of the address space (AddressPage), never by OFFSET.
//
// Inserts are one batch per call (one block, applied atomically), detached
// from the caller's cancellation and bounded by --accountdb.timeout.
//
// Errors: ErrNotFound; errors wrapping ErrUnavailable when ClickHouse
// cannot answer; anything else is a bug in a statement.
//
// Metrics: moraine_query_accountdb_duration_seconds{statement}.
package accountdb
