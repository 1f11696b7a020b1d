package balances

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/rpc"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// rpcServer answers JSON-RPC (batches or not) with answer(method, params).
func rpcServer(t *testing.T, answer func(method string, params []json.RawMessage) (result any, errCode int, errMsg string)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		type req struct {
			ID     json.RawMessage   `json:"id"`
			Method string            `json:"method"`
			Params []json.RawMessage `json:"params"`
		}
		one := func(q req) map[string]any {
			res, code, msg := answer(q.Method, q.Params)
			out := map[string]any{"jsonrpc": "2.0", "id": q.ID}
			if code != 0 {
				out["error"] = map[string]any{"code": code, "message": msg}
			} else {
				out["result"] = res
			}
			return out
		}
		var batch []req
		if json.Unmarshal(body, &batch) == nil {
			var out []map[string]any
			for _, q := range batch {
				out = append(out, one(q))
			}
			_ = json.NewEncoder(w).Encode(out)
			return
		}
		var q req
		_ = json.Unmarshal(body, &q)
		_ = json.NewEncoder(w).Encode(one(q))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func testPool(t *testing.T, url string) map[uint64]*rpc.Pool {
	p, err := rpc.NewPool(rpc.PoolConfig{Chain: "7", Nodes: []chains.Node{{URL: url}}, Timeout: 2 * time.Second, Attempts: 1},
		rpc.NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	return map[uint64]*rpc.Pool{7: p}
}

// The node's answers become balances: balanceOf and balanceOf(id) words,
// ownerOf compared with the holder (a reverting ownerOf: no such token),
// an empty answer from an address without code (0), a reverting
// balanceOf (unknown); a node without the block's state is ErrNoState.
func TestRPCNodeBalances(t *testing.T) {
	holder := alice
	srv := rpcServer(t, func(method string, params []json.RawMessage) (any, int, string) {
		if method == "eth_getBalance" {
			var block string
			_ = json.Unmarshal(params[1], &block)
			if block == "0x1" {
				return nil, -32000, "missing trie node 0123 (path )"
			}
			return "0x1bc16d674ec80000", 0, "" // 2e18
		}
		var call struct{ To, Data string }
		_ = json.Unmarshal(params[0], &call)
		var block string
		_ = json.Unmarshal(params[1], &block)
		if block == "0x1" {
			return nil, -32000, "missing trie node 0123 (path )"
		}
		sel := call.Data[2:10]
		switch {
		case sel == selBalanceOf && strings.EqualFold(call.To, usd.Hex()):
			return "0x" + fmt.Sprintf("%064x", 1000), 0, ""
		case sel == selBalanceOf && strings.EqualFold(call.To, multi.Hex()):
			return nil, 3, "execution reverted"
		case sel == selBalanceOf: // no code at the address
			return "0x", 0, ""
		case sel == selBalanceOfBatch:
			// accounts and ids: each id's balance is 3 times the id, for
			// the holder only.
			data, _ := hex.DecodeString(call.Data[10:])
			n := int(new(big.Int).SetBytes(data[64:96]).Int64())
			out := fmt.Sprintf("%064x%064x", 32, n)
			for i := range n {
				acct := data[96+32*i+12 : 96+32*i+32]
				id := new(big.Int).SetBytes(data[96+32*n+32+32*i : 96+32*n+64+32*i])
				v := new(big.Int)
				if string(acct) == string(holder[:]) {
					v.Mul(id, big.NewInt(3))
				}
				out += fmt.Sprintf("%064x", v)
			}
			return "0x" + out, 0, ""
		case sel == selOwnerOf && strings.HasSuffix(call.Data, fmt.Sprintf("%064x", 1)):
			return "0x000000000000000000000000" + strings.TrimPrefix(holder.Hex(), "0x"), 0, ""
		case sel == selOwnerOf && strings.HasSuffix(call.Data, fmt.Sprintf("%064x", 2)):
			return "0x000000000000000000000000" + strings.TrimPrefix(bob.Hex(), "0x"), 0, ""
		case sel == selOwnerOf:
			return nil, 3, "execution reverted: ERC721: invalid token ID"
		}
		return nil, -32601, "unexpected " + call.Data
	})
	node := NewRPCNode(testPool(t, srv.URL))
	pairs := []schema.BalancePair{
		{Kind: 1, Token: usd}, {Kind: 1, Token: multi}, {Kind: 1, Token: carol},
		{Kind: 3, Token: items, TokenID: [32]byte(wordN(4))}, {Kind: 3, Token: items, TokenID: [32]byte(wordN(7))},
		{Kind: 2, Token: art, TokenID: [32]byte(wordN(1))}, {Kind: 2, Token: art, TokenID: [32]byte(wordN(2))},
		{Kind: 2, Token: art, TokenID: [32]byte(wordN(3))},
	}
	got, err := node.BalancesAt(t.Context(), 7, holder, 100, pairs)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, v := range got {
		if v == nil {
			s = append(s, "?")
		} else {
			s = append(s, v.String())
		}
	}
	if strings.Join(s, " ") != "1000 ? 0 12 21 1 0 0" {
		t.Fatalf("balances %v", s)
	}
	if _, err := node.BalancesAt(t.Context(), 7, holder, 1, pairs[:1]); !errors.Is(err, ErrNoState) {
		t.Fatalf("at a pruned block: %v", err)
	}
	if _, err := node.BalancesAt(t.Context(), 8, holder, 1, pairs[:1]); !errors.Is(err, ErrNodeDown) {
		t.Fatalf("a chain without nodes: %v", err)
	}
	if v, err := node.NativeBalance(t.Context(), 7, holder, 100); err != nil || v.String() != "2000000000000000000" {
		t.Fatalf("native: %v %v", v, err)
	}
	if _, err := node.NativeBalance(t.Context(), 7, holder, 1); !errors.Is(err, ErrNoState) {
		t.Fatalf("native at a pruned block: %v", err)
	}
}

// Native balances of settled blocks are remembered; others, and failures,
// are not; the node's failures keep their class.
func TestNativeCache(t *testing.T) {
	var calls atomic.Int32
	down := false
	node := &fakeNode{native: func(addr evm.Address, block uint64) (*big.Int, error) {
		calls.Add(1)
		switch {
		case down:
			return nil, fmt.Errorf("%w: connection refused", ErrNodeDown)
		case block == 1:
			return nil, fmt.Errorf("%w: missing trie node", ErrNoState)
		}
		return big.NewInt(int64(block)), nil
	}}
	reg := prometheus.NewRegistry()
	n := NewNative(node, time.Second, 4, reg, "test")
	ctx := context.Background()
	for range 3 {
		if v, err := n.At(ctx, 1, alice, 100, true); err != nil || v.Int64() != 100 {
			t.Fatal(v, err)
		}
		if v, err := n.At(ctx, 1, alice, 200, false); err != nil || v.Int64() != 200 {
			t.Fatal(v, err)
		}
	}
	if calls.Load() != 4 || testutil.ToFloat64(n.lookups.WithLabelValues("hit")) != 2 {
		t.Fatalf("%d node calls, want 4 (one settled, three unsettled)", calls.Load())
	}
	if _, err := n.At(ctx, 1, alice, 1, true); !errors.Is(err, ErrNoState) {
		t.Fatal(err)
	}
	down = true
	if _, err := n.At(ctx, 1, bob, 100, true); !errors.Is(err, ErrNodeDown) {
		t.Fatal(err)
	}
	// A bounded memory: old entries go, and come back from the node.
	down = false
	for b := uint64(300); b < 310; b++ {
		if _, err := n.At(ctx, 1, alice, b, true); err != nil {
			t.Fatal(err)
		}
	}
	before := calls.Load()
	if _, err := n.At(ctx, 1, alice, 100, true); err != nil || calls.Load() != before+1 {
		t.Fatalf("an evicted entry was not read again: %v", err)
	}
}
