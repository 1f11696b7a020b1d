package app

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/ops/admin"
	"github.com/moraine-data/moraine/query/internal/webhooks/webhookapi/webhookapitest"
)

// TestSlowClientsAreCutOff is the audit's first finding against the whole
// service on a real socket (issue 16): a request announcing Content-Length
// 1000 and sending 10 bytes got no answer after 120 s, with or without a
// key, on POST /v1/webhooks and on GET /v1/chains, and an idle keep-alive
// connection stayed open past 100 s. With the --http.* limits set short,
// each ends once its limit passes; the times are logged.
func TestSlowClientsAreCutOff(t *testing.T) {
	chCfg, conn := testenv.ClickHouse(t)
	tmp := t.TempDir()
	chainsFile := filepath.Join(tmp, "chains.json")
	require.NoError(t, os.WriteFile(chainsFile, []byte(webhookapitest.Chains), 0o600))
	const readTimeout, idleTimeout = 700 * time.Millisecond, 500 * time.Millisecond
	a, _ := startApp(t, func(c *Config) {
		c.ClickHouse = chCfg
		c.ChainsFile = chainsFile
		c.HTTP.ReadHeaderTimeout, c.HTTP.ReadTimeout, c.HTTP.IdleTimeout = 300*time.Millisecond, readTimeout, idleTimeout
	})
	db, err := accountdb.Open(conn, accountdb.DefaultConfig(), nil)
	require.NoError(t, err)
	adm := &admin.Admin{DB: db, Clock: accountdb.NewClock(nil)}
	acc, err := adm.CreateAccount(context.Background(), "slow", plan.Free)
	require.NoError(t, err)
	key, err := adm.CreateKey(context.Background(), acc.ID)
	require.NoError(t, err)

	send := func(req string) (string, time.Duration) {
		t.Helper()
		c, err := net.Dial("tcp", a.APIAddr())
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, req)
		require.NoError(t, err)
		start := time.Now()
		require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
		line, _ := bufio.NewReader(c).ReadString('\n')
		return strings.TrimSpace(line), time.Since(start)
	}
	slow := func(method, path, key string) string {
		req := method + " " + path + " HTTP/1.1\r\nHost: moraine\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
		if key != "" {
			req += "x-glacier-api-key: " + key + "\r\n"
		}
		return req + "\r\n" + `{"url":"ht`
	}
	for _, tc := range []struct {
		name, req, want string
	}{
		{"POST /v1/webhooks with a key", slow("POST", "/v1/webhooks", key.Key), "HTTP/1.1 408 Request Timeout"},
		{"POST /v1/webhooks without a key", slow("POST", "/v1/webhooks", ""), "HTTP/1.1 401 Unauthorized"},
		{"GET /v1/chains", slow("GET", "/v1/chains", ""), "HTTP/1.1 200 OK"},
	} {
		status, took := send(tc.req)
		t.Logf("%s: %q after %s (--http.read-timeout %s)", tc.name, status, took, readTimeout)
		require.Equal(t, tc.want, status, tc.name)
		require.Less(t, took, readTimeout+5*time.Second, tc.name)
	}

	// An idle keep-alive connection is closed by the server.
	c, err := net.Dial("tcp", a.APIAddr())
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /v1/chains HTTP/1.1\r\nHost: moraine\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	start := time.Now()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	_, err = br.ReadByte()
	took := time.Since(start)
	t.Logf("idle keep-alive connection closed by the server after %s (--http.idle-timeout %s)", took, idleTimeout)
	require.ErrorIs(t, err, io.EOF)
	require.Less(t, took, idleTimeout+5*time.Second)
}
