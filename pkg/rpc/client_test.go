package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

type rpcCall struct {
	ID     json.RawMessage   `json:"id"`
	Method string            `json:"method"`
	Params []json.RawMessage `json:"params"`
}

// server is a scripted JSON-RPC server: respond decides each HTTP answer
// from the request number (0-based) and the calls.
func server(t *testing.T, respond func(n int, calls []rpcCall, w http.ResponseWriter)) (*httptest.Server, *atomic.Int64) {
	var posts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var calls []rpcCall
		if err := json.NewDecoder(r.Body).Decode(&calls); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		respond(int(posts.Add(1)-1), calls, w)
	}))
	t.Cleanup(srv.Close)
	return srv, &posts
}

// echo answers every call with its first parameter, in reverse order.
func echo(calls []rpcCall, w http.ResponseWriter) {
	out := make([]json.RawMessage, 0, len(calls))
	for i := len(calls) - 1; i >= 0; i-- {
		c := calls[i]
		p := json.RawMessage("null")
		if len(c.Params) > 0 {
			p = c.Params[0]
		}
		out = append(out, json.RawMessage(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, c.ID, p)))
	}
	_ = json.NewEncoder(w).Encode(out)
}

func newClient(url string, reg prometheus.Registerer) (*Client, *Metrics) {
	m := NewMetrics(reg)
	return New(Config{URL: url, Chain: "43114", Node: "a", Timeout: 500 * time.Millisecond, Attempts: 4,
		BackoffInitial: time.Millisecond, BackoffMax: 5 * time.Millisecond}, m), m
}

func TestBatchIsOnePostAndMatchesByID(t *testing.T) {
	srv, posts := server(t, func(_ int, calls []rpcCall, w http.ResponseWriter) { echo(calls, w) })
	reg := prometheus.NewRegistry()
	c, m := newClient(srv.URL, reg)
	var reqs []*Request
	for i := range 30 {
		reqs = append(reqs, &Request{Method: "eth_getBlockByNumber", Params: []any{fmt.Sprintf("0x%x", i), true}})
	}
	require.NoError(t, c.Batch(t.Context(), reqs))
	require.Equal(t, int64(1), posts.Load(), "one HTTP POST for the whole batch")
	for i, r := range reqs {
		require.NoError(t, r.Err)
		require.JSONEq(t, fmt.Sprintf(`"0x%x"`, i), string(r.Result), "answers are matched by id, not position")
	}
	require.Equal(t, 30.0, testutil.ToFloat64(m.requests.WithLabelValues("43114", "a", "eth_getBlockByNumber", "ok")))
	require.Equal(t, 1, testutil.CollectAndCount(m.duration))
}

func TestBatchRetries(t *testing.T) {
	for _, tc := range []struct {
		name       string
		respond    func(n int, calls []rpcCall, w http.ResponseWriter)
		wantPosts  int64
		wantErr    bool
		wantResult string // label counted at least once
	}{
		{
			name: "5xx then success",
			respond: func(n int, calls []rpcCall, w http.ResponseWriter) {
				if n < 2 {
					http.Error(w, "overloaded", http.StatusServiceUnavailable)
					return
				}
				echo(calls, w)
			},
			wantPosts: 3, wantResult: "http_error",
		},
		{
			name: "429 with Retry-After then success",
			respond: func(n int, calls []rpcCall, w http.ResponseWriter) {
				if n == 0 {
					w.Header().Set("Retry-After", "0")
					http.Error(w, "slow down", http.StatusTooManyRequests)
					return
				}
				echo(calls, w)
			},
			wantPosts: 2, wantResult: "rate_limited",
		},
		{
			name: "truncated answer (proxy cut it) is retried",
			respond: func(n int, calls []rpcCall, w http.ResponseWriter) {
				if n == 0 {
					_, _ = w.Write([]byte(`[{"jsonrpc":"2.0","id":0,"result":{"a"`))
					return
				}
				echo(calls, w)
			},
			wantPosts: 2, wantResult: "transport_error",
		},
		{
			name: "answer shorter than its Content-Length is retried",
			respond: func(n int, calls []rpcCall, w http.ResponseWriter) {
				if n == 0 {
					w.Header().Set("Content-Length", "1000")
					_, _ = w.Write([]byte(`[{"jsonrpc":"2.0","id":0,"result":"0x1"}]`))
					return
				}
				echo(calls, w)
			},
			wantPosts: 2, wantResult: "transport_error",
		},
		{
			name: "slow server times out per request, then answers",
			respond: func(n int, calls []rpcCall, w http.ResponseWriter) {
				if n == 0 {
					time.Sleep(700 * time.Millisecond)
				}
				echo(calls, w)
			},
			wantPosts: 2, wantResult: "timeout",
		},
		{
			name: "4xx is not retried",
			respond: func(_ int, _ []rpcCall, w http.ResponseWriter) {
				http.Error(w, "forbidden", http.StatusForbidden)
			},
			wantPosts: 1, wantErr: true, wantResult: "http_error",
		},
		{
			name: "persistent 5xx gives up after Attempts",
			respond: func(_ int, _ []rpcCall, w http.ResponseWriter) {
				http.Error(w, "down", http.StatusBadGateway)
			},
			wantPosts: 4, wantErr: true, wantResult: "http_error",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, posts := server(t, tc.respond)
			c, m := newClient(srv.URL, nil)
			reqs := []*Request{{Method: "eth_chainId", Params: []any{"0xa86a"}}, {Method: "eth_chainId", Params: []any{"0x1"}}}
			err := c.Batch(t.Context(), reqs)
			if tc.wantErr {
				require.Error(t, err)
				require.Error(t, reqs[0].Err, "the calls carry the batch error")
			} else {
				require.NoError(t, err)
				require.JSONEq(t, `"0xa86a"`, string(reqs[0].Result))
				require.JSONEq(t, `"0x1"`, string(reqs[1].Result))
			}
			require.Equal(t, tc.wantPosts, posts.Load())
			require.Positive(t, testutil.ToFloat64(m.requests.WithLabelValues("43114", "a", "eth_chainId", tc.wantResult)))
		})
	}
}

func TestCallErrorsStayPerCall(t *testing.T) {
	srv, posts := server(t, func(n int, calls []rpcCall, w http.ResponseWriter) {
		var out []string
		for _, c := range calls {
			switch string(c.Params[0]) {
			case `"bad"`:
				out = append(out, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"invalid params"}}`, c.ID))
			case `"limited"`:
				if n == 0 {
					out = append(out, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32005,"message":"limit exceeded"}}`, c.ID))
					continue
				}
				fallthrough
			default:
				out = append(out, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, c.ID, c.Params[0]))
			}
		}
		if n == 1 {
			// Only the rate-limited call is sent again.
			require.Len(t, calls, 1)
		}
		_, _ = fmt.Fprintf(w, "[%s]", join(out))
	})
	c, _ := newClient(srv.URL, nil)
	reqs := []*Request{{Method: "m", Params: []any{"ok"}}, {Method: "m", Params: []any{"bad"}}, {Method: "m", Params: []any{"limited"}}}
	require.NoError(t, c.Batch(t.Context(), reqs))
	require.JSONEq(t, `"ok"`, string(reqs[0].Result))
	var re *Error
	require.ErrorAs(t, reqs[1].Err, &re)
	require.Equal(t, -32602, re.Code)
	require.NoError(t, reqs[2].Err)
	require.JSONEq(t, `"limited"`, string(reqs[2].Result))
	require.Equal(t, int64(2), posts.Load())
}

func TestBatchLevelErrorAppliesToEveryCall(t *testing.T) {
	srv, _ := server(t, func(_ int, _ []rpcCall, w http.ResponseWriter) {
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch too large"}}`))
	})
	c, _ := newClient(srv.URL, nil)
	reqs := []*Request{{Method: "a"}, {Method: "b"}}
	require.NoError(t, c.Batch(t.Context(), reqs))
	for _, r := range reqs {
		var re *Error
		require.ErrorAs(t, r.Err, &re)
		require.Equal(t, "batch too large", re.Message)
	}
}

func TestBatchStopsWhenContextEnds(t *testing.T) {
	srv, _ := server(t, func(_ int, _ []rpcCall, w http.ResponseWriter) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	c := New(Config{URL: srv.URL, Attempts: 100, BackoffInitial: 50 * time.Millisecond, BackoffMax: 50 * time.Millisecond}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Call(ctx, "eth_blockNumber")
	require.Error(t, err)
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestRedact(t *testing.T) {
	require.Equal(t, "https://node.example", Redact("https://node.example"))
	require.Equal(t, "https://node.example/...", Redact("https://node.example/v3/SECRETKEY"))
	require.Equal(t, "wss://node.example/...", Redact("wss://user:pass@node.example/ws?key=1"))
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

// A chunked answer (no Content-Length, as geth and the replay source send
// large batches) is read whole whatever the size hint from the batch before:
// none, too small or too large.
func TestChunkedAnswersUseTheLastSizeAsHint(t *testing.T) {
	pad := strings.Repeat("ab", 40<<10)
	srv, _ := server(t, func(_ int, calls []rpcCall, w http.ResponseWriter) {
		w.(http.Flusher).Flush() // headers out now: the body is chunked
		out := make([]json.RawMessage, 0, len(calls))
		for _, c := range calls {
			out = append(out, json.RawMessage(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":"%s"}`, c.ID, pad)))
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	// Answers of up to 3 MB, whose time on a loaded machine is not what this
	// test is about: a timeout far above newClient's 500 ms.
	c := New(Config{URL: srv.URL, Chain: "43114", Node: "a", Timeout: 30 * time.Second, Attempts: 1}, NewMetrics(prometheus.NewRegistry()))
	batch := func(n int) {
		var reqs []*Request
		for range n {
			reqs = append(reqs, &Request{Method: "debug_traceBlockByNumber", Params: []any{"0x1"}})
		}
		require.NoError(t, c.Batch(t.Context(), reqs))
		for _, r := range reqs {
			require.NoError(t, r.Err)
			require.Equal(t, `"`+pad+`"`, string(r.Result))
		}
	}
	require.Zero(t, c.sizeHint("debug_traceBlockByNumber", 10), "no hint before the first answer")
	batch(10)
	hint := c.sizeHint("debug_traceBlockByNumber", 10)
	require.Greater(t, hint, 10*len(pad), "the hint covers an answer like the last one")
	require.Less(t, hint, 13*len(pad)+8192, "with a quarter to spare")
	batch(40) // larger than the hint
	batch(2)  // smaller
	require.Less(t, c.sizeHint("debug_traceBlockByNumber", 2), 3*len(pad), "the hint follows the last answer")
	require.Zero(t, c.sizeHint("eth_getBlockByNumber", 10), "hints are per method")
}

// Released answers to batches are read into again: the second batch's
// results sit in the first batch's memory once every result of the first
// was released, and not before; results are nil after Release; Call never
// takes the spare memory (its results are kept without Release).
func TestReleaseReusesAnswerMemory(t *testing.T) {
	srv, _ := server(t, func(_ int, calls []rpcCall, w http.ResponseWriter) { echo(calls, w) })
	c, _ := newClient(srv.URL, prometheus.NewRegistry())
	pad := strings.Repeat("ab", 4<<10) // 20 results of 8 KiB: large enough to reuse memory for
	batch := func(tag string) []*Request {
		var reqs []*Request
		for i := range 20 {
			reqs = append(reqs, &Request{Method: "eth_getBlockByNumber", Params: []any{fmt.Sprintf("%s-%d-%s", tag, i, pad)}})
		}
		require.NoError(t, c.Batch(t.Context(), reqs))
		for i, r := range reqs {
			require.Equal(t, fmt.Sprintf(`"%s-%d-%s"`, tag, i, pad), string(r.Result))
		}
		return reqs
	}
	batch("warm-up") // gives the size hint
	first := batch("a")
	body := first[0].answer.body
	c.Release(first[:10])
	require.Nil(t, first[0].Result)
	second := batch("b") // half of the first is still in use: fresh memory
	require.NotSame(t, &body[0], &second[0].answer.body[0])
	require.Equal(t, fmt.Sprintf(`"a-15-%s"`, pad), string(first[15].Result), "unreleased results stay intact")
	big := strings.Repeat("cd", 50<<10)
	_, err := c.Call(t.Context(), "debug_big", big) // its next answer is expected large
	require.NoError(t, err)
	c.Release(first[10:])
	_, err = c.Call(t.Context(), "debug_big", big)
	require.NoError(t, err)
	third := batch("c")
	require.Same(t, &body[0], &third[0].answer.body[0], "the first answer's memory is read into again, not taken by Call")
	c.Release(second)
	c.Release(third)
}
