package app

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/process"
	"github.com/moraine-data/moraine/pkg/testenv"
)

func getJSON(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	return resp.StatusCode, m
}

// TestClickHouseDown: the service listens and answers before ClickHouse
// does: chains are listed as UNAVAILABLE, reads are 503 with the usual
// body, /healthz is up and /readyz says why it is not ready.
func TestClickHouseDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	ln.Close()

	dir := t.TempDir()
	chainsFile := filepath.Join(dir, "chains.json")
	require.NoError(t, os.WriteFile(chainsFile, []byte(testChains), 0o600))
	cfg := DefaultConfig()
	cfg.HTTPListenAddress, cfg.Ops.ListenAddress = "127.0.0.1:0", "127.0.0.1:0"
	cfg.ChainsFile = chainsFile
	cfg.ClickHouse.Addr = dead
	cfg.PageToken.Secret = "0123456789abcdef0123456789abcdef"
	cfg.ShutdownTimeout = time.Second
	a, err := New(cfg, Deps{Logger: testenv.Logger(t), Registry: prometheus.NewRegistry()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	wait := start(t, ctx, a)
	api, ops := "http://"+a.APIAddr(), "http://"+a.OpsAddr()

	code, body := getJSON(t, api+"/v1/chains")
	require.Equal(t, http.StatusOK, code)
	for _, c := range body["chains"].([]any) {
		require.Equal(t, "UNAVAILABLE", c.(map[string]any)["status"])
	}
	code, body = getJSON(t, api+"/v1/chains/43114/blocks")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, map[string]any{"message": "Chain data is temporarily unavailable", "statusCode": 503.0, "error": "Service Unavailable"}, body)
	code, _ = getJSON(t, api+"/v1/chains/43114/blocks/1")
	require.Equal(t, http.StatusServiceUnavailable, code)
	code, _ = getJSON(t, api+"/v1/blocks")
	require.Equal(t, http.StatusServiceUnavailable, code)
	// Validation and unknown chains do not need ClickHouse.
	code, _ = getJSON(t, api+"/v1/chains/1/blocks")
	require.Equal(t, http.StatusNotFound, code)

	code, _ = getJSON(t, ops+"/healthz")
	require.Equal(t, http.StatusOK, code)
	code, body = getJSON(t, ops+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body["failed"].(map[string]any)["clickhouse"], "not connected")

	// A stop while still connecting is clean.
	cancel()
	require.NoError(t, wait())
}

// start runs a until ctx ends and returns once its servers are bound; wait
// returns what Run returned.
func start(t *testing.T, ctx context.Context, a *App) (wait func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	for a.APIAddr() == "" {
		select {
		case err := <-done:
			t.Fatalf("Run returned before binding: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return func() error { return <-done }
}

func TestFlags(t *testing.T) {
	t.Setenv("MORAINE_API_PAGE_TOKEN_SECRET", "0123456789abcdef0123456789abcdef")
	t.Setenv("MORAINE_CHAINS_STALE_AFTER", "1m")
	var cfg Config
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	require.NoError(t, process.ParseWithEnv(fs, []string{"--http.listen-address=:9999", "--http.trusted-proxies=10.0.0.1, 10.0.0.0/8"}, "MORAINE"))
	require.NoError(t, cfg.Validate())
	require.Equal(t, ":9999", cfg.HTTPListenAddress)
	require.Equal(t, "127.0.0.1:9103", cfg.Ops.ListenAddress)
	require.Equal(t, time.Minute, cfg.API.ChainStaleAfter)
	require.Equal(t, []string{"10.0.0.1", "10.0.0.0/8"}, cfg.TrustedProxyList)
	require.Equal(t, "0123456789abcdef0123456789abcdef", cfg.PageToken.Secret)
	require.Equal(t, 24*time.Hour, cfg.PageToken.TTL)
	require.Equal(t, 5*time.Second, cfg.Store.QueryTimeout)
	require.Equal(t, obs.DefaultHTTPConfig(), cfg.HTTP)
	require.False(t, cfg.Webhooks.Webhooks.AllowPrivateTargets)
	for _, name := range []string{"http.listen-address", "ops.listen-address", "admin.listen-address", "chains.file", "clickhouse.addr",
		"shutdown.timeout", "log.level", "log.format", "api.page-token-secret", "api.page-token-secret-file",
		"api.page-token-ttl", "query.timeout", "query.head-cache-ttl", "chains.stale-after",
		"http.read-header-timeout", "http.read-timeout", "http.write-timeout", "http.idle-timeout", "http.max-header-bytes",
		"http.max-connections", "delivery.allow-private-targets", "webhooks.url-resolve-timeout"} {
		require.NotNil(t, fs.Lookup(name), name)
	}

	bad := DefaultConfig()
	bad.PageToken.Secret = "short"
	bad.Store.QueryTimeout = 0
	require.Error(t, bad.Validate())
}
