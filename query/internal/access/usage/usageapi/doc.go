// Package usageapi serves what package usage records: the hosted Data API
// Usage Metrics routes, as routes of the table.
//
//	GET /v1/apiUsageMetrics  getApiUsageMetrics  requests, success rate, median duration, invalid requests and
//	                                             compute units per time bucket (minute, hourly, daily, weekly,
//	                                             monthly; UTC), optionally per requestPath, responseCode, chainId,
//	                                             apiKeyId or requestType, filtered by any of them
//	GET /v1/apiLogs          getApiLogs          the requests themselves, newest first, paged, with the same filters
//
// Both need an API key and cost 200 CU (xxl, as hosted).
//
// # Who sees what
//
// A key reads its own account's usage: orgId may name only that account
// (another is a 403). An operator key (pkg/accountdb operator_keys, set by
// moraine-admin key create --operator or key set-operator) reads every
// account's: without orgId all of them together (orgId "all" in the
// answer, keyless requests included), with orgId one account. moraine-admin
// usage reads the same without a key.
//
// # Time
//
// startTimestamp and endTimestamp (Unix seconds) are rounded down to 0:00
// UTC of their day, as the hosted API documents, and both days are included:
// the range is [startDay, endDay + 1 day). Without them the range is the 7
// days ending today. A response holds at most MaxBuckets time buckets
// (10,080: a week of minutes); a longer range at that interval is a 400
// saying so. Buckets without requests are left out. With a groupBy, an
// answer holds at most MaxValues (100,000) values, one per bucket and group
// (an operator's week of hours by apiKeyId over thousands of keys holds
// more); ClickHouse stops such a read early, and it is a 400 saying so.
//
// # The numbers
//
// Per bucket (and group): totalRequests; requestsPerSecond, the requests
// over the bucket's length; successRatePercent, the share answered below
// 400; medianResponseTimeMsecs, from a histogram of the durations (within
// 9%: migration *_api_usage_and_operations); invalidRequests, the requests
// answered 4xx (429 included); apiCreditsUsed, the compute units charged;
// apiCreditsWasted, those charged for invalid requests. requestPath is the route's template
// ("/v1/chains/:chainId/blocks"; "unmatched" for paths no route serves);
// requestType is always "data" (moraine serves no RPC), so filtering on
// "rpc" finds nothing.
//
// Metrics read the rollup that fits the interval (minutes, hours or days,
// package usagesink's tables), never the log; logs read the log over a
// widening time window, never more than a page past the cursor.
//
// # Metrics
//
//	moraine_query_usage_read_duration_seconds{read}   metrics (by table) and logs reads
package usageapi
