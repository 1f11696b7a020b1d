package rpc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func waitHead(t *testing.T, p *Pool, want uint64) {
	t.Helper()
	require.Eventually(t, func() bool { n, ok := p.Head(); return ok && n == want }, 5*time.Second, 5*time.Millisecond)
}

// TestHeadsFromSubscription: a newHeads announcement makes the pool poll
// its nodes at once, so heads arrive without waiting for the poll period.
func TestHeadsFromSubscription(t *testing.T) {
	a := newFakeNode(t)
	a.setHead(10)
	// Polling once an hour: only the subscription can deliver heads fast.
	p := newTestPool(t, PoolConfig{WSURL: a.wsURL(), PollInterval: time.Hour}, a)
	runPool(t, p)
	waitHead(t, p, 10) // the first poll
	require.Eventually(t, p.Subscribed, 5*time.Second, 5*time.Millisecond)
	changed := p.Changed()
	a.setHead(11)
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no change notification")
	}
	waitHead(t, p, 11)
	a.setHead(12)
	waitHead(t, p, 12)
}

func TestHeadsPollWithoutSubscription(t *testing.T) {
	a := newFakeNode(t)
	a.setHead(5)
	p := newTestPool(t, PoolConfig{WSURL: "ws://127.0.0.1:1", PollInterval: 10 * time.Millisecond}, a)
	runPool(t, p)
	waitHead(t, p, 5)
	a.setHead(6)
	waitHead(t, p, 6)
	require.False(t, p.Subscribed())
}

// TestHeadIsTheBestWorkingNode: Head is the highest head among working
// nodes; a dead node's old head does not count while another works.
func TestHeadIsTheBestWorkingNode(t *testing.T) {
	a, b := newFakeNode(t), newFakeNode(t)
	a.setHead(100)
	b.setHead(120)
	p := newTestPool(t, PoolConfig{PollInterval: 10 * time.Millisecond}, a, b)
	runPool(t, p)
	waitHead(t, p, 120)
	b.setMode(modeDown)
	waitHead(t, p, 100)
	b.setMode(modeOK)
	waitHead(t, p, 120)
}

func TestParseWSMessage(t *testing.T) {
	n, isHead, err := parseWSMessage([]byte(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"0x9","result":{"parentHash":"0x1","number":"0x1b4","hash":"0x2"}}}`))
	require.NoError(t, err)
	require.True(t, isHead)
	require.Equal(t, uint64(436), n)
	_, isHead, err = parseWSMessage([]byte(`{"jsonrpc":"2.0","id":1,"result":"0x9"}`))
	require.NoError(t, err)
	require.False(t, isHead)
	_, _, err = parseWSMessage([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"notifications not supported"}}`))
	require.Error(t, err)
}

// TestSeenAt: a block's arrival is the first head report that reached it
// after one below it; blocks the pool never saw arrive (below its first
// report, above its head, or older than the reports it keeps) have none.
func TestSeenAt(t *testing.T) {
	p := &Pool{}
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	p.sawHead(100, at(0)) // the first report: blocks up to 100 were there before
	p.sawHead(101, at(1))
	p.sawHead(104, at(2)) // 102-104 arrive together
	p.sawHead(104, at(3)) // the same head again changes nothing
	p.sawHead(103, at(4)) // a lower head (a node lost) ...
	p.sawHead(105, at(5)) // ... then higher again
	for _, c := range []struct {
		n    uint64
		want time.Time
		ok   bool
	}{
		{99, time.Time{}, false}, {100, time.Time{}, false},
		{101, at(1), true}, {102, at(2), true}, {104, at(5), true}, {105, at(5), true},
		{106, time.Time{}, false},
	} {
		got, ok := p.SeenAt(c.n)
		require.Equal(t, c.ok, ok, "block %d", c.n)
		require.Equal(t, c.want, got, "block %d", c.n)
	}
	// Only the last seenHeads reports are kept.
	for i := range uint64(seenHeads) {
		p.sawHead(200+i, at(10))
	}
	_, ok := p.SeenAt(101)
	require.False(t, ok)
	got, ok := p.SeenAt(201)
	require.True(t, ok)
	require.Equal(t, at(10), got)
}

// TestSeenAtFromTheSubscription: a head announced while the pool watches
// has its arrival, between the announcement and the pool's Head reaching
// it; the head the pool found at its start has none.
func TestSeenAtFromTheSubscription(t *testing.T) {
	a := newFakeNode(t)
	a.setHead(10)
	p := newTestPool(t, PoolConfig{WSURL: a.wsURL(), PollInterval: time.Hour}, a)
	runPool(t, p)
	waitHead(t, p, 10)
	require.Eventually(t, p.Subscribed, 5*time.Second, 5*time.Millisecond)
	_, ok := p.SeenAt(10)
	require.False(t, ok, "block 10 was there before the pool watched")
	before := time.Now()
	a.setHead(11)
	waitHead(t, p, 11)
	seen, ok := p.SeenAt(11)
	require.True(t, ok)
	require.False(t, seen.Before(before))
	require.False(t, seen.After(time.Now()))
}
