// Package server is the query service's HTTP layer: it turns the route
// table (every Route of the data API, the webhook API and the service's
// other families, each declared once by the package that serves it) into
// the gin engine, and serves /api-json, the OpenAPI document built from the
// same table (package openapi).
//
// What it does for every route, so no family does it again:
//
//   - registers it, and HEAD for every GET (Express answers HEAD for every
//     GET route; net/http drops the body);
//   - records the Route in the request (RouteOf) before the shared
//     middleware runs: access control charges its Weight and applies its
//     Access rule from there, and usage accounting names it by its
//     Operation;
//   - answers an unknown route as NestJS does, 404 "Cannot GET /x" in the
//     error body, never a 405, after the same middleware (rate-limit headers
//     included) under the Unmatched route;
//   - refuses a query string that gives a parameter more than one value
//     (repeated or bracketed names: 400), after the shared middleware, so
//     the 400 is charged and carries the rate-limit headers like any other;
//   - metrics, access log, panic recovery, CORS, and the Express reading of
//     paths and query strings (below).
//
// Requests are read as Express reads them: routing uses the path as sent,
// so an escaped slash stays inside its segment (/v1/chains/43112%2Fblocks
// is chain "43112/blocks"), and a query value with an invalid percent
// escape is validated as its raw text (?pageSize=%ZZ is a 400, not the
// default).
//
// # Metrics
//
//	moraine_query_http_requests_total{route,method,code}        counter; route is the route's Template ("unmatched" for unknown routes);
//	                                                             every route's 400, 401, 403, 404, 429, 500 and 503 exist at 0 from start-up
//	moraine_query_http_request_duration_seconds{route,method}   histogram
package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/query/internal/server/apierr"
	"github.com/moraine-data/moraine/query/internal/server/openapi"
)

func init() {
	// Release mode once, before any engine exists: SetMode writes a global.
	gin.SetMode(gin.ReleaseMode)
}

// Deps are the server's collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// TrustedProxies are the proxies whose X-Forwarded-For is believed for
	// the client IP (none by default).
	TrustedProxies []string
	// Middleware runs on every request to a route of the table and on every
	// unmatched request, after the route is known (RouteOf) and before its
	// handler: access control (keys, plans, rate limits) and usage
	// accounting. It aborts with apierr.Write.
	Middleware []gin.HandlerFunc
}

// Engine is the API's HTTP handler: gin's engine, which tests can ask for
// its routes, behind the reading of paths that gin leaves to its caller.
type Engine struct{ *gin.Engine }

// ServeHTTP routes a colon sent escaped ("/v1/webhooks%3AgetSharedSecret")
// as the colon it stands for: gin routes on the path as sent (so that an
// escaped slash stays inside its segment, as in Express), and no parameter
// of the API holds a colon, so a client whose URL builder escapes the
// custom method's colon reaches the same route.
func (e *Engine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if raw := r.URL.RawPath; raw != "" && strings.Contains(raw, "%3") {
		raw = strings.ReplaceAll(strings.ReplaceAll(raw, "%3A", ":"), "%3a", ":")
		if raw != r.URL.RawPath {
			u := *r.URL
			u.RawPath = raw
			r2 := *r
			r2.URL = &u
			r = &r2
		}
	}
	e.Engine.ServeHTTP(w, r)
}

// New builds the engine that serves routes. It fails when the table is
// inconsistent: a route declared twice, without an operation or handler,
// with a weight the spec does not name, or (package openapi) a hosted
// operation that is not the hosted spec's at that path.
func New(routes []Route, d Deps) (*Engine, error) {
	if d.Logger == nil || d.Registerer == nil {
		return nil, errors.New("server: Deps.Logger and Registerer are required")
	}
	if err := check(routes); err != nil {
		return nil, err
	}
	doc, err := openapi.Build(Operations(routes))
	if err != nil {
		return nil, err
	}
	r := gin.New()
	// Express (NestJS) answers a known path with an unknown method as an
	// unknown route: 404 "Cannot POST /v1/chains", never 405. No
	// redirects either: a client gets the answer for what it asked.
	r.HandleMethodNotAllowed = false
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	// Route on the path as sent, as Express does: an escaped slash is part
	// of a segment (/v1/chains/43112%2Fblocks is chain "43112/blocks", a
	// 400), not a separator. Parameters are unescaped after matching.
	r.UseRawPath = true
	r.UnescapePathValues = true
	if err := r.SetTrustedProxies(d.TrustedProxies); err != nil {
		return nil, fmt.Errorf("server: trusted proxies: %w", err)
	}
	m := newMetrics(d.Registerer)
	r.Use(m.middleware(), accessLog(d.Logger), recovery(d.Logger), cors(), keepBadEscapes())

	chain := func(resolve gin.HandlerFunc) []gin.HandlerFunc {
		out := make([]gin.HandlerFunc, 0, len(d.Middleware)+2)
		out = append(out, resolve)
		out = append(out, d.Middleware...)
		return append(out, invoke)
	}
	for _, g := range groups(routes) {
		h := chain(g.resolve)
		r.Handle(g.method, g.path, h...)
		if g.method == http.MethodGet {
			r.Handle(http.MethodHead, g.path, h...)
		}
	}
	for _, rt := range routes {
		m.initRoute(rt.Template(), rt.Method)
		if rt.Method == http.MethodGet {
			m.initRoute(rt.Template(), http.MethodHead)
		}
	}
	r.NoRoute(chain(func(c *gin.Context) { c.Set(routeKey, &Unmatched) })...)
	r.GET("/api-json", func(c *gin.Context) {
		c.Data(http.StatusOK, "application/json; charset=utf-8", doc)
	})
	m.initRoute("/api-json", http.MethodGet)
	return &Engine{r}, nil
}

// Operations is what the OpenAPI document needs of routes.
func Operations(routes []Route) []openapi.Operation {
	out := make([]openapi.Operation, len(routes))
	for i, rt := range routes {
		out[i] = openapi.Operation{
			Method: rt.Method, Path: rt.Path, ID: rt.Operation, Weight: rt.Weight.String(),
			KeyRequired: rt.Access == Account, Extension: rt.Extension, ExtraParameters: rt.ExtraParameters,
			Properties: rt.Properties,
		}
	}
	return out
}

// check refuses an inconsistent table.
func check(routes []Route) error {
	seen := map[string]bool{}
	ops := map[string]bool{}
	for _, rt := range routes {
		switch {
		case !methods[rt.Method]:
			return fmt.Errorf("server: %s: unknown method", rt.Key())
		case !strings.HasPrefix(rt.Path, "/v1/"):
			return fmt.Errorf("server: %s: API routes live under /v1/", rt.Key())
		case rt.Operation == "":
			return fmt.Errorf("server: %s: no operation", rt.Key())
		case rt.Handler == nil:
			return fmt.Errorf("server: %s: no handler", rt.Key())
		case rt.Weight.String() == "":
			return fmt.Errorf("server: %s: weight %d is none of the spec's", rt.Key(), rt.Weight)
		case seen[rt.Key()]:
			return fmt.Errorf("server: %s is declared twice", rt.Key())
		case ops[rt.Operation]:
			return fmt.Errorf("server: operation %s is declared twice", rt.Operation)
		}
		seen[rt.Key()] = true
		ops[rt.Operation] = true
	}
	return nil
}

// group is the routes that gin sees as one: the same method and gin path,
// told apart by the custom method their parameter ends with
// ("/tokens/{tokenId}" and "/tokens/{tokenId}:reindex").
type group struct {
	method, path string
	param        string
	plain        *Route
	custom       []Route
	suffixes     []string
}

func groups(routes []Route) []*group {
	var out []*group
	byPath := map[string]*group{}
	for _, rt := range routes {
		rt.template = rt.Template()
		path, param, suffix := rt.ginPath()
		k := rt.Method + " " + path
		g := byPath[k]
		if g == nil {
			g = &group{method: rt.Method, path: path}
			byPath[k] = g
			out = append(out, g)
		}
		if suffix == "" {
			rt := rt
			g.plain = &rt
			continue
		}
		g.param = param
		g.custom = append(g.custom, rt)
		g.suffixes = append(g.suffixes, suffix)
	}
	return out
}

// resolve records the route a request is for. A parameter that ends in a
// custom method's suffix goes to that method with the suffix cut off;
// otherwise to the plain route, or to none (404).
func (g *group) resolve(c *gin.Context) {
	if g.param != "" {
		v := c.Param(g.param)
		for i, s := range g.suffixes {
			if len(v) > len(s) && strings.HasSuffix(v, s) {
				for j := range c.Params {
					if c.Params[j].Key == g.param {
						c.Params[j].Value = v[:len(v)-len(s)]
					}
				}
				c.Set(routeKey, &g.custom[i])
				return
			}
		}
	}
	if g.plain != nil {
		c.Set(routeKey, g.plain)
		return
	}
	c.Set(routeKey, &Unmatched)
}

// invoke runs the handler of the request's route, or answers 404. A query
// string that gives a parameter more than one value is a 400 before the
// handler reads any of it (singleValued).
func invoke(c *gin.Context) {
	if h := RouteOf(c).Handler; h != nil {
		if msgs := singleValued(c.Request.URL.Query()); msgs != nil {
			apierr.Write(c, apierr.Validation(msgs...))
			return
		}
		h(c)
		return
	}
	apierr.Write(c, apierr.NotFound(fmt.Sprintf("Cannot %s %s", c.Request.Method, c.Request.URL.RequestURI())))
}
