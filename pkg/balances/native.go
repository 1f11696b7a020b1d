package balances

import (
	"context"
	"errors"
	"math/big"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/obs"
)

// NativeNode reads native balances (RPCNode implements it).
type NativeNode interface {
	// NativeBalance is eth_getBalance of addr at block; errors wrap
	// ErrNoState or ErrNodeDown.
	NativeBalance(ctx context.Context, chainID uint64, addr evm.Address, block uint64) (*big.Int, error)
}

// Native serves native balances. No log shows every move of the native
// token (fees, internal calls, and on the C-Chain atomic transactions move
// it too), so they come from the node's eth_getBalance at the block, never
// from moraine's tables. The answers for settled blocks (which no reorg can
// change) are remembered, so a wallet asking again, or the list routes
// (whose answers carry the native balance), cost the node nothing.
type Native struct {
	node    NativeNode
	timeout time.Duration
	size    int
	lookups *prometheus.CounterVec

	mu       sync.Mutex
	cur, old map[nativeKey]*big.Int
}

type nativeKey struct {
	chainID uint64
	addr    evm.Address
	block   uint64
}

// NewNative serves native balances from node, each read bounded by
// timeout, remembering up to size settled answers. Its metric goes to reg
// under subsystem:
//
//	moraine_<subsystem>_native_balance_lookups_total{result}   hit, ok, no_state, node_down
func NewNative(node NativeNode, timeout time.Duration, size int, reg prometheus.Registerer, subsystem string) *Native {
	f := obs.NewMetrics(reg, subsystem)
	n := &Native{node: node, timeout: timeout, size: max(size, 2), cur: map[nativeKey]*big.Int{},
		lookups: f.CounterVec("native_balance_lookups_total", "Native balance reads, by result: hit (remembered), ok (read from the node), no_state (the node has no state for the block), node_down.", "result")}
	for _, r := range []string{"hit", "ok", "no_state", "node_down"} {
		n.lookups.WithLabelValues(r)
	}
	return n
}

// At returns addr's native balance at block; settled says that no reorg
// can change the block any more, so the answer may be remembered. Errors
// wrap ErrNoState (the node cannot answer for that block: pruned) or
// ErrNodeDown.
func (n *Native) At(ctx context.Context, chainID uint64, addr evm.Address, block uint64, settled bool) (*big.Int, error) {
	k := nativeKey{chainID, addr, block}
	if settled {
		if v, ok := n.get(k); ok {
			n.lookups.WithLabelValues("hit").Inc()
			return new(big.Int).Set(v), nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	v, err := n.node.NativeBalance(ctx, chainID, addr, block)
	switch {
	case errors.Is(err, ErrNoState):
		n.lookups.WithLabelValues("no_state").Inc()
		return nil, err
	case err != nil:
		n.lookups.WithLabelValues("node_down").Inc()
		if !errors.Is(err, ErrNodeDown) {
			err = errors.Join(ErrNodeDown, err)
		}
		return nil, err
	}
	n.lookups.WithLabelValues("ok").Inc()
	if settled {
		n.put(k, v)
	}
	return new(big.Int).Set(v), nil
}

// get and put keep two generations of at most size/2 entries each: a
// full generation becomes the old one, and an old entry read again moves
// back. About least-recently-used, without a list to maintain.
func (n *Native) get(k nativeKey) (*big.Int, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if v, ok := n.cur[k]; ok {
		return v, true
	}
	if v, ok := n.old[k]; ok {
		n.putLocked(k, v)
		return v, true
	}
	return nil, false
}

func (n *Native) put(k nativeKey, v *big.Int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.putLocked(k, v)
}

func (n *Native) putLocked(k nativeKey, v *big.Int) {
	if len(n.cur) >= n.size/2 {
		n.old, n.cur = n.cur, make(map[nativeKey]*big.Int, n.size/2)
	}
	n.cur[k] = v
}
