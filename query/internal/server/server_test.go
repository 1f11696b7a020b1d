package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/server/openapi"
)

// echo answers with the operation and the parameters it was called with.
func echo(c *gin.Context) {
	var b strings.Builder
	b.WriteString(RouteOf(c).Operation)
	for _, p := range c.Params {
		b.WriteString(" " + p.Key + "=" + p.Value)
	}
	c.String(http.StatusOK, b.String())
}

// ext is a stand-in extension document.
var ext = &openapi.Extension{Operation: `{"summary": "test", "responses": {"200": {"description": "ok"}}}`}

func TestCustomMethods(t *testing.T) {
	routes := []Route{
		{Method: http.MethodGet, Path: "/v1/chains/{chainId}", Operation: "getChainInfo", Weight: WeightFree, Handler: echo},
		{Method: http.MethodGet, Path: "/v1/webhooks:getSharedSecret", Operation: "getSharedSecret", Weight: WeightSmall, Access: Account, Handler: echo},
		{Method: http.MethodGet, Path: "/v1/webhooks/{id}", Operation: "getWebhook", Weight: WeightSmall, Access: Account, Handler: echo},
		// A custom method after a parameter, with and without a plain
		// route of the same method beside it.
		{Method: http.MethodGet, Path: "/v1/webhooks/{id}:peek", Operation: "peekWebhook", Weight: WeightSmall, Access: Account, Extension: ext, Handler: echo},
		{Method: http.MethodPost, Path: "/v1/webhooks/{id}:replay", Operation: "replayWebhook", Weight: WeightMedium, Access: Account, Extension: ext, Handler: echo},
		{Method: http.MethodPost, Path: "/v1/webhooks/{id}:cancel", Operation: "cancelWebhook", Weight: WeightMedium, Access: Account, Extension: ext, Handler: echo},
	}
	var seen []Route
	r, err := New(routes, Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(),
		Middleware: []gin.HandlerFunc{func(c *gin.Context) { seen = append(seen, RouteOf(c)) }}})
	require.NoError(t, err)
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/v1/chains/43114", 200, "getChainInfo chainId=43114"},
		// The recorder keeps a HEAD answer's body; net/http drops it.
		{"HEAD", "/v1/chains/43114", 200, "getChainInfo chainId=43114"},
		{"GET", "/v1/webhooks:getSharedSecret", 200, "getSharedSecret"},
		{"GET", "/v1/webhooks%3AgetSharedSecret", 200, "getSharedSecret"},
		{"GET", "/v1/webhooks/abc", 200, "getWebhook id=abc"},
		{"GET", "/v1/webhooks/abc:peek", 200, "peekWebhook id=abc"},
		{"GET", "/v1/webhooks/abc%3Apeek", 200, "peekWebhook id=abc"},
		{"GET", "/v1/webhooks/abc:other", 200, "getWebhook id=abc:other"},
		{"POST", "/v1/webhooks/abc:replay", 200, "replayWebhook id=abc"},
		{"POST", "/v1/webhooks/abc:cancel", 200, "cancelWebhook id=abc"},
		// A custom method needs a parameter before it, and POST has no
		// plain route here.
		{"POST", "/v1/webhooks/:replay", 404, `{"message":"Cannot POST /v1/webhooks/:replay","statusCode":404,"error":"Not Found"}`},
		{"POST", "/v1/webhooks/abc", 404, `{"message":"Cannot POST /v1/webhooks/abc","statusCode":404,"error":"Not Found"}`},
		{"PUT", "/v1/webhooks/abc", 404, `{"message":"Cannot PUT /v1/webhooks/abc","statusCode":404,"error":"Not Found"}`},
	} {
		seen = nil
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		require.Equal(t, tc.code, w.Code, "%s %s", tc.method, tc.path)
		require.Equal(t, tc.body, w.Body.String(), "%s %s", tc.method, tc.path)
		// The middleware always ran, knowing the route (Unmatched for 404s).
		require.Len(t, seen, 1, "%s %s", tc.method, tc.path)
		if tc.code == 404 {
			require.Equal(t, Unmatched.Weight, seen[0].Weight)
			require.Empty(t, seen[0].Operation)
		}
	}
}

func TestInconsistentTables(t *testing.T) {
	ok := Route{Method: http.MethodGet, Path: "/v1/chains", Operation: "supportedChains", Weight: WeightFree, Handler: echo}
	for _, tc := range []struct {
		name   string
		routes []Route
		err    string
	}{
		{"twice", []Route{ok, ok}, "declared twice"},
		{"no handler", []Route{{Method: "GET", Path: "/v1/chains", Operation: "supportedChains", Weight: WeightFree}}, "no handler"},
		{"no operation", []Route{{Method: "GET", Path: "/v1/chains", Weight: WeightFree, Handler: echo}}, "no operation"},
		{"odd weight", []Route{{Method: "GET", Path: "/v1/chains", Operation: "supportedChains", Weight: 7, Handler: echo}}, "none of the spec's"},
		{"outside /v1", []Route{{Method: "GET", Path: "/chains", Operation: "supportedChains", Weight: WeightFree, Handler: echo}}, "under /v1/"},
		{"not hosted", []Route{{Method: "GET", Path: "/v1/chains/{chainId}/logs", Operation: "listLogs", Weight: WeightFree, Handler: echo}}, "not in the hosted spec"},
		{"hosted op elsewhere", []Route{{Method: "GET", Path: "/v1/chains/{chainId}/logs", Operation: "supportedChains", Weight: WeightFree, Handler: echo}}, "not in the hosted spec"},
		{"extension with a hosted id", []Route{{Method: "GET", Path: "/v1/chains/{chainId}/logs", Operation: "supportedChains", Weight: WeightFree, Extension: ext, Handler: echo}}, "hosted operation's id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.routes, Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry()})
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestTemplate(t *testing.T) {
	for path, want := range map[string]string{
		"/v1/chains/{chainId}/blocks":                                              "/v1/chains/:chainId/blocks",
		"/v1/webhooks:getSharedSecret":                                             "/v1/webhooks:getSharedSecret",
		"/v1/chains/{chainId}/addresses/{address}/transactions:listErc20":          "/v1/chains/:chainId/addresses/:address/transactions:listErc20",
		"/v1/chains/{chainId}/nfts/collections/{address}/tokens/{tokenId}:reindex": "/v1/chains/:chainId/nfts/collections/:address/tokens/:tokenId:reindex",
	} {
		require.Equal(t, want, Route{Path: path}.Template(), path)
	}
}

// TestSingleValuedQuery: a parameter given twice or with brackets is a 400
// that names it, not its first value (the audit of issue 27 found
// status[]=failed and pageSize=5&pageSize=500 answered as status=failed and
// pageSize=5). The check runs after the shared middleware and before the
// handler.
func TestSingleValuedQuery(t *testing.T) {
	routes := []Route{{Method: http.MethodGet, Path: "/v1/chains/{chainId}", Operation: "getChainInfo", Weight: WeightFree, Handler: echo}}
	charged := 0
	r, err := New(routes, Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(),
		Middleware: []gin.HandlerFunc{func(*gin.Context) { charged++ }}})
	require.NoError(t, err)
	for _, tc := range []struct {
		query string
		code  int
		body  string
	}{
		{"pageSize=5", 200, "getChainInfo chainId=1"},
		{"pageSize=5&pageToken=x", 200, "getChainInfo chainId=1"},
		{"pageSize=5&pageSize=500", 400, `{"message":["pageSize must be given once (it was given 2 times)"],"statusCode":400,"error":"Bad Request"}`},
		{"status[]=failed", 400, `{"message":["status[] is not a parameter: give status once, as status=value (brackets are not supported)"],"statusCode":400,"error":"Bad Request"}`},
		{"status%5B%5D=failed", 400, `{"message":["status[] is not a parameter: give status once, as status=value (brackets are not supported)"],"statusCode":400,"error":"Bad Request"}`},
		{"status[0]=failed&a=1&a=2", 400, `{"message":["a must be given once (it was given 2 times)","status[0] is not a parameter: give status once, as status=value (brackets are not supported)"],"statusCode":400,"error":"Bad Request"}`},
		{"x]=1", 400, `{"message":["x] is not a parameter: give x] once, as x]=value (brackets are not supported)"],"statusCode":400,"error":"Bad Request"}`},
	} {
		charged = 0
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/chains/1?"+tc.query, nil))
		require.Equal(t, tc.code, w.Code, tc.query)
		require.Equal(t, tc.body, w.Body.String(), tc.query)
		require.Equal(t, 1, charged, tc.query)
	}
}
