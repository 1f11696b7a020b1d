// Package ratelimit charges every API request its compute-unit (CU) weight
// against the caller's plan budget, and says so in response headers.
//
// # Semantics
//
//   - Who pays: a request with a valid API key is charged to its account
//     (all of the account's keys share one budget); a keyless request is
//     charged to its client IP under the "unauthenticated" tier. The client
//     IP is gin's ClientIP, which believes X-Forwarded-For only from the
//     configured trusted proxies.
//   - What it costs: the weight of the request's route (Deps.Weight; the
//     route table's server.Route.Weight, CONTRACT.md section 7.1: chains 1,
//     block list and block 10, block transactions and /v1/blocks 20,
//     webhook reads 10, webhook writes and address calls 20). Data and
//     Webhooks API share the budget, as on the hosted service.
//   - Budgets: plan.Plan's CU per minute and CU per day, two fixed windows
//     aligned to the Unix epoch (a minute starts at :00, a day at 00:00
//     UTC). A request must fit in both; a refused request is not charged.
//   - Headers on every limited route's response (IETF RateLimit header
//     fields draft): ratelimit-policy ("8000;w=60, 2000000;w=86400"),
//     ratelimit-limit and ratelimit-remaining (of the window closest to
//     exhaustion). A refused request gets 429 with the contract's error body
//     plus ratelimit-reset and retry-after: whole seconds until the windows
//     that refused it start over. The SDK does not retry 429 by itself.
//   - Failure: if the Limiter returns an error the request is let through
//     and counted under result="error".
//
// # Several query instances
//
// The shipped Limiter (Memory) counts in the memory of each instance. With N
// instances behind a load balancer each instance enforces the full budget on
// its own, so a client whose requests are spread over all of them can use up
// to N times its plan. Two knobs:
//
//   - --ratelimit.instances=N divides every budget by N on each instance.
//     With an even spread (round-robin, or hashing on the API key) the total
//     comes close to the plan; with an uneven spread a client is refused
//     somewhat early on the busiest instance. Remaining counts in headers are
//     per instance.
//   - A shared counter store: implement Limiter (one Take method) on Redis
//     or another store all instances reach, and every instance enforces one
//     exact budget. Not shipped.
//
// Counts also reset when an instance restarts (at most one extra budget per
// restart).
//
// # Metrics
//
//	moraine_query_ratelimit_requests_total{plan,result}   result: allowed, limited, error
//	moraine_query_ratelimit_compute_units_total{plan}     CU charged
//	moraine_query_ratelimit_subjects                      live counters (RunSweeper)
package ratelimit
