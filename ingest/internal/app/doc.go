// Package app is the ingest service: it loads the chain file, connects to
// Kafka, creates the topics and runs one follower (package follow) per chain,
// with the ops server beside them. cmd/ingest only parses flags, calls New
// and Run, so tests run the whole service in-process.
//
// # Flags
//
// bin/ingest -h lists them, each also read from MORAINE_<NAME> ("." and "-"
// as "_"); ingest/README.md describes them.
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
