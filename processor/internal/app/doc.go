// Package app wires the processor; it holds no loop of its own. Two
// independent consumers of the blocks topic run in one process (either can
// be switched off):
//
//   - the sink (package sink; --processor.sink-enabled, group
//     --processor.group) writes blocks, transactions, logs and internal
//     transactions to ClickHouse, at least once and idempotently;
//   - the matcher (package matcher; --matcher.enabled, group
//     --matcher.group) joins every block against the watch table and
//     produces one activity record per (webhook, transaction) to the
//     activity topic, for delivery, exactly once.
//
// A third consumer, of the API-requests topic, runs beside them: the usage
// sink (package usagesink; --usage.enabled, group --usage.group) writes the
// query service's request records to the request log and its usage rollups,
// and drops their old months.
//
// Separate groups keep their offsets apart: a slow ClickHouse does not hold
// back webhooks, and a matcher restart does not rewrite rows. Both read
// the same block batches, which are decompressed once for the two.
//
// The guarantees of each and their metrics are in those packages' docs.
// Besides those, the processor exports
// moraine_kafka_consumer_lag_records{group,topic,partition} of the sink's,
// the matcher's and the usage sink's groups, and franz-go's client metrics
// moraine_kafka_*{client} (package kafkautil).
package app
