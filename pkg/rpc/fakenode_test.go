package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Modes of a fakeNode.
const (
	modeOK      = iota
	modeDown    // HTTP 503 to everything
	modeHang    // accepts and never answers (a frozen process)
	modeLimited // HTTP 429 to everything
)

// fakeNode is a scripted node: eth_blockNumber answers its head; "echo"
// answers its first parameter; eth_getBalance at a block above prunedBelow
// ... answers "missing trie node" for blocks below prunedBelow and "header
// not found" above its head; any other method answers the node's name.
type fakeNode struct {
	srv         *httptest.Server
	name        string
	head        atomic.Uint64
	mode        atomic.Int32
	prunedBelow atomic.Uint64
	delay       atomic.Int64 // per HTTP request, nanoseconds
	calls       atomic.Int64 // calls answered (not eth_blockNumber)
	posts       atomic.Int64 // HTTP requests with calls other than eth_blockNumber
	inflight    atomic.Int64
	maxInflight atomic.Int64
	batchSizes  sync.Map // size -> count

	mu   sync.Mutex
	subs []chan uint64
}

var nodeSeq atomic.Int64

func newFakeNode(t *testing.T) *fakeNode {
	n := &fakeNode{name: "n" + strconv.FormatInt(nodeSeq.Add(1), 10)}
	n.srv = httptest.NewServer(n)
	t.Cleanup(func() { n.srv.CloseClientConnections(); n.srv.Close() })
	return n
}

func (n *fakeNode) url() string   { return n.srv.URL }
func (n *fakeNode) wsURL() string { return "ws" + strings.TrimPrefix(n.srv.URL, "http") }
func (n *fakeNode) setMode(m int) { n.mode.Store(int32(m)) }

func (n *fakeNode) setHead(h uint64) {
	n.head.Store(h)
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.subs {
		select {
		case s <- h:
		default:
		}
	}
}

var upgrader = websocket.Upgrader{}

func (n *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if websocket.IsWebSocketUpgrade(r) {
		n.serveWS(w, r)
		return
	}
	var calls []struct {
		ID     json.RawMessage   `json:"id"`
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&calls); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch n.mode.Load() {
	case modeDown:
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	case modeHang:
		<-r.Context().Done()
		return
	case modeLimited:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	}
	work := len(calls) > 0 && calls[0].Method != "eth_blockNumber"
	if work {
		n.posts.Add(1)
		c, _ := n.batchSizes.LoadOrStore(len(calls), new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
		in := n.inflight.Add(1)
		defer n.inflight.Add(-1)
		for {
			m := n.maxInflight.Load()
			if in <= m || n.maxInflight.CompareAndSwap(m, in) {
				break
			}
		}
		if d := time.Duration(n.delay.Load()); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
	}
	out := make([]string, 0, len(calls))
	for _, c := range calls {
		if c.Method != "eth_blockNumber" {
			n.calls.Add(1)
		}
		result := ""
		switch c.Method {
		case "eth_blockNumber":
			result = strconv.Quote("0x" + strconv.FormatUint(n.head.Load(), 16))
		case "echo":
			result = string(c.Params[0])
		case "eth_getBalance":
			var q string
			_ = json.Unmarshal(c.Params[1], &q)
			b, _ := strconv.ParseUint(strings.TrimPrefix(q, "0x"), 16, 64)
			switch {
			case b > n.head.Load():
				out = append(out, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"header not found"}}`, c.ID))
				continue
			case b < n.prunedBelow.Load():
				out = append(out, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"missing trie node 0x1234 (path ) state 0x1234 is not available"}}`, c.ID))
				continue
			}
			result = `"0x1"`
		case "eth_call":
			out = append(out, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":3,"message":"execution reverted","data":"0x"}}`, c.ID))
			continue
		default:
			result = strconv.Quote(n.name)
		}
		out = append(out, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, c.ID, result))
	}
	_, _ = fmt.Fprintf(w, "[%s]", strings.Join(out, ","))
}

func (n *fakeNode) serveWS(w http.ResponseWriter, r *http.Request) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	if _, _, err := conn.ReadMessage(); err != nil {
		return
	}
	ch := make(chan uint64, 16)
	n.mu.Lock()
	n.subs = append(n.subs, ch)
	n.mu.Unlock()
	if conn.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"result":"0x1"}`)) != nil {
		return
	}
	for h := range ch {
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"0x1","result":{"number":"0x%x"}}}`, h)
		if conn.WriteMessage(websocket.TextMessage, []byte(msg)) != nil {
			return
		}
	}
}

// newTestPool is a pool over the nodes with short timeouts.
func newTestPool(t *testing.T, cfg PoolConfig, nodes ...*fakeNode) *Pool {
	t.Helper()
	cfg.Chain = "43114"
	for _, n := range nodes {
		cfg.Nodes = append(cfg.Nodes, chainsNode(n))
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.BackoffInitial == 0 {
		cfg.BackoffInitial, cfg.BackoffMax = 5*time.Millisecond, 50*time.Millisecond
	}
	p, err := NewPool(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func runPool(t *testing.T, p *Pool) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}
