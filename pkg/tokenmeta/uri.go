package tokenmeta

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/moraine-data/moraine/pkg/evm"
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

// TokenURIs reads the metadata URI of each request from the chain's node:
// it asks the node's head block number, then calls every request at that
// block, in batches of Config.BatchTokens, Config.Parallel at a time, each
// bounded by Config.CallTimeout. head is that block (the lowest of the
// batches' when they differ). maxLen bounds the returned strings (longer
// ones are URITooLong). err is non-nil only when no batch could be asked
// (no RPC URL, or every URL failed for every batch): the results are then
// nil; a batch that failed alone gives its requests URIUnavailable. Answers
// are not cached: a token URI can change (a reveal) and the metadata worker
// asks each NFT once.
func (r *Resolver) TokenURIs(ctx context.Context, chain uint64, reqs []URIRequest, maxLen int) (head uint64, out []URIResult, err error) {
	urls := r.rpc[chain]
	if len(urls) == 0 {
		return 0, nil, fmt.Errorf("tokenmeta: no RPC URL for chain %d", chain)
	}
	out = make([]URIResult, len(reqs))
	var (
		mu       sync.Mutex
		failures int
		firstErr error
	)
	batches := (len(reqs) + r.cfg.BatchTokens - 1) / r.cfg.BatchTokens
	g := new(errgroup.Group)
	g.SetLimit(r.cfg.Parallel)
	for start := 0; start < len(reqs); start += r.cfg.BatchTokens {
		chunk := reqs[start:min(start+r.cfg.BatchTokens, len(reqs))]
		g.Go(func() error {
			h, res, err := r.uriBatch(ctx, urls, chunk, maxLen)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures++
				if firstErr == nil {
					firstErr = err
				}
				for i := range chunk {
					out[start+i] = URIResult{Outcome: URIUnavailable, Standard: chunk[i].Standard, Detail: err.Error()}
				}
				return nil
			}
			copy(out[start:], res)
			if head == 0 || h < head {
				head = h
			}
			return nil
		})
	}
	_ = g.Wait()
	if failures == batches {
		return 0, nil, firstErr
	}
	return head, out, nil
}

// uriBatch reads the head, then one batch of URI calls at it.
func (r *Resolver) uriBatch(ctx context.Context, urls []string, reqs []URIRequest, maxLen int) (uint64, []URIResult, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	res, err := r.batch(ctx, urls, []rpcCall{{Method: "eth_blockNumber", Params: []any{}, Required: true}})
	if err != nil {
		return 0, nil, err
	}
	var headHex string
	if err := json.Unmarshal(res[0], &headHex); err != nil {
		return 0, nil, fmt.Errorf("rpc: eth_blockNumber: %w", err)
	}
	head, err := strconv.ParseUint(strings.TrimPrefix(headHex, "0x"), 16, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("rpc: eth_blockNumber %q: %w", headHex, err)
	}
	block := "0x" + strconv.FormatUint(head, 16)
	var calls []rpcCall
	for _, q := range reqs {
		word := fmt.Sprintf("%064x", q.TokenID)
		if q.Standard != 1155 {
			calls = append(calls, rpcCall{Method: "eth_call", Params: []any{callArgs{To: q.Contract.Hex(), Data: selTokenURI + word}, block}})
		}
		if q.Standard != 721 {
			calls = append(calls, rpcCall{Method: "eth_call", Params: []any{callArgs{To: q.Contract.Hex(), Data: selURI + word}, block}})
		}
	}
	results, callErrs, err := r.batchWithErrors(ctx, urls, calls)
	if err != nil {
		return 0, nil, err
	}
	out := make([]URIResult, len(reqs))
	i := 0
	for k, q := range reqs {
		switch q.Standard {
		case 721, 1155:
			out[k] = uriResult(q.Standard, results[i], callErrs[i], maxLen)
			i++
		default:
			a := uriResult(721, results[i], callErrs[i], maxLen)
			b := uriResult(1155, results[i+1], callErrs[i+1], maxLen)
			out[k] = better(a, b)
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
func uriResult(standard uint16, raw json.RawMessage, callErr *rpcError, maxLen int) URIResult {
	res := URIResult{Standard: standard}
	if callErr != nil {
		res.Detail = fmt.Sprintf("error %d: %s", callErr.Code, callErr.Message)
		res.Outcome = classifyCallError(callErr)
		return res
	}
	b := hexResult(raw)
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
	"max initcode size exceeded", "precompiled contract failed", "invalid code",
}

// classifyCallError tells a revert (code 3, or go-ethereum's "execution
// reverted" without data) and an EVM failure from a failure of the node.
func classifyCallError(e *rpcError) URIOutcome {
	msg := strings.ToLower(e.Message)
	if e.Code == 3 || strings.HasPrefix(msg, "execution reverted") || strings.HasPrefix(msg, "reverted") {
		return URIReverted
	}
	for _, f := range evmFailures {
		if strings.Contains(msg, f) {
			return URIFailed
		}
	}
	return URIUnavailable
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
