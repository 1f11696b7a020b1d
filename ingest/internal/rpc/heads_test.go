package rpc

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/ingest/internal/chaintest"
)

func runHeads(t *testing.T, h *Heads) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = h.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func waitHead(t *testing.T, h *Heads, want uint64) {
	t.Helper()
	require.Eventually(t, func() bool { n, ok := h.Head(); return ok && n == want }, 5*time.Second, 5*time.Millisecond)
}

func TestHeadsFromSubscription(t *testing.T) {
	node := chaintest.NewNode(t, nil)
	node.SetHead(10)
	c := New(Config{URL: node.URL(), Timeout: time.Second}, nil)
	// Polling once an hour: only the subscription can deliver heads fast.
	h := NewHeads(c, HeadsConfig{WSURL: node.WSURL(), PollInterval: time.Hour, Silence: time.Hour}, slog.New(slog.DiscardHandler))
	runHeads(t, h)
	waitHead(t, h, 10) // the first poll
	require.Eventually(t, h.Subscribed, 5*time.Second, 5*time.Millisecond)
	changed := h.Changed()
	node.SetHead(11)
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no change notification")
	}
	waitHead(t, h, 11)
	node.SetHead(12)
	waitHead(t, h, 12)
	require.Equal(t, int64(1), node.MethodCalls("eth_blockNumber"), "heads came from the subscription")
}

func TestHeadsPollWhenSubscriptionFails(t *testing.T) {
	node := chaintest.NewNode(t, nil)
	node.DisableWS()
	node.SetHead(5)
	c := New(Config{URL: node.URL(), Timeout: time.Second}, nil)
	h := NewHeads(c, HeadsConfig{WSURL: node.WSURL(), PollInterval: 10 * time.Millisecond}, slog.New(slog.DiscardHandler))
	runHeads(t, h)
	waitHead(t, h, 5)
	node.SetHead(6)
	waitHead(t, h, 6)
	require.False(t, h.Subscribed())
}

func TestHeadsPollWhenSubscriptionIsSilent(t *testing.T) {
	node := chaintest.NewNode(t, nil)
	node.SetHead(1)
	c := New(Config{URL: node.URL(), Timeout: time.Second}, nil)
	h := NewHeads(c, HeadsConfig{WSURL: node.WSURL(), PollInterval: 10 * time.Millisecond, Silence: 50 * time.Millisecond}, slog.New(slog.DiscardHandler))
	runHeads(t, h)
	require.Eventually(t, h.Subscribed, 5*time.Second, 5*time.Millisecond)
	// Move the head without notifying subscribers (Put does not notify):
	// after Silence, polling finds it.
	node.SetHeadQuietly(7)
	waitHead(t, h, 7)
}

func TestHeadNeverGoesBackwards(t *testing.T) {
	h := NewHeads(New(Config{URL: "http://127.0.0.1:1"}, nil), HeadsConfig{}, slog.New(slog.DiscardHandler))
	h.set(10)
	h.set(8)
	n, ok := h.Head()
	require.True(t, ok)
	require.Equal(t, uint64(10), n)
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
