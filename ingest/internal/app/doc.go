// Package app is the ingest service: it loads the chain file, connects to
// Kafka, creates the topics and runs one follower (package follow) per chain,
// with the ops server beside them. cmd/ingest only parses flags, calls New
// and Run, so tests run the whole service in-process.
//
// # Flags (each also read from MORAINE_<NAME>, "." and "-" as "_")
//
//	--chains.file             chain configuration file (deploy/chains/dev.json)
//	--ingest.chains           comma-separated chain ids to ingest (default: all of the file)
//	--kafka.brokers           seed brokers (127.0.0.1:9092)
//	--kafka.topic-prefix      prefix of every topic name ("")
//	--rpc.timeout             one JSON-RPC HTTP request (30s)
//	--rpc.batch-blocks        blocks per JSON-RPC batch (10)
//	--ingest.concurrency      batches in flight per chain (4)
//	--ingest.poll-interval    eth_blockNumber polling without a subscription (1s)
//	--ingest.ready-lag        ready within this many blocks of the head (2)
//	--ingest.reorg-window     recent hashes kept for reorg detection (256, at least 128)
//	--ops.listen-address      /metrics, /healthz, /readyz (127.0.0.1:9101; --admin.listen-address is its deprecated name)
//	--shutdown.timeout        time to produce what was fetched after a stop (15s)
//	--log.level, --log.format (info, text)
//
// # Guarantees
//
// Those of package follow, for every chain: blocks in order, no gap and no
// double count across restarts (the checkpoint is read back from Kafka),
// reorg events before the replacing branch. One follower failing for good
// (a reorg deeper than the window) stops the others and Run returns its error.
//
// # Readiness
//
// /readyz passes when Kafka answers, and every chain's node answered, its
// checkpoint was recovered and its acknowledged blocks are within
// --ingest.ready-lag of its head. /healthz passes while the process runs.
//
// # Shutdown
//
// When ctx ends the followers stop fetching, produce what they fetched and
// wait for Kafka's acknowledgements (bounded by --shutdown.timeout); then the
// producer is flushed and closed, and the ops server stops last so that
// /metrics shows the shutdown.
package app
