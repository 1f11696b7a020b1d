package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/moraine-data/moraine/ingest/internal/jsonx"
	"github.com/moraine-data/moraine/pkg/obs"
)

// HeadsConfig configures head tracking.
type HeadsConfig struct {
	// WSURL is the node's WebSocket endpoint; empty means polling only.
	WSURL string
	// PollInterval is the eth_blockNumber polling period used when there is
	// no working subscription.
	PollInterval time.Duration
	// Silence is how long the subscription may go without a head before
	// polling resumes alongside it (default 3 × PollInterval, at least 5s).
	// Avalanche chains build blocks only when there are transactions, so a
	// silent subscription is not a dead one: it is kept, and polling covers
	// the case where it is.
	Silence time.Duration
}

// Heads tracks the highest block number the node has announced: from
// eth_subscribe("newHeads") over WebSocket when configured, and from polling
// eth_blockNumber when there is no subscription, it failed, or it has been
// silent for longer than Silence.
type Heads struct {
	client *Client
	cfg    HeadsConfig
	logger *slog.Logger

	head    atomic.Uint64
	known   atomic.Bool
	lastSub atomic.Int64 // unix nanos of the last head from the subscription
	subOK   atomic.Bool

	mu      sync.Mutex
	changed chan struct{}
}

// NewHeads returns a head tracker; call Run to start it.
func NewHeads(c *Client, cfg HeadsConfig, logger *slog.Logger) *Heads {
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.Silence <= 0 {
		cfg.Silence = max(3*cfg.PollInterval, 5*time.Second)
	}
	return &Heads{client: c, cfg: cfg, logger: logger, changed: make(chan struct{})}
}

// Head returns the highest announced block number and whether one is known.
func (h *Heads) Head() (uint64, bool) { return h.head.Load(), h.known.Load() }

// Changed returns a channel that is closed at the next head change.
func (h *Heads) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// Subscribed reports whether a newHeads subscription is live.
func (h *Heads) Subscribed() bool { return h.subOK.Load() }

func (h *Heads) set(n uint64) {
	for {
		cur := h.head.Load()
		if h.known.Load() && n <= cur {
			return
		}
		if h.head.CompareAndSwap(cur, n) {
			break
		}
	}
	h.known.Store(true)
	h.mu.Lock()
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
}

// Poll asks eth_blockNumber now and records the answer.
func (h *Heads) Poll(ctx context.Context) (uint64, error) {
	raw, err := h.client.Call(ctx, "eth_blockNumber")
	if err != nil {
		return 0, err
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("eth_blockNumber: %w", err)
	}
	n, err := parseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("eth_blockNumber: %w", err)
	}
	h.set(n)
	return n, nil
}

// Run tracks the head until ctx ends. Failures are logged and retried; Run
// returns only ctx's error.
func (h *Heads) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	if h.cfg.WSURL != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.subscribe(ctx)
		}()
	}
	t := time.NewTicker(h.cfg.PollInterval)
	defer t.Stop()
	var lastErr string
	for {
		quiet := time.Since(time.Unix(0, h.lastSub.Load())) > h.cfg.Silence
		if !h.subOK.Load() || quiet {
			if _, err := h.Poll(ctx); err != nil && ctx.Err() == nil {
				if err.Error() != lastErr {
					h.logger.Warn("polling eth_blockNumber failed, retrying", "err", err)
					lastErr = err.Error()
				}
			} else {
				lastErr = ""
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// subscribe keeps a newHeads subscription open, reconnecting with backoff.
func (h *Heads) subscribe(ctx context.Context) {
	reconnect := obs.Retry{Initial: 500 * time.Millisecond, Max: 30 * time.Second, ResetAfter: time.Minute,
		Log: h.logger, Msg: "newHeads subscription failed; polling eth_blockNumber meanwhile", Attrs: []any{"url", Redact(h.cfg.WSURL)}}
	// subscribeOnce only returns with an error: this runs until ctx ends.
	_ = reconnect.Do(ctx, func() error {
		err := h.subscribeOnce(ctx)
		h.subOK.Store(false)
		return err
	})
}

const (
	wsPingEvery = 15 * time.Second
	wsDeadline  = 45 * time.Second
)

func (h *Heads) subscribeOnce(ctx context.Context) error {
	d := websocket.Dialer{HandshakeTimeout: h.client.cfg.Timeout, Proxy: http.ProxyFromEnvironment}
	conn, _, err := d.DialContext(ctx, h.cfg.WSURL, nil)
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
		if !isHead {
			h.subOK.Store(true) // the subscription was accepted
			h.lastSub.Store(time.Now().UnixNano())
			continue
		}
		h.subOK.Store(true)
		h.lastSub.Store(time.Now().UnixNano())
		h.set(n)
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
