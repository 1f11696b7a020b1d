package balances

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/rpc"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// Errors of node reads, for callers to tell apart.
var (
	// ErrNoState means the chain's nodes work but none can answer for that
	// block (a pruned node without its state, rpc.IsUnavailable).
	ErrNoState = errors.New("balances: the chain's nodes have no state for that block")
	// ErrNodeDown means no node answered (down, timing out, rate limiting), or
	// the chain has no node configured.
	ErrNodeDown = errors.New("balances: the chain's node did not answer")
)

// Function selectors.
const (
	selBalanceOf      = "70a08231" // balanceOf(address)
	selBalanceOfBatch = "4e1273f4" // balanceOfBatch(address[],uint256[]), ERC-1155
	selOwnerOf        = "6352211e" // ownerOf(uint256), ERC-721
	maxCallsPerBatch  = 100
)

// RPCNode reads balances from the chains' nodes through their pools
// (pkg/rpc: failover, limits). It implements Node.
type RPCNode struct {
	pools map[uint64]*rpc.Pool
}

// NewRPCNode reads through pools, one per chain id.
func NewRPCNode(pools map[uint64]*rpc.Pool) *RPCNode { return &RPCNode{pools: pools} }

func (n *RPCNode) pool(chainID uint64) (*rpc.Pool, error) {
	p, ok := n.pools[chainID]
	if !ok {
		return nil, fmt.Errorf("%w: chain %d has no rpcUrls", ErrNodeDown, chainID)
	}
	return p, nil
}

// nodeError classes an error of a call that failed as a whole.
func nodeError(err error) error {
	switch {
	case rpc.IsUnavailable(err):
		return fmt.Errorf("%w: %w", ErrNoState, err)
	case rpc.IsNodeFailure(err), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", ErrNodeDown, err)
	}
	return err
}

// NativeBalance is eth_getBalance of addr at block.
func (n *RPCNode) NativeBalance(ctx context.Context, chainID uint64, addr evm.Address, block uint64) (*big.Int, error) {
	p, err := n.pool(chainID)
	if err != nil {
		return nil, err
	}
	raw, err := p.CallWith(ctx, []rpc.Option{rpc.AtBlock(block), rpc.Hedge()}, "eth_getBalance", addr.Hex(), rpc.Quantity(block))
	if err != nil {
		return nil, nodeError(err)
	}
	v, ok := quantity(raw)
	if !ok {
		return nil, fmt.Errorf("%w: eth_getBalance answered %.64s", ErrNodeDown, raw)
	}
	return v, nil
}

// BalancesAt implements Node: an eth_call per ERC-20 or ERC-721 pair, and
// one balanceOfBatch per ERC-1155 token (whose standard getter is that, and
// balanceOf(account, id); some contracts get balanceOf's argument order
// wrong, none balanceOfBatch's), in JSON-RPC batches.
func (n *RPCNode) BalancesAt(ctx context.Context, chainID uint64, holder evm.Address, block uint64, pairs []schema.BalancePair) ([]*big.Int, error) {
	p, err := n.pool(chainID)
	if err != nil {
		return nil, err
	}
	// One call answers the pairs at idx.
	type call struct {
		to   evm.Address
		data string
		idx  []int
	}
	var calls []call
	batches := map[evm.Address]int{} // ERC-1155 token -> its open call
	for i, pair := range pairs {
		if evm.Kind(pair.Kind) != evm.ERC1155 {
			calls = append(calls, call{to: pair.Token, data: balanceCall(holder, pair), idx: []int{i}})
			continue
		}
		c, ok := batches[pair.Token]
		if !ok || len(calls[c].idx) == maxIDsPerCall {
			c = len(calls)
			batches[pair.Token] = c
			calls = append(calls, call{to: pair.Token})
		}
		calls[c].idx = append(calls[c].idx, i)
	}
	for i := range calls {
		if calls[i].data == "" {
			ids := make([][32]byte, len(calls[i].idx))
			for j, k := range calls[i].idx {
				ids[j] = pairs[k].TokenID
			}
			calls[i].data = balanceOfBatchCall(holder, ids)
		}
	}
	out := make([]*big.Int, len(pairs))
	for lo := 0; lo < len(calls); lo += maxCallsPerBatch {
		part := calls[lo:min(lo+maxCallsPerBatch, len(calls))]
		reqs := make([]*rpc.Request, len(part))
		for i, c := range part {
			reqs[i] = &rpc.Request{Method: "eth_call", Params: []any{map[string]string{"to": c.to.Hex(), "data": c.data}, rpc.Quantity(block)}}
		}
		if err := p.Batch(ctx, reqs, rpc.AtBlock(block)); err != nil {
			rpc.Release(reqs)
			return nil, nodeError(err)
		}
		for i, r := range reqs {
			c := part[i]
			if len(c.idx) > 1 || evm.Kind(pairs[c.idx[0]].Kind) == evm.ERC1155 {
				vs, err := batchAnswer(len(c.idx), r.Result, r.Err)
				if err != nil {
					rpc.Release(reqs)
					return nil, err
				}
				for j, k := range c.idx {
					out[k] = vs[j]
				}
				continue
			}
			v, err := balanceAnswer(holder, pairs[c.idx[0]], r.Result, r.Err)
			if err != nil {
				rpc.Release(reqs)
				return nil, err
			}
			out[c.idx[0]] = v
		}
		rpc.Release(reqs)
	}
	return out, nil
}

// maxIDsPerCall bounds the ids of one balanceOfBatch call.
const maxIDsPerCall = 100

// balanceOfBatchCall is balanceOfBatch(address[], uint256[]) of holder for
// every id.
func balanceOfBatchCall(holder evm.Address, ids [][32]byte) string {
	n := len(ids)
	var b strings.Builder
	b.WriteString("0x" + selBalanceOfBatch)
	word := func(v uint64) { fmt.Fprintf(&b, "%064x", v) }
	word(64)                     // offset of accounts
	word(uint64(64 + 32 + 32*n)) // offset of ids
	word(uint64(n))
	padded := strings.Repeat("00", 12) + hex.EncodeToString(holder[:])
	for range n {
		b.WriteString(padded)
	}
	word(uint64(n))
	for _, id := range ids {
		b.WriteString(hex.EncodeToString(id[:]))
	}
	return b.String()
}

// batchAnswer reads a balanceOfBatch answer of n balances: all nil when
// the call reverted or answered something else.
func batchAnswer(n int, result json.RawMessage, err error) ([]*big.Int, error) {
	out := make([]*big.Int, n)
	if err != nil {
		if rpc.IsUnavailable(err) || rpc.IsNodeFailure(err) {
			return nil, nodeError(err)
		}
		return out, nil
	}
	data, ok := hexData(result)
	if !ok {
		return out, nil
	}
	if len(data) == 0 {
		for i := range out {
			out[i] = new(big.Int) // no code at the address
		}
		return out, nil
	}
	if len(data) != 64+32*n {
		return out, nil
	}
	for i := range out {
		out[i] = new(big.Int).SetBytes(data[64+32*i : 96+32*i])
	}
	return out, nil
}

// balanceCall is the call data that asks for holder's balance of pair.
func balanceCall(holder evm.Address, pair schema.BalancePair) string {
	padded := strings.Repeat("00", 12) + hex.EncodeToString(holder[:])
	switch evm.Kind(pair.Kind) {
	case evm.ERC721:
		return "0x" + selOwnerOf + hex.EncodeToString(pair.TokenID[:])
	}
	return "0x" + selBalanceOf + padded
}

// balanceAnswer reads one call's answer: nil for a pair the node cannot
// say, an error when the node failed the call as a whole.
func balanceAnswer(holder evm.Address, pair schema.BalancePair, result json.RawMessage, err error) (*big.Int, error) {
	if err != nil {
		switch {
		case rpc.IsReverted(err):
			if evm.Kind(pair.Kind) == evm.ERC721 {
				return new(big.Int), nil // ownerOf reverts for a token that does not exist
			}
			return nil, nil
		case rpc.IsUnavailable(err), rpc.IsNodeFailure(err):
			return nil, nodeError(err)
		}
		return nil, nil // another error answer to this call: the contract's business
	}
	data, ok := hexData(result)
	if !ok {
		return nil, nil
	}
	if len(data) == 0 {
		// No code at the token's address (not deployed yet at that block):
		// nobody held any.
		return new(big.Int), nil
	}
	if len(data) < 32 {
		return nil, nil
	}
	if evm.Kind(pair.Kind) == evm.ERC721 {
		var owner evm.Address
		copy(owner[:], data[12:32])
		if owner == holder {
			return big.NewInt(1), nil
		}
		return new(big.Int), nil
	}
	return new(big.Int).SetBytes(data[:32]), nil
}

// hexData decodes a 0x-hex JSON string result.
func hexData(raw json.RawMessage) ([]byte, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil || !strings.HasPrefix(s, "0x") {
		return nil, false
	}
	b, err := hex.DecodeString(s[2:])
	return b, err == nil
}

// quantity decodes a JSON-RPC quantity ("0x1b").
func quantity(raw json.RawMessage) (*big.Int, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil || !strings.HasPrefix(s, "0x") || len(s) < 3 {
		return nil, false
	}
	return new(big.Int).SetString(s[2:], 16)
}
