package rpc

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/chains"
)

func chainsNode(n *fakeNode) chains.Node { return chains.Node{URL: n.url(), Name: n.name} }

// answeredBy sends one call and returns the node that answered it.
func answeredBy(t *testing.T, p *Pool, opts ...Option) string {
	t.Helper()
	raw, err := p.CallWith(t.Context(), opts, "who")
	require.NoError(t, err)
	var s string
	require.NoError(t, json.Unmarshal(raw, &s))
	return s
}

// hammer sends n batches of size calls from workers goroutines.
func hammer(t *testing.T, p *Pool, n, workers, size int, opts ...Option) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				reqs := make([]*Request, size)
				for i := range reqs {
					reqs[i] = &Request{Method: "echo", Params: []any{i}}
				}
				if err := p.Batch(t.Context(), reqs, opts...); err != nil {
					t.Error(err)
					return
				}
				for i, r := range reqs {
					if r.Err != nil || string(r.Result) != string(must(json.Marshal(i))) {
						t.Errorf("call %d: %s %v", i, r.Result, r.Err)
					}
				}
				p.Release(reqs)
			}
		}()
	}
	wg.Wait()
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestPoolSpreadsInProportionToSpeed: a node four times as fast gets
// clearly more of the work, and both get some. The nodes' delays are far
// above what the fake nodes and the race detector add on a loaded machine
// (up to about 20 ms a request), which would otherwise blur their speeds.
func TestPoolSpreadsInProportionToSpeed(t *testing.T) {
	fast, slow := newFakeNode(t), newFakeNode(t)
	fast.delay.Store(int64(20 * time.Millisecond))
	slow.delay.Store(int64(80 * time.Millisecond))
	p := newTestPool(t, PoolConfig{}, fast, slow)
	hammer(t, p, 300, 8, 5)
	f, s := fast.posts.Load(), slow.posts.Load()
	t.Logf("fast %d, slow %d", f, s)
	require.Greater(t, s, int64(10), "the slow node still works")
	require.Greater(t, float64(f), 2*float64(s), "the fast node delivers more and gets more")
}

// limitOf is node i's adaptive concurrency limit.
func limitOf(p *Pool, i int) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nodes[i].limit
}

// TestPoolLowersTheLimitOfTheNodeThatSlowsDown: a node whose latency rises
// while the other's does not is queueing our requests: its limit falls. A
// delay that every node's requests take alike is this process's (short of
// CPU), not a node's: no limit falls, so the fast node keeps its share.
func TestPoolLowersTheLimitOfTheNodeThatSlowsDown(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		fastAdds, slowAdds   time.Duration
		wantFastLimitLowered bool
	}{
		{"the fast node alone slows down", 150 * time.Millisecond, 0, true},
		{"both slow down alike", 150 * time.Millisecond, 150 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fast, slow := newFakeNode(t), newFakeNode(t)
			fast.delay.Store(int64(5 * time.Millisecond))
			slow.delay.Store(int64(20 * time.Millisecond))
			p := newTestPool(t, PoolConfig{}, fast, slow)
			hammer(t, p, 100, 8, 5) // measures both nodes' best pace
			before := limitOf(p, 0)
			fast.delay.Add(int64(tc.fastAdds))
			slow.delay.Add(int64(tc.slowAdds))
			hammer(t, p, 60, 8, 5)
			after := limitOf(p, 0)
			t.Logf("the fast node's limit: %.2f, then %.2f", before, after)
			// Both cases see a transient while the slow node's fewer answers
			// catch up with the change: the shared case's limit loses up to
			// a quarter, the other case's two thirds or more.
			if tc.wantFastLimitLowered {
				require.Less(t, after, before*0.7)
			} else {
				require.Greater(t, after, before*0.6)
			}
		})
	}
}

// TestPoolFailsOverAndTakesBack: a dead node's calls go to the other node
// without an error reaching the caller; once it answers its head poll again
// it gets work again.
func TestPoolFailsOverAndTakesBack(t *testing.T) {
	a, b := newFakeNode(t), newFakeNode(t)
	a.setHead(10)
	b.setHead(10)
	p := newTestPool(t, PoolConfig{PollInterval: 20 * time.Millisecond}, a, b)
	runPool(t, p)
	waitHead(t, p, 10)
	a.setMode(modeDown)
	for range 20 {
		require.Equal(t, b.name, answeredBy(t, p))
	}
	require.Equal(t, 0.0, testutil.ToFloat64(p.metrics.up.WithLabelValues("43114", a.name)))
	a.setMode(modeOK)
	require.Eventually(t, func() bool { return p.Nodes()[0].Up }, 5*time.Second, 10*time.Millisecond)
	before := a.posts.Load()
	hammer(t, p, 50, 4, 1)
	require.Greater(t, a.posts.Load(), before, "the recovered node is used again")
}

// TestPoolFrozenNodeFailsOverWithinSeconds: a node that accepts requests
// and never answers (SIGSTOP) is found by its head poll within seconds;
// its requests in flight are cancelled and answered by the other node long
// before the request timeout.
func TestPoolFrozenNodeFailsOverWithinSeconds(t *testing.T) {
	a, b := newFakeNode(t), newFakeNode(t)
	a.setHead(10)
	b.setHead(10)
	p := newTestPool(t, PoolConfig{PollInterval: 100 * time.Millisecond, Timeout: 30 * time.Second}, a, b)
	runPool(t, p)
	// Both heads known: a node whose head is not is asked for nothing, and
	// the frozen node must be asked.
	require.Eventually(t, func() bool {
		ns := p.Nodes()
		return ns[0].HeadKnown && ns[1].HeadKnown
	}, 5*time.Second, 5*time.Millisecond)
	a.setMode(modeHang)
	start := time.Now()
	hammer(t, p, 20, 4, 1)
	took := time.Since(start)
	t.Logf("20 calls with a frozen node: %v", took)
	require.Less(t, took, 5*time.Second, "failover within seconds, not after the 30s request timeout")
	require.False(t, p.Nodes()[0].Up)
}

// TestPoolNeverAsksAboveANodesHead: a call pinned to a block goes only to
// nodes that have reached it.
func TestPoolNeverAsksAboveANodesHead(t *testing.T) {
	behind, ahead := newFakeNode(t), newFakeNode(t)
	behind.setHead(100)
	ahead.setHead(200)
	p := newTestPool(t, PoolConfig{PollInterval: 10 * time.Millisecond}, behind, ahead)
	runPool(t, p)
	waitHead(t, p, 200)
	for range 30 {
		require.Equal(t, ahead.name, answeredBy(t, p, AtBlock(150)))
	}
	// Not pinned: the node 100 blocks behind is past MaxLag, so the other
	// one answers "latest" reads too.
	for range 30 {
		require.Equal(t, ahead.name, answeredBy(t, p))
	}
	// Both have block 50: both are used.
	before := behind.posts.Load()
	behind.delay.Store(int64(time.Millisecond))
	ahead.delay.Store(int64(time.Millisecond))
	hammer(t, p, 60, 6, 1, AtBlock(50))
	require.Greater(t, behind.posts.Load(), before)
}

// TestUnavailableIsAskedElsewhereAndClassified: a pruned node's "missing
// trie node" sends the call to the archive node; when every node is
// pruned the error says so, and is not a node failure.
func TestUnavailableIsAskedElsewhereAndClassified(t *testing.T) {
	pruned, archive := newFakeNode(t), newFakeNode(t)
	for _, n := range []*fakeNode{pruned, archive} {
		n.setHead(1000)
	}
	pruned.prunedBelow.Store(900)
	p := newTestPool(t, PoolConfig{}, pruned, archive)
	for range 10 {
		_, err := p.CallWith(t.Context(), []Option{AtBlock(10)}, "eth_getBalance", "0x01", Quantity(10))
		require.NoError(t, err)
	}
	archive.prunedBelow.Store(900)
	_, err := p.CallWith(t.Context(), []Option{AtBlock(10)}, "eth_getBalance", "0x01", Quantity(10))
	require.Error(t, err)
	require.True(t, IsUnavailable(err), "%v", err)
	require.False(t, IsNodeFailure(err))
	require.False(t, IsReverted(err))
	// Above every node's head.
	_, err = p.CallWith(t.Context(), nil, "eth_getBalance", "0x01", Quantity(5000))
	require.True(t, IsUnavailable(err), "%v", err)
	// A revert is the contract's answer.
	_, err = p.Call(t.Context(), "eth_call", map[string]string{"to": "0x01", "data": "0x"}, "latest")
	require.True(t, IsReverted(err), "%v", err)
	require.False(t, IsUnavailable(err))
	require.False(t, IsNodeFailure(err))
	// Every node down: a node failure.
	pruned.setMode(modeDown)
	archive.setMode(modeDown)
	_, err = p.Call(t.Context(), "eth_blockNumber")
	require.True(t, IsNodeFailure(err), "%v", err)
	require.False(t, IsUnavailable(err))
}

// TestRateLimitedNodeBacksOff: 429s halve the node's concurrency limit and
// its calls go to the other node.
func TestRateLimitedNodeBacksOff(t *testing.T) {
	limited, ok := newFakeNode(t), newFakeNode(t)
	p := newTestPool(t, PoolConfig{}, limited, ok)
	limited.setMode(modeLimited)
	hammer(t, p, 40, 4, 2)
	require.Equal(t, 1.0, p.Nodes()[0].Limit)
	require.Greater(t, ok.posts.Load(), int64(30))
}

// TestLimitsFromTheChainsFile: maxBatch splits batches, maxConcurrency
// bounds requests in flight, requestsPerSecond paces calls.
func TestLimitsFromTheChainsFile(t *testing.T) {
	n := newFakeNode(t)
	n.delay.Store(int64(5 * time.Millisecond))
	p, err := NewPool(PoolConfig{Chain: "1", Nodes: []chains.Node{{URL: n.url(), MaxBatch: 3, MaxConcurrency: 2}}}, nil)
	require.NoError(t, err)
	hammer(t, p, 20, 6, 10)
	n.batchSizes.Range(func(k, _ any) bool {
		require.LessOrEqual(t, k.(int), 3)
		return true
	})
	require.LessOrEqual(t, n.maxInflight.Load(), int64(2))

	n2 := newFakeNode(t)
	p2, err := NewPool(PoolConfig{Chain: "1", Nodes: []chains.Node{{URL: n2.url(), RequestsPerSecond: 50}}}, nil)
	require.NoError(t, err)
	start := time.Now()
	hammer(t, p2, 50, 4, 1)
	// 50 calls at 50/s with a burst of 50: at least the calls past the
	// burst wait; run 100 to see the pace.
	hammer(t, p2, 50, 4, 1)
	require.Greater(t, time.Since(start), 800*time.Millisecond)
}

// TestHedgeTakesTheFasterNode: with Hedge, a slow node's call is sent to
// the other node too and the first answer wins.
func TestHedgeTakesTheFasterNode(t *testing.T) {
	slow, fast := newFakeNode(t), newFakeNode(t)
	p := newTestPool(t, PoolConfig{Timeout: 10 * time.Second}, slow, fast)
	// Unmeasured nodes tie: the first configured, the slow one, is asked
	// first.
	slow.delay.Store(int64(3 * time.Second))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	for range 5 {
		raw, err := p.CallWith(ctx, []Option{Hedge()}, "who")
		require.NoError(t, err)
		require.Equal(t, `"`+fast.name+`"`, string(raw))
	}
	require.Greater(t, testutil.ToFloat64(p.metrics.hedges.WithLabelValues("43114", "won")), 0.0)
}

// TestAvoid: a call avoiding a node goes to another one, and still to the
// avoided node when no other can take it.
func TestAvoid(t *testing.T) {
	a, b := newFakeNode(t), newFakeNode(t)
	p := newTestPool(t, PoolConfig{}, a, b)
	for range 10 {
		require.Equal(t, b.name, answeredBy(t, p, Avoid(a.name)))
	}
	b.setMode(modeDown)
	require.Equal(t, a.name, answeredBy(t, p, Avoid(a.name)))
}
