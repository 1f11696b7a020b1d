package replay

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// wsConn is one WebSocket client: requests are answered in order, newHeads
// notifications are interleaved by the subscriptions' goroutines.
type wsConn struct {
	s    *Server
	conn *websocket.Conn
	out  chan []byte
	done chan struct{}

	mu      sync.Mutex
	subs    map[string]context.CancelFunc
	pending []chan struct{} // subscriptions waiting for their id to be sent
	wg      sync.WaitGroup
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	// Counted before the upgrade, while the HTTP server still tracks the
	// connection, so that Close (Shutdown, then Wait) cannot miss it.
	s.wg.Add(1)
	defer s.wg.Done()
	select {
	case <-s.done:
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	default:
	}
	conn, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	conn.SetReadLimit(maxRequestBody)
	c := &wsConn{s: s, conn: conn, out: make(chan []byte, 256), done: make(chan struct{}), subs: map[string]context.CancelFunc{}}
	go func() {
		select {
		case <-s.done:
			conn.Close()
		case <-c.done:
		}
	}()
	writerDone := make(chan struct{})
	go c.writer(writerDone)
	defer func() {
		close(c.done)
		c.mu.Lock()
		for _, cancel := range c.subs {
			cancel()
		}
		c.mu.Unlock()
		c.wg.Wait()
		<-writerDone
		conn.Close()
	}()
	ctx := r.Context()
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			return
		}
		var resp []byte
		s.handleMessage(ctx, msg, c, func(p []byte) { resp = append(resp, p...) })
		if len(resp) > 0 {
			c.send(resp)
		}
		c.mu.Lock()
		for _, ready := range c.pending {
			close(ready)
		}
		c.pending = nil
		c.mu.Unlock()
	}
}

func (c *wsConn) writer(done chan struct{}) {
	defer close(done)
	for {
		select {
		case p := <-c.out:
			c.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if err := c.conn.WriteMessage(websocket.TextMessage, p); err != nil {
				c.conn.Close() // ends the read loop
				return
			}
		case <-c.done:
			return
		}
	}
}

// send queues a message; it gives up when the connection is gone.
func (c *wsConn) send(p []byte) bool {
	select {
	case c.out <- p:
		return true
	case <-c.done:
		return false
	}
}

// subscribe starts a newHeads subscription: every block released after now is
// sent as a notification (after the subscription id has been answered).
func (c *wsConn) subscribe(_ context.Context, id string) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	c.mu.Lock()
	c.subs[id] = cancel
	c.pending = append(c.pending, ready)
	c.mu.Unlock()
	s := c.s
	last := s.visible()
	prefix := []byte(`{"jsonrpc":"2.0","method":"eth_subscription","params":{"subscription":"` + id + `","result":`)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case <-ready:
		case <-ctx.Done():
			return
		case <-c.done:
			return
		}
		for {
			changed := s.headChanged()
			for cur := s.visible(); last < cur; {
				last++
				b, err := s.src.load(int(last))
				if err != nil {
					s.log.Warn("replay: newHeads: cannot read a block; no notification for it", "err", err)
					continue
				}
				h := b.Header
				msg := make([]byte, 0, len(prefix)+len(h)+2)
				msg = append(append(append(msg, prefix...), h...), '}', '}')
				if ctx.Err() != nil || !c.send(msg) {
					return
				}
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			case <-c.done:
				return
			}
		}
	}()
}

func (c *wsConn) unsubscribe(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cancel, ok := c.subs[id]
	if ok {
		cancel()
		delete(c.subs, id)
	}
	return ok
}
