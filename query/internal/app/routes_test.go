package app

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/server"
	"github.com/moraine-data/moraine/query/internal/server/openapi"
)

// newTestApp builds the service (no I/O) on the test chains.
func newTestApp(t *testing.T, edit func(*Config)) *App {
	t.Helper()
	chainsFile := filepath.Join(t.TempDir(), "chains.json")
	require.NoError(t, os.WriteFile(chainsFile, []byte(testChains), 0o600))
	cfg := DefaultConfig()
	cfg.HTTPListenAddress, cfg.Ops.ListenAddress = "127.0.0.1:0", "127.0.0.1:0"
	cfg.ChainsFile = chainsFile
	cfg.PageToken.Secret = "0123456789abcdef0123456789abcdef"
	cfg.ShutdownTimeout = time.Second
	if edit != nil {
		edit(&cfg)
	}
	a, err := New(cfg, Deps{Logger: testenv.Logger(t), Registry: prometheus.NewRegistry()})
	require.NoError(t, err)
	return a
}

// TestRouteTable: the router serves exactly the route table, HEAD for every
// GET, and each route's weight is the hosted spec's x-execution-weight
// where the spec has one (the OpenAPI side: TestOpenAPIListsEveryRoute).
func TestRouteTable(t *testing.T) {
	a := newTestApp(t, nil)
	want := map[string]bool{"GET /api-json": true}
	// "/tokens/:tokenId:reindex" is served by gin as the parameter's route.
	customAfterParam := regexp.MustCompile(`(/:[A-Za-z]+):[A-Za-z]+$`)
	for _, rt := range a.routes {
		path := customAfterParam.ReplaceAllString(rt.Template(), "$1")
		want[rt.Method+" "+path] = true
		if rt.Method == http.MethodGet {
			want["HEAD "+path] = true
		}
	}
	got := map[string]bool{}
	for _, r := range a.router.Routes() {
		got[r.Method+" "+strings.ReplaceAll(r.Path, `\`, "")] = true
	}
	require.Equal(t, want, got)

	hosted, err := openapi.HostedWeights()
	require.NoError(t, err)
	for _, rt := range a.routes {
		if w, ok := hosted[rt.Operation]; ok && rt.Extension == nil {
			require.Equal(t, w, rt.Weight.String(), "%s (%s)", rt.Key(), rt.Operation)
		}
	}
}

// TestRouteWeights: what a request costs, through the router, the way the
// rate limiter reads it (server.RouteOf). Requests no route serves cost the
// lowest weight.
func TestRouteWeights(t *testing.T) {
	a := newTestApp(t, nil)
	var charged server.Weight
	r, err := server.New(a.routes, server.Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(),
		Middleware: []gin.HandlerFunc{func(c *gin.Context) {
			charged = server.RouteOf(c).Weight
			c.AbortWithStatus(http.StatusNoContent)
		}}})
	require.NoError(t, err)
	for _, tc := range []struct {
		method, path string
		want         server.Weight
	}{
		{"GET", "/v1/chains", 1},
		{"GET", "/v1/chains/43114", 1},
		{"GET", "/v1/chains/allBlocks", 1},
		{"GET", "/v1/chains/43114/blocks", 10},
		{"HEAD", "/v1/chains/43114/blocks", 10},
		{"GET", "/v1/chains/43114/blocks/12", 10},
		{"GET", "/v1/chains/43114/blocks/12/transactions", 20},
		{"GET", "/v1/blocks", 20},
		{"GET", "/v1/chains/allTransactions", 1},
		{"GET", "/v1/chains/address/0xabc", 1},
		{"GET", "/v1/address/0xabc/chains", 1},
		{"GET", "/v1/transactions", 20},
		{"GET", "/v1/chains/43114/addresses/0xabc/transactions:listErc20", 20},
		{"GET", "/v1/chains/43114/addresses/0xabc/transactions%3AlistErc20", 20},
		{"GET", "/v1/chains/43114/addresses/0xabc", 20},
		{"POST", "/v1/webhooks", 20},
		{"GET", "/v1/webhooks", 10},
		{"GET", "/v1/webhooks/abc", 10},
		{"PATCH", "/v1/webhooks/abc", 20},
		{"DELETE", "/v1/webhooks/abc", 20},
		{"GET", "/v1/webhooks/abc/addresses", 20},
		{"PATCH", "/v1/webhooks/abc/addresses", 20},
		{"DELETE", "/v1/webhooks/abc/addresses", 20},
		{"POST", "/v1/webhooks:generateOrRotateSharedSecret", 20},
		{"GET", "/v1/webhooks:getSharedSecret", 10},
		{"GET", "/v1/webhooks/abc/deliveries", 10},
		{"GET", "/v1/unknown/route", 1},
		{"POST", "/v1/chains", 1},
	} {
		charged = -1
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		require.Equal(t, http.StatusNoContent, w.Code, "%s %s", tc.method, tc.path)
		require.Equal(t, tc.want, charged, "%s %s", tc.method, tc.path)
	}
}

// TestEmbeddedSpecIsShared: /api-json is built from a copy of the hosted
// spec; it must be shared/spec's.
func TestEmbeddedSpecIsShared(t *testing.T) {
	const name = "glacier_openapi_2026-01.json.zst"
	var shared []byte
	dir, err := os.Getwd()
	require.NoError(t, err)
	// ../shared beside the clone: walk up from query/internal/app.
	for range 6 {
		if shared, err = os.ReadFile(filepath.Join(dir, "..", "shared", "spec", name)); err == nil {
			break
		}
		dir = filepath.Dir(dir)
	}
	require.NoError(t, err, "shared/spec/%s not found: clone moraine beside ../shared", name)
	embedded, err := os.ReadFile(filepath.Join("..", "server", "openapi", name))
	require.NoError(t, err)
	require.True(t, bytes.Equal(shared, embedded), "query/internal/server/openapi's copy of the hosted spec differs from shared/spec's")
}

// TestAccessOnEveryAnswer: a keyless request to a route that needs a key
// is refused 401 before it is charged (it was charged, so an IP over its
// budget got 429 for what is a missing key), and an unknown route's 404
// carries the rate-limit headers like every other answer.
func TestAccessOnEveryAnswer(t *testing.T) {
	a := newTestApp(t, func(c *Config) {
		plans := filepath.Join(t.TempDir(), "plans.json")
		require.NoError(t, os.WriteFile(plans, []byte(`{"plans":{"unauthenticated":{"cuPerMinute":15}}}`), 0o600))
		c.Plans.File = plans
	})
	do := func(method, path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		a.router.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		return w
	}
	var body struct {
		Message    any    `json:"message"`
		StatusCode int    `json:"statusCode"`
		Error      string `json:"error"`
	}
	w := do(http.MethodGet, "/v1/nothing-here")
	require.Equal(t, http.StatusNotFound, w.Code)
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	require.Equal(t, "Cannot GET /v1/nothing-here", body.Message)
	require.Equal(t, "15;w=60, 1200000;w=86400", w.Header().Get("ratelimit-policy"))
	require.Equal(t, "14", w.Header().Get("ratelimit-remaining"))
	// Spend the rest of the minute's budget (14 CU) on unknown routes.
	for range 14 {
		require.Equal(t, http.StatusNotFound, do(http.MethodGet, "/v1/nothing-here").Code)
	}
	w = do(http.MethodGet, "/v1/nothing-here")
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Regexp(t, regexp.MustCompile(`^[0-9]+$`), w.Header().Get("retry-after"))
	// Out of budget, a keyless webhook request is still told what is wrong.
	for _, p := range []string{"/v1/webhooks", "/v1/webhooks:getSharedSecret", "/v1/webhooks/abc/deliveries"} {
		w = do(http.MethodGet, p)
		require.Equal(t, http.StatusUnauthorized, w.Code, p)
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
		require.Equal(t, "Unauthorized", body.Message)
	}
}
