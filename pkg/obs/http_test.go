package obs

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serveHTTP runs ListenHTTP with cfg on a free loopback port until the
// test ends.
func serveHTTP(t *testing.T, cfg HTTPConfig) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /get", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("POST /post", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			w.WriteHeader(http.StatusRequestTimeout)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	srv, err := ListenHTTP("127.0.0.1:0", mux, slog.New(slog.DiscardHandler), cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, time.Second) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv.Addr()
}

// exchange writes req on a new connection and reads until the server
// closes it or answers with a complete header block; it returns the status
// line ("" when the connection closed without one) and the time from the
// end of the write.
func exchange(t *testing.T, addr, req string) (string, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, req)
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil && !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("read: %v (after %s)", err, time.Since(start))
	}
	return strings.TrimSpace(line), time.Since(start)
}

func fastLimits() HTTPConfig {
	c := DefaultHTTPConfig()
	c.ReadHeaderTimeout, c.ReadTimeout, c.WriteTimeout, c.IdleTimeout = 300*time.Millisecond, 500*time.Millisecond, 2*time.Second, 400*time.Millisecond
	return c
}

// TestSlowClientIsCutOff is issue 16's first finding on a real socket: a
// request that announces Content-Length 1000 and sends 10 bytes was never
// answered, with or without a body-reading handler. With --http.read-timeout
// the answer comes once the timeout passes (measured, with short limits).
func TestSlowClientIsCutOff(t *testing.T) {
	cfg := fastLimits()
	addr := serveHTTP(t, cfg)
	for _, tc := range []struct{ req, want string }{
		// The handler reads the body: its read fails at the deadline.
		{"POST /post HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"a\":12345", "HTTP/1.1 408 Request Timeout"},
		// The handler ignores the body: net/http drains it before
		// answering, and the deadline ends the drain.
		{"GET /get HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789", "HTTP/1.1 200 OK"},
	} {
		status, took := exchange(t, addr, tc.req)
		t.Logf("%s: %q after %s (read timeout %s)", strings.Fields(tc.req)[1], status, took, cfg.ReadTimeout)
		require.Equal(t, tc.want, status)
		require.GreaterOrEqual(t, took, cfg.ReadTimeout-cfg.ReadHeaderTimeout, "answered before the body could have timed out")
		require.Less(t, took, cfg.ReadTimeout+3*time.Second)
	}
	// Headers that never end: cut at the header timeout, no answer.
	status, took := exchange(t, addr, "GET /get HTTP/1.1\r\nHost: x\r\n")
	t.Logf("incomplete headers: %q after %s", status, took)
	require.Less(t, took, cfg.ReadHeaderTimeout+3*time.Second)
}

// TestIdleKeepAliveIsClosed: a keep-alive connection that stays silent
// after its answer is closed after --http.idle-timeout.
func TestIdleKeepAliveIsClosed(t *testing.T) {
	cfg := fastLimits()
	addr := serveHTTP(t, cfg)
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /get HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	start := time.Now()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	_, err = br.ReadByte()
	took := time.Since(start)
	t.Logf("idle connection closed after %s (idle timeout %s)", took, cfg.IdleTimeout)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "timeout", "the server, not the test's deadline, ends it")
	require.GreaterOrEqual(t, took, cfg.IdleTimeout/2)
	require.Less(t, took, cfg.IdleTimeout+3*time.Second)
}

// TestMaxConnections: beyond --http.max-connections a connection waits to
// be accepted until one closes; it is then served.
func TestMaxConnections(t *testing.T) {
	cfg := fastLimits()
	cfg.MaxConnections = 2
	addr := serveHTTP(t, cfg)
	for range 2 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
	}
	// The two silent connections hold both slots until the header timeout
	// closes them; the third request is answered after that.
	status, took := exchange(t, addr, "GET /get HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	t.Logf("third connection answered after %s (header timeout %s)", took, cfg.ReadHeaderTimeout)
	require.Equal(t, "HTTP/1.1 200 OK", status)
	require.GreaterOrEqual(t, took, cfg.ReadHeaderTimeout/2)
}

func TestHTTPConfigDefaultsAndValidate(t *testing.T) {
	d := DefaultHTTPConfig()
	require.NoError(t, d.Validate())
	require.Equal(t, HTTPConfig{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second,
		IdleTimeout: 60 * time.Second, MaxHeaderBytes: 64 << 10, MaxConnections: 8192}, d)
	bad := d
	bad.ReadTimeout = 0
	require.ErrorContains(t, bad.Validate(), "--http.read-timeout must be positive")
	bad = d
	bad.ReadHeaderTimeout = time.Minute
	require.ErrorContains(t, bad.Validate(), "must not exceed --http.read-timeout")
	// Headers beyond the cap: 431.
	addr := serveHTTP(t, fastLimits())
	status, _ := exchange(t, addr, "GET /get HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 70<<10)+"\r\n\r\n")
	require.Equal(t, "HTTP/1.1 431 Request Header Fields Too Large", status)
}

// TestProtocolErrorsInTheServicesShape: the answers net/http writes by
// itself (a request line or headers over the cap, a malformed request)
// come in ErrorBody's shape instead of Go's plain text, and an over-long
// request line is a 414 (issue 27: Go answers it 431, in text/plain).
// Answers of the handler are untouched.
func TestProtocolErrorsInTheServicesShape(t *testing.T) {
	cfg := fastLimits()
	cfg.ErrorBody = func(status int, msg string) (string, []byte) {
		return "application/json; charset=utf-8", []byte(fmt.Sprintf(`{"message":%q,"statusCode":%d}`, msg, status))
	}
	addr := serveHTTP(t, cfg)
	read := func(req string) (*http.Response, string) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, req)
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	for _, tc := range []struct {
		name, req string
		status    int
		body      string
	}{
		{"long headers", "GET /get HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n",
			431, `{"message":"the request line and headers must not exceed 65536 bytes together","statusCode":431}`},
		{"long URI", "GET /get?x=" + strings.Repeat("a", 70<<10) + " HTTP/1.1\r\nHost: x\r\n\r\n",
			414, `{"message":"the request line (method, URI and protocol) must not exceed 65536 bytes","statusCode":414}`},
		{"no host", "GET /get HTTP/1.1\r\n\r\n", 400, `{"message":"missing required Host header","statusCode":400}`},
		{"garbage", "NOT HTTP\r\n\r\n", 400, `{"message":"Bad Request","statusCode":400}`},
		{"transfer encoding", "POST /post HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, `{"message":"Unsupported transfer encoding","statusCode":501}`},
		{"handler", "GET /get HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 200, "ok"},
	} {
		resp, body := read(tc.req)
		require.Equal(t, tc.status, resp.StatusCode, tc.name)
		require.Equal(t, tc.body, body, tc.name)
		if tc.status != 200 {
			require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"), tc.name)
			require.True(t, resp.Close, tc.name)
		}
	}
	// A request line over the cap after a complete request on the same
	// connection is still told apart from long headers. (100 KiB: on a
	// reused connection net/http reads up to the cap plus 4 KiB, plus the 4
	// KiB its buffer already holds.)
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	br := bufio.NewReader(c)
	_, err = io.WriteString(c, "GET /get HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_, err = io.WriteString(c, "GET /get?x="+strings.Repeat("a", 100<<10)+" HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, 414, resp.StatusCode)
}
