// Package nftworker is the NFT metadata worker: a consumer group
// (--nft.group) on the moraine.nft-metadata topic, where discovery (package
// nftdiscover) and the query service's reindexNft put requests, and on its
// four retry levels. For each NFT it reads tokenURI(id) (ERC-721) or
// uri(id) (ERC-1155; both when the standard is unknown) from the chain's
// nodes (pkg/rpc through pkg/tokenmeta), fetches the document (package
// nftfetch) and stores the result in ClickHouse's nft_metadata (package
// pkg/nftmeta), which the API renders.
//
// # indexStatus (the spec's NftTokenMetadataStatus)
//
//	UNINDEXED                   never fetched (no row: the API renders it), or stored while the node
//	                            could not answer and a retry is pending
//	INDEXED                     a metadata document (package nftfetch)
//	MISSING_TOKEN               tokenURI/uri reverted or returned nothing (no such token: never minted,
//	                            burned; or no such function, or no code) at a head at or above the block
//	                            that showed the token (a node behind it is not believed: retried)
//	UNKNOWN                     the call failed in the EVM without reverting (out of gas, invalid opcode):
//	                            the contract's answer says nothing of the token; or the node did not answer
//	                            any attempt
//	INVALID_TOKEN_URI           the call returned data that is not a string; the string is not a URI
//	                            (package nftfetch)
//	METADATA_CONTENT_TOO_LARGE  the returned string is longer than a document may be (a data: URI over
//	                            --nft.max-document-bytes); the document is (package nftfetch)
//	INVALID_TOKEN_URI_SCHEME, UNREACHABLE_TOKEN_URI, THROTTLED_TOKEN_URI,
//	INVALID_METADATA, INVALID_METADATA_JSON     package nftfetch
//
// # Retries
//
// Transient failures are retried with backoff: THROTTLED_TOKEN_URI (HTTP
// 429), UNREACHABLE_TOKEN_URI without an answer (DNS, connection, timeout)
// or with a 5xx/408, and a node that does not answer. After failed attempt
// n (1..4) the next is due --nft.retry-schedule[n-1] later (default 1 min,
// 10 min, 1 h, 6 h: five attempts over about 7 h 11 min); the last
// attempt's status stays (a node that never answered: UNKNOWN).
// Meanwhile the API shows the last attempt's status. A pending retry is a
// Kafka record on retry level n (moraine.nft-metadata-retry-n), not a
// timer: a restart loses none. Every record of a level waits the same
// delay, so a partition is in due order: the worker rewinds a partition
// to its first record not due yet and pauses it until then. A fetch that
// waited --nft.host-queue-timeout for a slot of its busy host is parked on
// level 1 without spending an attempt (nothing is stored). Final failures
// are not retried; reindexNft asks again.
//
// # Guarantees
//
//   - Restarts fetch nothing twice. State is ClickHouse's rows and Kafka's
//     offsets: a batch's retries are produced (acks=all), then its rows
//     inserted, then its offsets committed; every request is judged
//     against the stored row first (rows read with FINAL): a discovered NFT
//     with a row, a retry no longer awaited, a reindex within the hour of
//     the last one, are skipped. A crash repeats at most the attempts of one
//     batch.
//   - Scale-out without duplicate work: requests are keyed by NFT, so each
//     NFT's requests go to the one instance that owns its partition (8
//     partitions per topic: up to 8 instances share the work).
//   - The indexing pipeline never waits: discovery only produces requests,
//     and the worker's fetches are bounded per host (--nft.max-per-host), in
//     all (--nft.max-in-flight), in time (--nft.fetch-timeout) and in size
//     (--nft.max-document-bytes); a batch is bounded by its node calls
//     (--nft.rpc-timeout), the host queue and one fetch.
//   - reindexNft: a REINDEX request refetches even an indexed NFT, at most
//     once per nftmeta.ReindexInterval (the API refuses earlier requests; the
//     worker skips one that reaches it earlier anyway, e.g. from two query
//     instances racing). While a reindex's node calls fail, the stored
//     document is kept.
//
// # Metrics
//
//	moraine_processor_nft_metadata_results_total{status}            attempts by the status stored (deferred: none)
//	moraine_processor_nft_metadata_requests_total{result}           fetched, skipped, deferred, undecodable
//	moraine_processor_nft_metadata_retries_scheduled_total{status}  attempts put on a retry level
//	moraine_processor_nft_metadata_fetch_duration_seconds{scheme}   http, https, ipfs, data, other
//	moraine_processor_nft_metadata_batch_duration_seconds{stage}    state, node, fetch, total
//
// and the groups' lag, moraine_kafka_consumer_lag_records{group="moraine-nft-metadata",topic}
// (the retry levels' lag is the retries pending).
package nftworker
