// Package devchain runs moraine's development chain: an in-process
// go-ethereum node (node.New + eth.New + catalyst.NewSimulatedBeacon, the parts
// of go-ethereum's simulated backend) with the debug tracers registered, in
// archive mode (no pruning, hash state scheme) so every block can be traced.
//
// It serves JSON-RPC over HTTP and WebSocket on one address (default
// 127.0.0.1:8545; port 0 picks a free port, see Chain.HTTPURL and Chain.WSURL)
// with the eth, net, web3, debug, txpool and moraine namespaces: everything an
// indexer needs (eth_chainId, eth_blockNumber, eth_getBlockByNumber/ByHash,
// eth_getBlockReceipts, eth_getTransactionReceipt, eth_call,
// debug_traceBlockByNumber with {"tracer":"callTracer"}, eth_subscribe newHeads).
// The EVM chain id is 43112 by default; the fork rules are go-ethereum's dev
// chain up to Osaka.
//
// A block is sealed every Config.BlockInterval (default 1 s; block timestamps
// are whole seconds and strictly increasing, so with a shorter interval they
// run ahead of the wall clock). Each block carries Config.TxPerBlock
// transactions (default 16) generated from Config.Seed by funded genesis
// accounts, a mix of legacy (type 0) and dynamic-fee (type 2) transactions:
// native transfers, ERC-20 mints, transfers and approvals (with transferFrom
// through a contract), ERC-721 mints and transfers, ERC-1155 single and batch
// mints and transfers, contract creations (top-level and from a factory, CREATE
// and CREATE2), value forwarded through 3-4 relay contracts (internal
// transactions with value 3-4 levels deep), failed inner calls caught by the
// caller, and reverted transactions (status 0). The block gas limit (150M) and
// the generous per-transaction gas limits let about 300 generated transactions
// fit in a block; more are cut (with a warning). The contracts are compiled from
// contracts/Moraine.sol and contracts/MoraineMeta.sol (go generate, solc-js)
// and deployed in block 1; their addresses are fixed (Chain.Contracts,
// moraine_contracts). The tokens answer name(), symbol() and, for ERC-20,
// decimals().
//
// # NFT metadata
//
// Two collections exist for moraine's NFT metadata worker: ERC-721 "Moraine
// Meta" (Contracts.MetaNFT) and ERC-1155 "Moraine Meta Items"
// (Contracts.MetaItems). Their token URIs point at a metadata server that
// the chain serves itself, on its JSON-RPC address under /nft/ (and an IPFS
// gateway under /ipfs/): wherever the chain runs (make run, the tests, the
// local cluster), its documents do. Block 1 mints one special token per
// metadata outcome (MetaTokens: a good document by http, base64 and plain
// data: URIs and ipfs://; a document that is not JSON, JSON that is not
// metadata, 2 MiB of JSON, HTTP 429, HTTP 404, 503 twice then a document, an
// ftp:// URI, a string that is not a URI, a tokenURI that returns a number,
// one that hits an invalid opcode, a burned token, an item at a closed port), each
// with the Data API indexStatus moraine's worker gives it; the traffic then
// mints and transfers tokens with good documents (ids from
// MetaTrafficIDBase; item ids 1..MetaItemIDs through the {id} template). The
// older collections' URIs (ipfs://moraine/...) are good documents through
// the gateway. The documents' URL prefix is Config.MetadataBaseURL
// (--metadata.base-url), by default the HTTP endpoint + "/nft/".
//
// Reorganisations: Chain.Reorg(ctx, depth) or the JSON-RPC method
// moraine_reorg(depth) replaces the last depth blocks (1..64) with a new branch
// of depth+1 blocks carrying different transactions: every replaced height gets
// a new hash, the head number grows by one, the block at head-depth (the fork
// point) is unchanged and the old blocks are no longer reachable by number
// (they stay reachable by hash, as on a real node, unless go-ethereum's freezer
// had already moved them to its ancient store: it moves the finalized blocks,
// every 32nd block is finalized, about once a minute; the reorg then rewinds
// with SetHead, which deletes the replaced blocks). The "finalized" and "safe"
// block tags are the simulated beacon's: moraine_reorg can replace finalized
// blocks. moraine_mine(n) seals n blocks at once; moraine_accounts lists the
// funded accounts; moraine_metaTokens the metadata collections' special tokens.
//
// # Persistence
//
// With Config.DataDir empty (the default) the chain lives in memory: every
// start is a new chain from genesis, with new block hashes. With a directory,
// go-ethereum stores the chain there (<DataDir>/moraine-devchain/chaindata,
// pebble, archive mode, hash state scheme; the directory is locked while a
// chain runs) and a restart continues it:
//
//   - the genesis is the same on every start (fixed timestamp and extra data,
//     allocation derived from Config.Accounts), the simulated beacon builds on
//     the stored head: the stored blocks keep their hashes and the new blocks go
//     on top (Start mines one before it returns);
//   - the traffic generator resumes: the contracts are found by their code at
//     their fixed addresses (not deployed again; a chain stored before the
//     metadata collections existed gets them, at their fixed addresses, in
//     its next block), the first block after a start points the metadata
//     collections at this process's metadata server, nonces come from the head
//     state, ERC-721 token ids and CREATE2 salts contain the block number
//     (always above the stored head), so every generated transaction is
//     accepted. <DataDir>/devchain.json keeps the reorg counter (a new branch
//     never repeats transactions) and the chain id and number of accounts: a
//     data dir is refused with different ones (the seed, the interval and the
//     transactions per block may change). A database made with a go-ethereum
//     whose dev-chain rules give another genesis is refused too: remove the
//     directory to start over;
//   - a clean stop (Close; SIGINT or SIGTERM for the command) closes the
//     database. After a crash or SIGKILL the chain resumes from what reached
//     the disk. The state is written with every block (archive) but go-ethereum
//     does not sync its writes: the last blocks could stay in a buffer of the
//     process. The chain syncs the database after every block on the interval
//     and at the end of Mine (moraine_mine) and Reorg (moraine_reorg), so a
//     kill (or a machine crash) loses at most the block being sealed, or the
//     unsynced part of a batch in progress. If blocks were lost, the chain goes
//     on from the last stored one and those heights get new blocks with new
//     hashes: a consumer sees a reorganisation of that depth.
//
// The archive keeps every block and state: with the default traffic the
// directory grows by tens of kilobytes per block, a few gigabytes a day at one
// block a second.
//
// # Command
//
// The command deploy/cmd/devchain runs it with the flags --rpc.listen-address,
// --chain.id, --block.interval (0s: blocks only on moraine_mine),
// --traffic.tx-per-block (0: empty blocks), --traffic.seed, --traffic.accounts,
// --datadir (empty: in memory), --metadata.base-url, --log.level and
// --log.format, each also read
// from MORAINE_<NAME> (upper case, '.' and '-' as '_').
package devchain
