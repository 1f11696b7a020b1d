package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/moraine-data/moraine/pkg/jsonx"
	"github.com/moraine-data/moraine/pkg/obs"
)

// Head returns the newest block a working node has reported (all nodes'
// when none works) and whether one is known yet.
func (p *Pool) Head() (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.best, p.bestKnown
}

// Changed returns a channel that is closed at the next change of Head.
func (p *Pool) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.headChanged
}

// Subscribed reports whether a newHeads subscription is live.
func (p *Pool) Subscribed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.subscribed
}

// SeenAt returns when the pool first learned that the chain had reached
// block n: the arrival of the newHeads announcement or head poll that
// first reported n or a later block. It knows this only for blocks the
// chain reached while the pool was watching, and only for the last
// seenHeads head changes; for others (a backfill's blocks) ok is false.
func (p *Pool) SeenAt(n uint64) (at time.Time, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The newest report of a head below n; the report after it is the one
	// that first reached n since.
	for i := len(p.seen) - 1; i >= 0; i-- {
		if p.seen[i].head < n {
			if i == len(p.seen)-1 {
				return time.Time{}, false // not reached yet
			}
			return p.seen[i+1].at, true
		}
	}
	return time.Time{}, false
}

// seenHeads bounds the head reports SeenAt keeps: minutes of a chain's
// heads, far more than ingest takes to fetch and produce a head block.
const seenHeads = 256

// sawHead records a head report that changes the highest head seen (or
// lowers it, after a node's reorg or loss). Called with p.mu held.
func (p *Pool) sawHead(h uint64, at time.Time) {
	if k := len(p.seen); k > 0 && p.seen[k-1].head == h {
		return
	}
	if len(p.seen) == seenHeads {
		p.seen = append(p.seen[:0], p.seen[1:]...)
	}
	p.seen = append(p.seen, headReport{head: h, at: at})
}

// headReport is a head the pool was told of, and when.
type headReport struct {
	head uint64
	at   time.Time
}

// updateBest recomputes Head. Called with p.mu held.
func (p *Pool) updateBest() {
	var best uint64
	known := false
	for pass := 0; pass < 2 && !known; pass++ {
		for _, n := range p.nodes {
			if n.headKnown && (n.up || pass == 1) {
				best, known = max(best, n.head), true
			}
		}
	}
	if known && (!p.bestKnown || best != p.best) {
		p.best, p.bestKnown = best, true
		p.sawHead(best, time.Now())
		close(p.headChanged)
		p.headChanged = make(chan struct{})
	}
}

// NodeStatus is what the pool knows of one node, for status pages.
type NodeStatus struct {
	Name string
	// URL is redacted (Redact).
	URL       string
	Head      uint64
	HeadKnown bool
	Up        bool
	Inflight  int
	Limit     float64
	// PerCall is the node's recent latency per call of real work;
	// PollLatency the round trip of its last head poll.
	PerCall, PollLatency time.Duration
}

// Nodes returns the state of every node, in configuration order.
func (p *Pool) Nodes() []NodeStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]NodeStatus, len(p.nodes))
	for i, n := range p.nodes {
		out[i] = NodeStatus{Name: n.cfg.Name, URL: Redact(n.cfg.URL), Head: n.head, HeadKnown: n.headKnown, Up: n.up,
			Inflight: n.inflight, Limit: n.limit, PerCall: time.Duration(n.perCall * float64(time.Second)), PollLatency: n.pollTook}
	}
	return out
}

// PollHeads asks every node for its head once, now, and records the
// answers (a node that fails is marked down; one that answers is taken
// back). It returns when every node has answered or failed.
func (p *Pool) PollHeads(ctx context.Context) {
	var wg sync.WaitGroup
	for _, n := range p.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); _ = p.pollNode(ctx, n) }()
	}
	wg.Wait()
	p.mu.Lock()
	p.tracking = true
	p.mu.Unlock()
}

// pollTimeout bounds a head poll: short, because the poll is what finds a
// frozen node (one that accepts connections and never answers) within
// seconds, and eth_blockNumber is instant on a working node.
func (p *Pool) pollTimeout() time.Duration {
	return min(p.cfg.Timeout, max(2*p.cfg.PollInterval, 2*time.Second))
}

func (p *Pool) pollNode(ctx context.Context, n *node) error {
	pctx, cancel := context.WithTimeoutCause(ctx, p.pollTimeout(), fmt.Errorf("%w after %v", errTimeout, p.pollTimeout()))
	defer cancel()
	r := &Request{Method: "eth_blockNumber"}
	start := time.Now()
	err := n.client.send(pctx, []*Request{r}, false)
	took := time.Since(start)
	if err == nil {
		err = r.Err
	}
	var h uint64
	if err == nil {
		var s string
		if err = json.Unmarshal(r.Result, &s); err == nil {
			h, err = parseQuantity(s)
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n.rps > 0 {
		n.refill(time.Now())
		n.tokens-- // the poll counts against the node's limit, but never waits
	}
	if err != nil {
		if !isRateLimited(err) {
			p.markDown(n, fmt.Errorf("eth_blockNumber: %w", err))
		}
		return err
	}
	n.head, n.headKnown, n.pollTook = h, true, took
	p.metrics.head.WithLabelValues(p.cfg.Chain, n.cfg.Name).Set(float64(h))
	p.markUp(n)
	p.updateBest()
	p.notify()
	return nil
}

// Run tracks every node's head until ctx ends: it polls each node every
// PollInterval (at once when the WebSocket subscription announces a head),
// which is also how a failed node is seen to work again. It returns ctx's
// error.
func (p *Pool) Run(ctx context.Context) error {
	p.mu.Lock()
	p.tracking = true
	p.mu.Unlock()
	var wg sync.WaitGroup
	defer wg.Wait()
	if p.cfg.WSURL != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.subscribe(ctx)
		}()
	}
	for _, n := range p.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.pollLoop(ctx, n)
		}()
	}
	<-ctx.Done()
	return ctx.Err()
}

func (p *Pool) pollLoop(ctx context.Context, n *node) {
	t := time.NewTicker(p.cfg.PollInterval)
	defer t.Stop()
	for {
		_ = p.pollNode(ctx, n)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.poke:
		}
	}
}

// announced is a head from the subscription: every node is polled now, so
// that the pool learns which of them have it. Its arrival is when the pool
// first saw the chain reach it (SeenAt), ahead of the polls.
func (p *Pool) announced(h uint64) {
	p.mu.Lock()
	if k := len(p.seen); k == 0 || h > p.seen[k-1].head {
		p.sawHead(h, time.Now())
	}
	p.mu.Unlock()
	for _, n := range p.nodes {
		select {
		case n.poke <- struct{}{}:
		default:
		}
	}
}

func (p *Pool) setSubscribed(ok bool) {
	p.mu.Lock()
	p.subscribed = ok
	p.mu.Unlock()
}

// subscribe keeps a newHeads subscription open, reconnecting with backoff.
func (p *Pool) subscribe(ctx context.Context) {
	reconnect := obs.Retry{Initial: 500 * time.Millisecond, Max: 30 * time.Second, ResetAfter: time.Minute,
		Log: p.logger, Msg: "newHeads subscription failed; polling eth_blockNumber meanwhile", Attrs: []any{"url", Redact(p.cfg.WSURL)}}
	// subscribeOnce only returns with an error: this runs until ctx ends.
	_ = reconnect.Do(ctx, func() error {
		err := p.subscribeOnce(ctx)
		p.setSubscribed(false)
		return err
	})
}

const (
	wsPingEvery = 15 * time.Second
	wsDeadline  = 45 * time.Second
)

func (p *Pool) subscribeOnce(ctx context.Context) error {
	d := websocket.Dialer{HandshakeTimeout: p.cfg.Timeout, Proxy: http.ProxyFromEnvironment}
	conn, _, err := d.DialContext(ctx, p.cfg.WSURL, nil)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Close the connection when ctx ends so that the read below returns.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	if err := conn.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}`)); err != nil {
		return err
	}
	// Liveness: the node answers pings; no pong for wsDeadline ends the
	// connection. Head silence alone does not (see HeadsConfig.Silence).
	_ = conn.SetReadDeadline(time.Now().Add(wsDeadline))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(wsDeadline)) })
	pingDone := make(chan struct{})
	defer close(pingDone)
	go func() {
		t := time.NewTicker(wsPingEvery)
		defer t.Stop()
		for {
			select {
			case <-pingDone:
				return
			case <-t.C:
				if conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(5*time.Second)) != nil {
					return
				}
			}
		}
	}()

	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			return err
		}
		_ = conn.SetReadDeadline(time.Now().Add(wsDeadline))
		n, isHead, err := parseWSMessage(msg)
		if err != nil {
			return err
		}
		p.setSubscribed(true) // accepted, or announcing
		if isHead {
			p.announced(n)
		}
	}
}

// parseWSMessage reads a subscription message: the answer to eth_subscribe
// (isHead false; an error answer is returned as an error) or a newHeads
// notification (the head's number).
func parseWSMessage(msg []byte) (n uint64, isHead bool, err error) {
	r := jsonx.NewReader(msg)
	var number []byte
	var rpcErr []byte
	err = r.Object(func(k []byte) error {
		switch string(k) {
		case "error":
			raw, err := r.Raw()
			if string(raw) != "null" {
				rpcErr = raw
			}
			return err
		case "params":
			return r.Object(func(k []byte) error {
				if string(k) != "result" {
					return r.Skip()
				}
				return r.Object(func(k []byte) error {
					if string(k) != "number" {
						return r.Skip()
					}
					var err error
					number, err = r.Bytes()
					isHead = true
					return err
				})
			})
		}
		return r.Skip()
	})
	if err != nil {
		return 0, false, fmt.Errorf("newHeads: %w", err)
	}
	if rpcErr != nil {
		return 0, false, fmt.Errorf("eth_subscribe: %s", rpcErr)
	}
	if !isHead {
		return 0, false, nil
	}
	n, err = parseQuantity(string(number))
	return n, true, err
}

func parseQuantity(s string) (uint64, error) {
	if len(s) < 3 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') {
		return 0, fmt.Errorf("bad quantity %q", s)
	}
	var v uint64
	if len(s) > 18 {
		return 0, fmt.Errorf("quantity %q exceeds 64 bits", s)
	}
	for _, c := range []byte(s[2:]) {
		var x byte
		switch {
		case '0' <= c && c <= '9':
			x = c - '0'
		case 'a' <= c && c <= 'f':
			x = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			x = c - 'A' + 10
		default:
			return 0, fmt.Errorf("bad quantity %q", s)
		}
		v = v<<4 | uint64(x)
	}
	return v, nil
}
