// Package replay serves recorded EVM blocks over JSON-RPC as a node would, so
// that an indexer can be run and benchmarked against real chain data.
//
// A recording is a JSONL file, optionally zstd-compressed (detected from its
// magic bytes), with one object per block:
//
//	{"block": <eth_getBlockByNumber(n, true)>, "receipts": [<receipt>...],
//	 "traces": [{"txHash": ..., "result": <callTracer frame>}...]}
//
// Open loads and indexes it by block number, block hash and transaction hash,
// keeping the recorded bytes: responses carry the recorded JSON values byte for
// byte, never re-marshalled (eth_getBlockByNumber(n, false) and newHeads
// payloads are spliced from the recorded fields).
//
// A corpus (see OpenCorpus; deploy/cmd/corpus builds them) is a chain too
// large for memory, hundreds of thousands of blocks in the same line format:
// it is served from disk a zstd frame of blocks at a time, with the last
// FrameCache frames kept decoded, and its hashes are looked up by reading
// them back (HashScheme) instead of through an index. Config.File names
// either kind; OpenSource tells them apart.
//
// Methods (HTTP POST, WebSocket, and JSON-RPC batches on both): eth_chainId
// (Config.ChainID, or read from the recorded transactions), net_version,
// eth_blockNumber, eth_getBlockByNumber (hex number, "latest", "earliest" = the
// first recorded block), eth_getBlockByHash, eth_getBlockReceipts (number, tag,
// hash or {blockNumber|blockHash}), eth_getTransactionByHash,
// eth_getTransactionReceipt, debug_traceBlockByNumber, debug_traceBlockByHash
// and debug_traceTransaction with {"tracer":"callTracer"} (the recorded traces),
// eth_call and eth_getCode (always "0x": no state is recorded, every address
// is without code), eth_subscribe/eth_unsubscribe
// newHeads (WebSocket only), and moraine_recordedBlockNumbers(from, to): the
// numbers of the released recorded blocks within [from, to] (ascending hex
// quantities), which lets an indexer learn a sparse recording's numbers without
// probing each one. Unknown methods answer -32601.
//
// Blocks absent from the recording (gaps, like the Gunzilla file's every-100th
// blocks) and blocks not yet released answer as geth does for an unknown block:
// null for blocks, receipts and transactions, and the error "block #N not found"
// for traces.
//
// Modes: ModeBackfill exposes every block at once; ModeLive starts with the
// first Config.Preload blocks and releases the next one every 1/Config.Rate
// seconds, notifying newHeads subscribers.
//
// A node's cost: Config.TracedBlocksPerSecond paces debug_traceBlock* as a
// real node's tracer is bounded (tens of blocks per second), so that a
// benchmark is node-bound as production backfills are.
//
// Faults (Faults, for the node fault suite): a lag behind the head, 429s,
// receipts missing a log or a receipt, trace lists missing their last
// entry, blocks from another fork; set at start or, with Config.FaultControl,
// at run time by moraine_setFaults(Faults); moraine_faultCounts returns what
// was done. Without FaultControl neither method exists.
//
// The command deploy/cmd/replay runs it with the flags --replay.file,
// --replay.mode, --replay.rate, --replay.preload, --replay.traced-blocks-per-second,
// --replay.fault-control, --replay.fault-seed, --chain.id, --rpc.listen-address,
// --log.level and --log.format, each also read from MORAINE_<NAME> (upper case,
// '.' and '-' as '_').
package replay
