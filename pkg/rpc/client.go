package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moraine-data/moraine/pkg/iox"
	"github.com/moraine-data/moraine/pkg/jsonx"
	"github.com/moraine-data/moraine/pkg/obs"
)

// Config configures a Client.
type Config struct {
	// URL is the node's HTTP JSON-RPC endpoint.
	URL string
	// Chain labels the metrics (the decimal chain id).
	Chain string
	// Node labels the metrics: the node's name in the chains file (never
	// its URL, which may hold an API key).
	Node string
	// Timeout bounds one HTTP request, retries excluded.
	Timeout time.Duration
	// Attempts is how many times a failing request is sent before the error
	// is returned (default 5). Only transient failures are retried:
	// transport errors, timeouts, HTTP 5xx and 429, and JSON-RPC rate-limit
	// errors.
	Attempts int
	// BackoffInitial and BackoffMax bound the wait between attempts
	// (defaults 100ms and 5s).
	BackoffInitial, BackoffMax time.Duration
	// HTTPClient is used when set (tests); otherwise a client with pooled
	// keep-alive connections.
	HTTPClient *http.Client
}

// Client sends JSON-RPC requests to one node. It is safe for concurrent
// use. Code that reads a chain uses a Pool, which spreads calls over all the
// chain's nodes; a Client alone is for one known endpoint.
type Client struct {
	cfg     Config
	http    *http.Client
	metrics *Metrics
	// perRequestBytes maps a batch's method label to the response size per
	// request last seen (*atomic.Int64), the size hint of readAll.
	perRequestBytes sync.Map
	// spare holds response buffers handed back by Release, for the next
	// answers to be read into.
	spare chan []byte
}

// spareBuffers bounds the response buffers kept for reuse: about one per
// batch in flight (--ingest.concurrency, 4 by default). Only answers to
// Batch expected to be large are read into them: Call's results are kept
// without Release, and a spare read into would be lost with them.
const (
	spareBuffers  = 8
	minSpareBytes = 64 << 10
)

// New returns a client; metrics may be nil.
func New(cfg Config, m *Metrics) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 5
	}
	if cfg.BackoffInitial <= 0 {
		cfg.BackoffInitial = 100 * time.Millisecond
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 5 * time.Second
	}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// Parallel fetchers keep several requests in flight to one node.
		tr.MaxIdleConnsPerHost = 32
		hc = &http.Client{Transport: tr}
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	return &Client{cfg: cfg, http: hc, metrics: m, spare: make(chan []byte, spareBuffers)}
}

// URL is the endpoint the client talks to.
func (c *Client) URL() string { return c.cfg.URL }

// Request is one call of a batch. Result or Err is set by Batch.
type Request struct {
	Method string
	Params []any
	// Result is the raw "result" of the answer (JSON null stays "null"),
	// checked only as far as finding its end: its reader checks the rest.
	Result json.RawMessage
	// Err is the call's error: an *Error for a JSON-RPC error answer, or the
	// transport error that ended the batch.
	Err error
	// Node is the name of the node that answered (set by Pool.Batch and
	// Client.Batch): which node to blame for an answer that fails a check.
	Node string
	// answer is the response Result points into, until Release.
	answer *answer
}

// answer is one HTTP response body, shared by the results it carries.
type answer struct {
	body []byte
	// results is how many Requests still point into body.
	results atomic.Int32
	// spare is the reading client's pool of buffers, where Release returns
	// body.
	spare chan []byte
}

// Release hands the memory behind the results of reqs back to the client,
// which reads later answers into it: the answers to batches of blocks with
// traces are megabytes each, and allocating (and zeroing) a fresh buffer
// for each costs ingest CPU on every batch. Call it once nothing reads the Results of reqs any more, and not
// while another goroutine might: it sets them to nil. An answer is reused
// only once every request it answered is released; a caller that never
// releases leaves its answers to the garbage collector.
func (c *Client) Release(reqs []*Request) { Release(reqs) }

// Release is Client.Release for requests answered by any client or pool.
func Release(reqs []*Request) {
	for _, r := range reqs {
		a := r.answer
		r.Result, r.answer = nil, nil
		if a != nil && a.results.Add(-1) == 0 {
			select {
			case a.spare <- a.body[:0]:
			default:
			}
		}
	}
}

// Call sends one request (as a batch of one, so that the answer is parsed
// the same way).
func (c *Client) Call(ctx context.Context, method string, params ...any) (json.RawMessage, error) {
	r := &Request{Method: method, Params: params}
	// Not into a spare buffer: callers keep the result without releasing it.
	if err := c.batch(ctx, []*Request{r}, false); err != nil {
		return nil, err
	}
	return r.Result, r.Err
}

// Batch sends reqs in one HTTP POST (a JSON-RPC batch) and fills each
// request's Result or Err. Transient failures are retried, resending only
// the calls that have no answer yet. The returned error is non-nil only when
// the batch as a whole failed (every unanswered request then carries it
// too); a JSON-RPC error of one call is only in that call's Err.
//
// The answer may be read into memory handed back by Release: callers should
// Release reqs once they have finished with the results.
func (c *Client) Batch(ctx context.Context, reqs []*Request) error {
	return c.batch(ctx, reqs, true)
}

// batch is Batch, reading answers into spare buffers when reuse is set.
func (c *Client) batch(ctx context.Context, reqs []*Request, reuse bool) error {
	if len(reqs) == 0 {
		return nil
	}
	pending := reqs
	// Not logged: the caller reports a batch that failed for good.
	retry := obs.Retry{Initial: c.cfg.BackoffInitial, Max: c.cfg.BackoffMax, Attempts: c.cfg.Attempts}
	lastErr := retry.Do(ctx, func() error {
		if err := c.send(ctx, pending, reuse); err != nil {
			if !retryable(ctx, err) {
				return obs.Permanent(err)
			}
			return err
		}
		// Resend only the calls refused for rate limiting.
		var again []*Request
		for _, r := range pending {
			var re *Error
			if errors.As(r.Err, &re) && re.rateLimited() {
				again = append(again, r)
			}
		}
		if len(again) == 0 {
			return nil
		}
		pending = again
		return pending[0].Err
	})
	if lastErr == nil {
		return nil
	}
	if ctx.Err() != nil && !errors.Is(lastErr, ctx.Err()) {
		lastErr = fmt.Errorf("%w (last error: %v)", ctx.Err(), lastErr)
	}
	for _, r := range pending {
		if r.Err == nil {
			r.Err = lastErr
		}
	}
	var re *Error
	if errors.As(lastErr, &re) {
		return nil // rate limited until the end: the calls carry the error
	}
	return lastErr
}

// send performs one HTTP round trip for reqs. A nil error means every
// request got an answer (Result or a JSON-RPC Err).
func (c *Client) send(ctx context.Context, reqs []*Request, reuse bool) (err error) {
	method := reqs[0].Method
	for _, r := range reqs[1:] {
		if r.Method != method {
			method = "batch"
			break
		}
	}
	for _, r := range reqs {
		r.Result, r.Err, r.Node = nil, nil, c.cfg.Node
	}
	start := time.Now()
	defer func() {
		c.metrics.duration.WithLabelValues(c.cfg.Chain, c.cfg.Node, method).Observe(time.Since(start).Seconds())
		for _, r := range reqs {
			c.metrics.requests.WithLabelValues(c.cfg.Chain, c.cfg.Node, r.Method, resultLabel(r.Err, err)).Inc()
		}
	}()

	body, err := encodeBatch(reqs)
	if err != nil {
		return fmt.Errorf("%w: encode request: %v", errBadResponse, err)
	}
	rctx, cancel := context.WithTimeoutCause(ctx, c.cfg.Timeout, fmt.Errorf("%w after %v", errTimeout, c.cfg.Timeout))
	defer cancel()
	hreq, err := http.NewRequestWithContext(rctx, http.MethodPost, c.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %v", errBadResponse, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(hreq)
	if err != nil {
		if cause := context.Cause(rctx); cause != nil && ctx.Err() == nil {
			return cause
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err := error(&statusError{code: resp.StatusCode, body: strings.TrimSpace(string(msg))})
		if d := retryAfter(resp.Header.Get("Retry-After")); d > 0 {
			err = &retryAfterError{err: err, after: d}
		}
		return err
	}
	hint := c.sizeHint(method, len(reqs))
	var spare []byte
	if reuse && hint >= minSpareBytes {
		select {
		case spare = <-c.spare:
		default:
		}
	}
	buf, err := readAll(resp, hint, spare)
	if err != nil {
		if cause := context.Cause(rctx); cause != nil && ctx.Err() == nil {
			return cause
		}
		return fmt.Errorf("read response: %w", err)
	}
	c.rememberSize(method, len(reqs), len(buf))
	if err := decodeBatch(buf, reqs); err != nil {
		return err
	}
	a := &answer{body: buf, spare: c.spare}
	for _, r := range reqs {
		if r.Result != nil {
			r.answer = a
			a.results.Add(1)
		}
	}
	return nil
}

// sizeHint guesses the response size of a batch of n requests from the last
// batch of the same method, with a quarter to spare: the blocks of
// consecutive batches differ, and zeroing a spare quarter is cheaper than
// copying the whole answer into a larger buffer.
func (c *Client) sizeHint(method string, n int) int {
	v, ok := c.perRequestBytes.Load(method)
	if !ok {
		return 0
	}
	per := v.(*atomic.Int64).Load()
	return int(min(per*int64(n)+per*int64(n)/4+4096, 1<<30))
}

func (c *Client) rememberSize(method string, n, size int) {
	v, ok := c.perRequestBytes.Load(method)
	if !ok {
		v, _ = c.perRequestBytes.LoadOrStore(method, new(atomic.Int64))
	}
	v.(*atomic.Int64).Store(int64(size / n))
}

func retryAfter(v string) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// readAll reads the body into a buffer sized from Content-Length, or else
// (geth and the replay source stream large batches, chunked) from hint:
// batches of traces are tens of megabytes, and growing by doubling would
// zero and copy them several times. It reuses spare when large enough.
func readAll(resp *http.Response, hint int, spare []byte) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n < 1<<31 {
		// Exactly n bytes: the size and the bound (a short body is
		// io.ErrUnexpectedEOF from net/http).
		return iox.ReadAllInto(spare, resp.Body, int(n), int(n))
	}
	return iox.ReadAllInto(spare, resp.Body, hint, math.MaxInt)
}

func encodeBatch(reqs []*Request) ([]byte, error) {
	b := make([]byte, 0, 96*len(reqs))
	b = append(b, '[')
	for i, r := range reqs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"jsonrpc":"2.0","id":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"method":`...)
		b = strconv.AppendQuote(b, r.Method)
		b = append(b, `,"params":[`...)
		for j, p := range r.Params {
			if j > 0 {
				b = append(b, ',')
			}
			// Block numbers and flags are most params: write them
			// directly; a probe batch has thousands.
			switch v := p.(type) {
			case string:
				b = strconv.AppendQuote(b, v)
			case bool:
				b = strconv.AppendBool(b, v)
			default:
				m, err := json.Marshal(v)
				if err != nil {
					return nil, err
				}
				b = append(b, m...)
			}
		}
		b = append(b, "]}"...)
	}
	return append(b, ']'), nil
}

// decodeBatch matches the answers to reqs by id (servers may reorder them).
// The results alias buf.
func decodeBatch(buf []byte, reqs []*Request) error {
	r := jsonx.NewReader(buf)
	answered := 0
	one := func() error {
		var id []byte
		var result []byte
		var rpcErr *Error
		hasResult := false
		err := r.Object(func(k []byte) error {
			var err error
			switch string(k) {
			case "id":
				id, err = r.Raw()
			case "result":
				// Only its end is found here; its reader checks the rest.
				result, err = r.Extent()
				hasResult = true
			case "error":
				var raw []byte
				if raw, err = r.Raw(); err == nil && string(raw) != "null" {
					rpcErr = new(Error)
					if json.Unmarshal(raw, rpcErr) != nil {
						rpcErr = &Error{Code: -32603, Message: string(raw)}
					}
				}
			default:
				err = r.Skip()
			}
			return err
		})
		if err != nil {
			return err
		}
		i, perr := strconv.Atoi(string(id))
		if perr != nil || i < 0 || i >= len(reqs) {
			if rpcErr != nil {
				// An error for the batch as a whole (id null): e.g. a batch
				// over the server's size limit.
				return rpcErr
			}
			return fmt.Errorf("%w: unknown id %s", errBadResponse, id)
		}
		answered++
		switch {
		case rpcErr != nil:
			reqs[i].Err = rpcErr
		case hasResult:
			reqs[i].Result = result
		default:
			reqs[i].Err = fmt.Errorf("%w: answer without result or error", errBadResponse)
		}
		return nil
	}
	var err error
	switch r.Peek() {
	case '[':
		err = r.Array(one)
	case '{':
		err = one()
	default:
		err = fmt.Errorf("%w: %.100q", errBadResponse, buf)
	}
	if err != nil {
		var re *Error
		if errors.As(err, &re) {
			for _, q := range reqs {
				q.Err = re
			}
			return nil
		}
		var se *jsonx.SyntaxError
		if errors.As(err, &se) {
			// Truncated or garbled: a proxy cut the answer. Worth a retry.
			return fmt.Errorf("decode response: %w", err)
		}
		return err
	}
	if answered < len(reqs) {
		missing := 0
		for _, q := range reqs {
			if q.Result == nil && q.Err == nil {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("response answered %d of %d calls", len(reqs)-missing, len(reqs))
		}
	}
	return nil
}
