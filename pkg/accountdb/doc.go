// Package accountdb reads and writes the Webhooks API's state in ClickHouse:
// accounts, API keys (SHA-256 only), webhooks, watched addresses and shared
// secrets (migration 000003_webhooks; tables described there), and
// delivery's delivery log and failure strikes (migration 000004_deliveries),
// and which keys are operator keys (migration *_api_usage_and_operations, operators.go).
// The query service (API, moraine-admin) and delivery (deactivation, the
// log) share it.
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
// The delivery log is append-only (MergeTree); a page of it reads a bounded
// attempted_at range (Deliveries). Strikes are a ReplacingMergeTree keyed by
// (webhook, kind, message), counted with uniqExact since the webhook's
// latest "deactivated" strike.
//
// Metrics: moraine_<service>_accountdb_duration_seconds{statement}
// (Config.Subsystem: query by default, delivery in delivery).
package accountdb
