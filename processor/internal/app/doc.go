// Package app wires the processor; it holds no loop of its own. Three
// independent consumers of the blocks topic run in one process (each can
// be switched off):
//
//   - the sink (package sink; --processor.sink-enabled, group
//     --processor.group) writes blocks, transactions, logs and internal
//     transactions to ClickHouse, at least once and idempotently;
//   - the matcher (package matcher; --matcher.enabled, group
//     --matcher.group) joins every block against the watch table and
//     produces one activity record per (webhook, transaction) to the
//     activity topic, for delivery, exactly once;
//   - NFT discovery (package nftdiscover; --nft.enabled, group
//     --nft.discovery-group) asks for the metadata of every NFT its blocks'
//     transfers show, on the moraine.nft-metadata topic, which the metadata
//     worker (package nftworker, group --nft.group, same switch) consumes:
//     it reads tokenURI/uri from the chains' nodes, fetches the documents
//     and writes nft_metadata, retrying on its own delay topics.
//
// A third consumer, of the API-requests topic, runs beside them: the usage
// sink (package usagesink; --usage.enabled, group --usage.group) writes the
// query service's request records to the request log and its usage rollups,
// and drops their old months.
//
// Separate groups keep their offsets apart: a slow ClickHouse does not hold
// back webhooks, a matcher restart does not rewrite rows, and a slow or
// hostile metadata host holds back neither (the worker's fetches are
// bounded per host and in all, and discovery never waits for them). The
// three read the same block batches, which are decompressed once for all.
//
// The guarantees of each and their metrics are in those packages' docs.
// Besides those, the processor exports
// moraine_kafka_consumer_lag_records{group,topic,partition} of the sink's,
// the matcher's, the NFT groups and the usage sink's, and franz-go's client metrics
// moraine_kafka_*{client} (package kafkautil).
package app
