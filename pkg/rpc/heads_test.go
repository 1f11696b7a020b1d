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
