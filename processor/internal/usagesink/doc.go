// Package usagesink writes the query service's request records (the
// API-requests topic, schemas/proto/moraine/v1/usage.proto) to ClickHouse's
// request log, api_requests, whose materialized views fill the usage
// rollups (api_usage_minutes, _hours, _days per account,
// api_usage_global_* over every account, api_usage_key_* per key) that
// getApiUsageMetrics reads;
// and drops the log's and rollups' old months (--usage.log-retention,
// --usage.metrics-retention). It is its own consumer group
// (--usage.group), beside the blocks sink and the matcher.
//
// # Nothing lost, nothing twice
//
// Offsets are committed only after their records are in ClickHouse, so
// while ClickHouse is down the records wait in Kafka (the topic keeps them
// for 3 days) and the batch in hand is retried with backoff until
// ClickHouse answers; nothing is lost, however long the outage within the
// topic's retention.
//
// Every row keeps its Kafka partition and offset. Before it writes a
// partition's records for the first time after being assigned it, and
// before every retry of a failed insert (which ClickHouse may have written
// before the error reached the sink), the sink reads the highest offset of
// that partition already in api_requests and skips the records at or below
// it. A redelivered batch (a crash between insert and commit, a rebalance,
// an insert whose answer was lost) is therefore not written twice, and the
// rollups, filled once per inserted row, count each request once. An
// insert is one block, which ClickHouse writes whole or not at all (on a
// cluster, a retried identical block is dropped by the replicated table
// too). What is not covered: an instance frozen past its session timeout
// that writes after its partitions moved on (kill -9 is covered).
//
// # Top accounts
//
// Every minute the sink reads the last hour of the minute rollup and
// exports the ten accounts with the most requests and the ten with the
// most compute units (keyless requests count as the account "none"), for
// the dashboard's usage row: account ids are unbounded, so they are never
// labels of the per-request series.
//
// # Metrics
//
//	moraine_processor_usage_records_total{result}                     written, duplicate (skipped: already in ClickHouse), undecodable
//	moraine_processor_usage_batch_duration_seconds                    time to write one batch, retries included
//	moraine_processor_usage_last_written_timestamp_seconds            arrival time (Unix s) of the newest request written
//	moraine_processor_usage_partitions_dropped_total                  log and rollup partitions dropped by retention
//	moraine_processor_usage_top_account_requests{account,name}        requests in the last hour, the 10 accounts with most
//	moraine_processor_usage_top_account_compute_units{account,name}   compute units in the last hour, the 10 accounts with most
//	moraine_processor_usage_top_account_errors{account,name}          of those accounts, requests answered 4xx or 5xx
package usagesink
