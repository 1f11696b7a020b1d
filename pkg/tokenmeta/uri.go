package tokenmeta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/rpc"
)

// Selectors of the NFT metadata URI functions.
const (
	selTokenURI = "0xc87b56dd" // ERC-721 tokenURI(uint256)
	selURI      = "0x0e89341c" // ERC-1155 uri(uint256)
)

// URIRequest names one NFT whose metadata URI is read.
type URIRequest struct {
	Contract evm.Address
	TokenID  *big.Int
	// Standard is 721 (tokenURI(id) is asked), 1155 (uri(id)) or 0, when
	// the standard is not known: both are asked, and the one that answers a
	// string wins (tokenURI first).
	Standard uint16
}

// URIOutcome classifies a contract's answer to tokenURI / uri.
type URIOutcome uint8

// Outcomes of a URI read.
const (
	// URIAnswered: the call returned an ABI string (URIResult.URI; it may be
	// empty, or not be a URI at all: the caller judges it).
	URIAnswered URIOutcome = iota + 1
	// URINotString: the call returned data that is not an ABI string.
	URINotString
	// URITooLong: the string is longer than the caller's limit.
	URITooLong
	// URIReverted: the call reverted, or returned nothing (no code at the
	// address): the contract has no such token, or no such function.
	URIReverted
	// URIFailed: the call failed in the EVM other than by a revert (out of
	// gas, invalid opcode, ...): the contract's answer says nothing about
	// the token.
	URIFailed
	// URIUnavailable: the node did not answer the call (an RPC error that
	// is not the contract's doing: unknown block, pruned state, rate limit):
	// ask again later.
	URIUnavailable
)

// URIResult is the answer for one URIRequest.
type URIResult struct {
	Outcome URIOutcome
	// URI is the returned string when Outcome is URIAnswered.
	URI string
	// Standard is the standard whose call gave the outcome (721 or 1155).
	Standard uint16
	// Detail is the node's error text for the failed outcomes (operators'
	// logs and the stored row's error).
	Detail string
}

// TokenURIs reads the metadata URI of each request from the chain's nodes:
// it asks a node's head block number, then calls every request at that
// block, as one batch through the chain's pool (which splits it by the
// nodes' batch limits and sends it to nodes that have the block), bounded
// by Config.CallTimeout. head is that block. maxLen bounds the returned
// strings (longer ones are URITooLong). err is non-nil only when no node
// answered at all (or the chain has no node): the results are then nil.
// Answers are not cached: a token URI can change (a reveal) and the
// metadata worker asks each NFT once.
func (r *Resolver) TokenURIs(ctx context.Context, chain uint64, reqs []URIRequest, maxLen int) (head uint64, out []URIResult, err error) {
	pool := r.rpc[chain]
	if pool == nil {
		return 0, nil, fmt.Errorf("tokenmeta: no RPC URL for chain %d", chain)
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	raw, err := pool.Call(ctx, "eth_blockNumber")
	if err != nil {
		return 0, nil, fmt.Errorf("rpc chain %d: eth_blockNumber: %w", chain, err)
	}
	var headHex string
	if err := json.Unmarshal(raw, &headHex); err != nil {
		return 0, nil, fmt.Errorf("rpc chain %d: eth_blockNumber: %w", chain, err)
	}
	if head, err = strconv.ParseUint(strings.TrimPrefix(headHex, "0x"), 16, 64); err != nil {
		return 0, nil, fmt.Errorf("rpc chain %d: eth_blockNumber %q: %w", chain, headHex, err)
	}
	block := rpc.Quantity(head)
	var calls []*rpc.Request
	for _, q := range reqs {
		word := fmt.Sprintf("%064x", q.TokenID)
		if q.Standard != 1155 {
			calls = append(calls, &rpc.Request{Method: "eth_call", Params: []any{callArgs{To: q.Contract.Hex(), Data: selTokenURI + word}, block}})
		}
		if q.Standard != 721 {
			calls = append(calls, &rpc.Request{Method: "eth_call", Params: []any{callArgs{To: q.Contract.Hex(), Data: selURI + word}, block}})
		}
	}
	if err := pool.Batch(ctx, calls, rpc.AtBlock(head)); err != nil {
		return 0, nil, fmt.Errorf("rpc chain %d: token URIs: %w", chain, err)
	}
	defer rpc.Release(calls)
	out = make([]URIResult, len(reqs))
	i := 0
	for k, q := range reqs {
		switch q.Standard {
		case 721, 1155:
			out[k] = uriResult(q.Standard, calls[i], maxLen)
			i++
		default:
			out[k] = better(uriResult(721, calls[i], maxLen), uriResult(1155, calls[i+1], maxLen))
			i += 2
		}
	}
	return head, out, nil
}

// better picks the answer of the standard the contract implements: a
// string first (tokenURI before uri), then the more telling failure.
func better(a, b URIResult) URIResult {
	rank := map[URIOutcome]int{URIAnswered: 0, URITooLong: 1, URIUnavailable: 2, URIFailed: 3, URINotString: 4, URIReverted: 5}
	if rank[b.Outcome] < rank[a.Outcome] {
		return b
	}
	return a
}

// uriResult classifies one call's answer.
func uriResult(standard uint16, call *rpc.Request, maxLen int) URIResult {
	res := URIResult{Standard: standard}
	if call.Err != nil {
		res.Detail = fmt.Sprintf("node %s: %s", call.Node, call.Err)
		res.Outcome = classifyCallError(call.Err)
		return res
	}
	b := hexResult(call.Result)
	if len(b) == 0 {
		// Nothing returned: no code at the address (or a fallback that
		// returns nothing).
		res.Outcome, res.Detail = URIReverted, "empty result"
		return res
	}
	s, ok, tooLong := abiStringLimit(b, maxLen)
	switch {
	case tooLong:
		res.Outcome = URITooLong
	case !ok:
		res.Outcome = URINotString
	default:
		res.Outcome, res.URI = URIAnswered, s
	}
	return res
}

// evmFailures are the texts of go-ethereum's (and coreth's) EVM errors
// other than a revert: an eth_call that failed this way executed the
// contract's code, which then broke (core/vm/errors.go).
var evmFailures = []string{
	"out of gas", "invalid opcode", "stack underflow", "stack limit reached", "invalid jump destination",
	"write protection", "return data out of bounds", "gas uint64 overflow", "max code size exceeded",
	"max initcode size exceeded", "precompiled contract failed", "invalid code", "execution aborted",
}

// classifyCallError tells the contract's answers (a revert; an EVM failure
// such as running out of gas, which rpc.IsReverted counts as the contract's
// answer too) from the node not answering (anything else: rpc.IsUnavailable,
// rpc.IsNodeFailure, or an error answer such as "method not found").
func classifyCallError(err error) URIOutcome {
	var re *rpc.Error
	if !rpc.IsReverted(err) || !errors.As(err, &re) {
		return URIUnavailable
	}
	msg := strings.ToLower(re.Message)
	if re.Code != 3 {
		for _, f := range evmFailures {
			if strings.Contains(msg, f) {
				return URIFailed
			}
		}
	}
	return URIReverted
}

// abiStringLimit decodes an ABI-encoded string return value, raw (the
// caller judges its text); tooLong when it has more than max bytes.
func abiStringLimit(b []byte, max int) (s string, ok, tooLong bool) {
	if len(b) < 64 {
		return "", false, false
	}
	off, ok := word(b, 0)
	if !ok || off > uint64(len(b)) || off+32 > uint64(len(b)) {
		return "", false, false
	}
	n, ok := word(b, int(off))
	if !ok || n > uint64(len(b))-off-32 {
		return "", false, false
	}
	if n > uint64(max) {
		return "", false, true
	}
	return string(b[off+32 : off+32+n]), true, false
}
