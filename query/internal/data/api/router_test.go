package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/query/internal/server"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
)

func TestUnknownRoutesAndMethods(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.requireError("/v1/xyz", 404, "Cannot GET /v1/xyz")
	e.requireError("/v1/xyz?a=1", 404, "Cannot GET /v1/xyz?a=1")
	e.requireError("/", 404, "Cannot GET /")
	e.requireError("/v1/chains/43114/blocks/1/logs", 404, "Cannot GET /v1/chains/43114/blocks/1/logs")
	e.requireError("/v1/chains/", 404, "Cannot GET /v1/chains/")
	// A known path with another method: NestJS's 404, not a 405.
	for _, m := range []string{http.MethodPost, http.MethodDelete, http.MethodPut, http.MethodPatch} {
		code, raw := e.do(m, "/v1/chains")
		require.Equal(t, http.StatusNotFound, code)
		var b errBody
		require.NoError(t, json.Unmarshal(raw, &b))
		require.Equal(t, "Cannot "+m+" /v1/chains", b.Message)
	}
}

// series returns the value of a counter or the sample count of a
// histogram with the given labels.
func series(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			if m.Counter != nil {
				return m.GetCounter().GetValue()
			}
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

func TestPanicIsA500(t *testing.T) {
	e := newEnv(t)
	e.store.panic = true
	e.requireError("/v1/chains/43114/blocks", 500, "Internal server error")
	require.Equal(t, 1.0, series(t, e.reg, "moraine_query_http_requests_total",
		map[string]string{"route": "/v1/chains/:chainId/blocks", "method": "GET", "code": "500"}))
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	e.seed()
	// Pre-created at 0, the 5xx codes of every route included: a 5xx
	// ratio needs its numerator before the first error (issue 16).
	require.Equal(t, 0.0, series(t, e.reg, "moraine_query_http_requests_total",
		map[string]string{"route": "/v1/chains/:chainId/blocks/:blockId/transactions", "method": "GET", "code": "200"}))
	for _, r := range e.routes {
		for _, code := range []string{"400", "401", "403", "404", "429", "500", "503"} {
			require.Equal(t, 0.0, series(t, e.reg, "moraine_query_http_requests_total",
				map[string]string{"route": r.Template(), "method": r.Method, "code": code}), "%s %s", r.Key(), code)
		}
	}
	e.get("/v1/chains/43114/blocks/1", nil)
	e.get("/v1/chains/43114/blocks/2", nil)
	e.do(http.MethodGet, "/v1/chains/43114/blocks/99")
	e.do(http.MethodGet, "/nope")
	e.do("BREW", "/nope")
	require.Equal(t, 2.0, series(t, e.reg, "moraine_query_http_requests_total",
		map[string]string{"route": "/v1/chains/:chainId/blocks/:blockId", "method": "GET", "code": "200"}))
	require.Equal(t, 1.0, series(t, e.reg, "moraine_query_http_requests_total",
		map[string]string{"route": "/v1/chains/:chainId/blocks/:blockId", "method": "GET", "code": "404"}))
	require.Equal(t, 1.0, series(t, e.reg, "moraine_query_http_requests_total",
		map[string]string{"route": "unmatched", "method": "other", "code": "404"}))
	require.Equal(t, 3.0, series(t, e.reg, "moraine_query_http_request_duration_seconds",
		map[string]string{"route": "/v1/chains/:chainId/blocks/:blockId", "method": "GET"}))
}

func TestMiddlewareSeesRouteWeight(t *testing.T) {
	// The extension point for API keys and rate limits: middleware runs
	// after the weight is set and can abort with the usual error body.
	var weights []server.Weight
	e := newEnv(t, func(c *gin.Context) {
		weights = append(weights, server.RouteOf(c).Weight)
		if c.GetHeader("x-glacier-api-key") == "bad" {
			apierr.Write(c, apierr.New(http.StatusUnauthorized, "Unauthorized"))
		}
	})
	e.seed()
	for _, p := range []string{"/v1/chains", "/v1/chains/43114", "/v1/chains/43114/blocks", "/v1/chains/43114/blocks/1",
		"/v1/chains/43114/blocks/1/transactions", "/v1/blocks", "/v1/chains/allBlocks"} {
		require.Equal(t, http.StatusOK, e.get(p, nil), p)
	}
	require.Equal(t, []server.Weight{1, 1, 10, 10, 20, 20, 1}, weights)

	req, _ := http.NewRequest(http.MethodGet, "/v1/chains", nil)
	req.Header.Set("x-glacier-api-key", "bad")
	w := httptest.NewRecorder()
	e.router.ServeHTTP(w, req)
	require.Equal(t, http.StatusUnauthorized, w.Code)
	require.JSONEq(t, `{"message":"Unauthorized","statusCode":401,"error":"Unauthorized"}`, w.Body.String())
}

// customAfterParam is a path's last segment "{param}:method".
var customAfterParam = regexp.MustCompile(`\{(\w+)\}:\w+$`)

func TestOpenAPIMatchesRouter(t *testing.T) {
	// /api-json advertises exactly the data operations this router serves
	// (the webhook operations are registered by webhookapi; the app's
	// TestOpenAPIListsEveryRoute checks the whole service).
	e := newEnv(t)
	code, raw := e.do(http.MethodGet, "/api-json")
	require.Equal(t, http.StatusOK, code)
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	var spec []string
	for p, ms := range doc.Paths {
		if strings.HasPrefix(p, "/v1/webhooks") {
			continue
		}
		for m := range ms {
			// A custom method after a parameter is matched by the server
			// after gin (server.Route): gin's path ends in the parameter.
			gp := customAfterParam.ReplaceAllString(p, "{$1}")
			for _, param := range []string{"chainId", "blockId", "address", "txHash", "tokenId"} {
				gp = strings.ReplaceAll(gp, "{"+param+"}", ":"+param)
			}
			spec = append(spec, strings.ToUpper(m)+" "+gp)
		}
	}
	var served []string
	for _, r := range e.router.Routes() {
		if strings.HasPrefix(r.Path, "/v1/") && r.Method != http.MethodHead {
			// gin lists a colon registered as "\:" with or without its
			// backslash, depending on whether it has routed a request yet.
			served = append(served, r.Method+" "+strings.ReplaceAll(r.Path, `\`, ""))
		}
	}
	sort.Strings(spec)
	sort.Strings(served)
	require.Equal(t, served, spec)
}

func TestHeadAndCORS(t *testing.T) {
	e := newEnv(t)
	e.seed()
	srv := httptest.NewServer(e.router)
	defer srv.Close()
	resp, err := http.Head(srv.URL + "/v1/chains/43114/blocks")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, body)

	req := httptest.NewRequest(http.MethodOptions, "/v1/chains/43114/blocks?pageSize=1", nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "GET")
	req.Header.Set("Access-Control-Request-Headers", "x-glacier-api-key")
	w := httptest.NewRecorder()
	e.router.ServeHTTP(w, req)
	require.Equal(t, http.StatusNoContent, w.Code)
	require.Equal(t, "*", w.Header().Get("Access-Control-Allow-Origin"))
	require.Equal(t, "x-glacier-api-key", w.Header().Get("Access-Control-Allow-Headers"))

	req = httptest.NewRequest(http.MethodGet, "/v1/chains", nil)
	req.Header.Set("Origin", "https://app.example")
	w = httptest.NewRecorder()
	e.router.ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "*", w.Header().Get("Access-Control-Allow-Origin"))
}

// TestEscapesAreNotSeparators: routing uses the path as sent, as Express
// does, so an escaped slash stays inside its segment (issue 16: it routed
// /v1/chains/43112%2Fblocks as /v1/chains/43112/blocks).
func TestEscapesAreNotSeparators(t *testing.T) {
	e := newEnv(t)
	e.seed()
	badChain := []string{"chainId must be a decimal EVM chain id or a base58 blockchain id"}
	e.requireError("/v1/chains/43114%2Fblocks", 400, badChain)
	e.requireError("/v1/chains/43114%2fblocks/1", 404, "Cannot GET /v1/chains/43114%2fblocks/1")
	e.requireError("/v1/chains/43114/blocks%2F1", 404, "Cannot GET /v1/chains/43114/blocks%2F1")
	// Escapes of ordinary characters are still read as those characters.
	require.Equal(t, http.StatusOK, e.get("/v1/chains/%34%33%31%31%34/blocks/1", nil))
	var b evmBlock
	require.Equal(t, http.StatusOK, e.get("/v1/chains/43114/blocks/%31", &b))
	require.Equal(t, "1", b.BlockNumber)
}

// TestBadEscapesInTheQuery: a parameter whose value holds an invalid
// percent escape is validated as its raw text, as Express's qs keeps it,
// not dropped (issue 16: ?pageSize=%ZZ served the default page size).
func TestBadEscapesInTheQuery(t *testing.T) {
	e := newEnv(t)
	e.seed()
	e.requireError("/v1/chains/43114/blocks?pageSize=%ZZ", 400,
		[]string{"pageSize must not be greater than 100", "pageSize must not be less than 1", "pageSize must be an integer number"})
	e.requireError("/v1/blocks?pageSize=1&network=%E0%A4%A", 400,
		[]string{"network must be one of the following values: mainnet, fuji, testnet"})
	e.requireError("/v1/chains?network=main%net", 400,
		[]string{"network must be one of the following values: mainnet, fuji, testnet"})
	// The other parameters of the query are read as usual.
	var page listBlocksResponse
	require.Equal(t, http.StatusOK, e.get("/v1/chains/43114/blocks?x=%ZZ&pageSize=%32", &page))
	require.Len(t, page.Blocks, 2)
}
