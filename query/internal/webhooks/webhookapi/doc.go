// Package webhookapi serves the Webhooks API of the Avalanche Data API for
// EVM address_activity webhooks (CONTRACT.md sections 2.7 to 2.14).
//
// # Routes (API.Routes, in the query service's route table)
//
//	POST   /v1/webhooks                                201 EVMAddressActivityResponse
//	GET    /v1/webhooks?status=&pageSize=&pageToken=   200 {webhooks, nextPageToken?}, newest first
//	GET    /v1/webhooks/{id}                           200 webhook
//	PATCH  /v1/webhooks/{id}                           200 webhook (name, description, url, status, includeInternalTxs, includeLogs,
//	                                                       confirmations)
//	DELETE /v1/webhooks/{id}                           200 webhook, status inactive (PATCH status active reactivates)
//	PATCH  /v1/webhooks/{id}/addresses                 200 webhook; body {addresses}
//	DELETE /v1/webhooks/{id}/addresses                 200 webhook; body {addresses}
//	GET    /v1/webhooks/{id}/addresses?pageSize=&pageToken=  200 {addresses, totalAddresses, nextPageToken?}
//	GET    /v1/webhooks/{id}/deliveries?pageSize=&pageToken= 200 {deliveries, nextPageToken?} (moraine extension)
//	POST   /v1/webhooks:generateOrRotateSharedSecret   201 {secret}: 32 random bytes, 64 lowercase hex
//	GET    /v1/webhooks:getSharedSecret                200 {secret}; 404 before the first generate
//
// The two custom-method paths carry a literal colon. Every GET route also
// answers HEAD (Express does), with the same checks (package server).
//
// Every route needs an API key (server.Account: package access answers 401
// otherwise, before charging the request) and
// acts on the caller's account only: another account's webhook id is 404,
// exactly like an unknown one, and page tokens are bound to the account.
//
// # Semantics
//
//   - Responses: optional fields are omitted, never null; name and
//     description default to ""; metadata.eventSignatures only when set;
//     createdAt in Unix milliseconds; id a UUID v4; chainId the EVM chain id
//     (a base58 blockchain id is accepted on create).
//   - Addresses are matched case-insensitively and echoed as given (the
//     first spelling wins); adding a watched address or removing an absent
//     one is a no-op. A create's response lists its addresses in request
//     order; every other response in address order, at most
//     --webhooks.max-addresses-in-response of them.
//   - Validation: 400 in the contract's body, message an array of every
//     failed constraint: "Invalid address format" (0x + 40 hex),
//     "Invalid event signature format" (0x + 64 hex), absolute http(s) url,
//     eventType address_activity, a configured chain with webhooks enabled,
//     includeInternalTxs only on chains with traces, types of every field.
//     A body that is not a JSON object: 400. Unknown fields are ignored.
//   - Webhook URLs: the delivery target policy (package guard) applies when
//     a URL is accepted, on create, on a PATCH that changes it, and on a
//     PATCH that reactivates the webhook: scheme, port 1-65535, internal
//     addresses in every spelling (127.1, 2130706433, [::ffff:127.0.0.1],
//     ...), internal names (localhost, *.internal, single labels, ...) and
//     the addresses the host resolves to. 400 with the reason ("url host
//     169.254.169.254 is a link-local address ..."), 503 when the resolver
//     itself failed. --delivery.allow-private-targets (delivery's flag, for
//     the development stack) accepts internal targets. Delivery checks
//     again when it connects, since DNS answers change.
//   - Plan limits: 403 when a create or an address addition would pass the
//     plan's addresses per webhook (free: 5), or when a create or a
//     reactivation (PATCH status active) would pass the plan's active
//     webhooks per account. Inactive webhooks (DELETE, or deactivated by
//     delivery) do not count: deleting one frees its place.
//   - Never a 5xx once a webhook exists: after the webhook row is written
//     nothing can fail the request (publishing failures are logged and
//     repaired by the reconciler). The SDK retries POST after 5xx and
//     connection errors, so an identical create from the same account within
//     --webhooks.create-dedupe-window (2 min) returns the webhook already
//     made (201) instead of a second one, as long as that webhook is still
//     active and equal to the request (URL, chain, addresses, event
//     signatures, name, description, flags); one deleted or changed since
//     is not returned, and the request creates a new webhook. Two
//     deliberately identical webhooks must therefore be created more than
//     the window apart, or differ in a field (e.g. name).
//   - Read your writes: every response is built from the state just
//     written; later reads use ClickHouse FINAL, which includes it.
//
// # Delivery log (moraine extension)
//
// GET /v1/webhooks/{id}/deliveries lists the attempts delivery made for one
// of the caller's webhooks (another account's id is 404), newest first,
// pageSize 1..100 (default 10), with a signed page token like the other
// lists:
//
//	{"deliveries": [{"messageId", "attempt", "status", "result", "latencyMs",
//	                 "error"?, "attemptedAt", "nextAttemptAt"?}], "nextPageToken"?}
//
// result is success, http_error, timeout, network, refused_target, or
// inactive (a message dropped without an attempt because the webhook was
// inactive); status is the HTTP status, 0 without a response; times are
// Unix milliseconds; error never shows the URL's userinfo or query.
//
// Attempts without an HTTP response show the class of failure only, so
// the log cannot serve as a port scanner of what an endpoint's name leads
// to: network and refused_target have status 0, latencyMs 0 and a fixed
// error text; timeout has status 0, the recorded latency (the attempt
// timeout) and a fixed text. success and http_error show the status, the
// latency and (http_error) the start of the response body. The full error
// stays in ClickHouse (table deliveries) for the operator. The log
// is written in batches and is best-effort (see delivery/internal/dlog):
// the newest ~200 ms may not be listed yet, and a crash of delivery may lose
// a few rows.
//
// # Propagation and crash safety
//
// Every change goes through watch.Writer: it writes ClickHouse, then
// produces its address-watch records synchronously, then the API answers;
// see package watch for the design and the argument. Hooks mark the steps;
// TestCrashAtEveryStep ends a child process at each of them and checks the
// restart.
//
// # Metrics
//
//	moraine_query_webhook_changes_total{op}
//	moraine_query_webhook_publish_failures_total{op}
//	moraine_query_webhook_creates_deduplicated_total
package webhookapi
