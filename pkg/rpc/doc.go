// Package rpc is the codebase's one JSON-RPC client: batched calls over
// HTTP with a per-request timeout, and a Pool per chain that spreads them
// over every node of the chains file with failover, per-node limits and
// adaptive concurrency. ingest reads blocks through it; token metadata,
// balance and NFT reads, and moraine-admin status use it too.
//
// # Using a chain's nodes
//
//	pool, err := rpc.NewPool(rpc.ForChain(ch), metrics) // ch: a chains.Chain
//	go pool.Run(ctx)                                    // optional: tracks each node's head
//	res, err := pool.CallWith(ctx, []rpc.Option{rpc.AtBlock(n)}, "eth_getBalance", addr, rpc.Quantity(n))
//
// A Pool sends each call to the node expected to answer first among those
// that work, have reached the block (AtBlock, when Run tracks heads) and
// have room under their limits (chains.Node: requestsPerSecond,
// maxConcurrency, maxBatch; concurrency adapts: halved on 429s, lowered
// while a node's latency rises and the other nodes' does not, raised one
// step per round trip otherwise). A call
// the node fails is sent to another node; a node that fails is cooled down,
// its requests in flight are cancelled and resent, and its next successful
// head poll takes it back. Hedge sends a slow call to a second node too.
//
// # Errors
//
// Results stay raw (json.RawMessage): the caller decodes them, so a block's
// megabytes of traces are parsed once, by their reader. Errors tell apart:
//
//   - IsUnavailable: the node works but cannot answer for that block
//     (pruned state, missing trie node, header not found). The pool has
//     asked the chain's other nodes first.
//   - IsReverted: the contract's own answer to an eth_call.
//   - IsNodeFailure: no node answered (transport, timeout, HTTP error,
//     rate limiting, ErrNoNode).
//
// Any other *Error is the node's JSON-RPC error answer to that call.
//
// # Metrics
//
// Registered by NewMetrics; node is the name in the chains file (the URL
// never is a label: it can hold an API key; Redact is the one rule for
// showing it):
//
//	moraine_rpc_requests_total{chain,node,method,result}      calls by outcome
//	moraine_rpc_request_duration_seconds{chain,node,method}   HTTP round trips
//	moraine_rpc_node_head_block{chain,node}                  each node's head (polled)
//	moraine_rpc_node_up{chain,node}                          1 while the node gets work
//	moraine_rpc_node_concurrency_limit{chain,node}           the adaptive limit
//	moraine_rpc_node_inflight_requests{chain,node}           requests in flight
//	moraine_rpc_failovers_total{chain,node,reason}           calls resent elsewhere after this node failed them
//	moraine_rpc_hedges_total{chain,result}                   sent, won
//	moraine_rpc_unavailable_total{chain,node}                "cannot answer for that block" answers
//
// result is one of ok, rpc_error, rate_limited, http_error, timeout,
// transport_error, bad_response. A batch mixing methods is timed under
// method="batch".
package rpc

import "strconv"

// Quantity is n as a JSON-RPC block number parameter ("0x1b4").
func Quantity(n uint64) string { return "0x" + strconv.FormatUint(n, 16) }
