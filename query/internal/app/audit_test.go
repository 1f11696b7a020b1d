package app

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// TestOversizedRequestsGetTheErrorBody: a request line or headers over
// --http.max-header-bytes are refused by net/http below gin; the answer is
// still the API's error body (issue 27: Go's plain-text 431, and never a
// 414), and repeated query parameters are a 400 on every route family.
func TestOversizedRequestsGetTheErrorBody(t *testing.T) {
	chCfg, _ := testenv.ClickHouse(t)
	a, url := startApp(t, func(c *Config) { c.ClickHouse = chCfg })
	raw := func(req string) (*http.Response, string) {
		c, err := net.Dial("tcp", a.APIAddr())
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, req)
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := raw("GET /v1/chains?x=" + strings.Repeat("a", 100<<10) + " HTTP/1.1\r\nHost: x\r\n\r\n")
	require.Equal(t, http.StatusRequestURITooLong, resp.StatusCode)
	require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
	require.JSONEq(t, `{"message":"the request line (method, URI and protocol) must not exceed 65536 bytes","statusCode":414,"error":"URI Too Long"}`, body)
	resp, body = raw("GET /v1/chains HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 100<<10) + "\r\n\r\n")
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	require.JSONEq(t, `{"message":"the request line and headers must not exceed 65536 bytes together","statusCode":431,"error":"Request Header Fields Too Large"}`, body)

	for _, p := range []string{"/v1/chains/43114/blocks?pageSize=5&pageSize=500", "/v1/chains/43114/transactions?status[]=failed"} {
		r, err := http.Get(url + p)
		require.NoError(t, err)
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		require.Equal(t, http.StatusBadRequest, r.StatusCode, "%s: %s", p, b)
		require.NotEmpty(t, r.Header.Get("ratelimit-remaining"), p)
	}
}
