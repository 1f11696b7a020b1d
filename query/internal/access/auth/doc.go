// Package auth turns the API key of a request into the account that owns it.
//
// Keys are "mk_" followed by 64 lowercase hex digits (32 random bytes). Only
// their SHA-256 is stored (accountdb api_keys); the key id shown in listings
// is the first 16 hex digits of that hash and the prefix is the key's first
// 11 characters. moraine-admin creates, lists and revokes keys.
//
// # Requests
//
//   - The key is read from x-data-api-key (SEED.md) or x-glacier-api-key
//     (what the official SDKs send). Both may be sent; then they must be
//     equal, else 401.
//   - No key: block and chain reads are allowed under the unauthenticated
//     rate-limit tier (charged to the client IP); webhook and shared-secret
//     routes answer 401 (RequireKey).
//   - A malformed, unknown or revoked key, or one whose account is gone:
//     401 {"message":"Unauthorized","statusCode":401,"error":"Unauthorized"}
//     on every route, also on block reads (no silent downgrade).
//   - The lookup cannot be made (ClickHouse down): 503.
//
// Middleware order (package access): Identify (never aborts) → RequireKey
// on routes that need an account → the rate limiter (charges the account,
// or the client IP for keyless and refused requests, so guessing keys is
// rate limited too) → RejectInvalid → handler.
//
// # Cache
//
// Lookups, found or not, are cached for --auth.cache-ttl (5 s): a revoked
// key, a new key or a plan change takes effect within that time on every
// instance (each has its own cache). The cache holds at most
// --auth.cache-size keys.
//
// # Metrics
//
//	moraine_query_auth_requests_total{result}      ok, none, invalid, error
//	moraine_query_auth_key_lookups_total{source}   cache, clickhouse
package auth
