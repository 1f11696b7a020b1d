package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
)

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := obs.NewMetrics(reg, "query")
	return &metrics{
		requests: f.CounterVec("http_requests_total",
			"HTTP requests by route template (\"unmatched\" for unknown routes), method and status code.", "route", "method", "code"),
		duration: f.HistogramVec("http_request_duration_seconds", "Time to answer an HTTP request, by route template and method.",
			[]float64{.001, .0025, .005, .0075, .01, .015, .02, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, "route", "method"),
	}
}

// errorCodes are the error statuses the spec lists for every operation
// that the service answers: 400, 401, 403, 404, 429, 500 (a bug) and 503
// (ClickHouse or Kafka cannot answer).
var errorCodes = []string{"400", "401", "403", "404", "429", "500", "503"}

// initRoute pre-creates the series of a route, its error codes included, so
// dashboards see 0, not nothing. A ratio of 5xx over all requests
// (rules.yml's moraine:query_http_5xx_ratio:rate5m, the dashboard's 4xx and
// 5xx ratios) has no numerator until an error series exists, and rate()
// cannot count the increase that creates a series: the first errors would
// never alert.
func (m *metrics) initRoute(route, method string) {
	m.requests.WithLabelValues(route, method, "200")
	for _, code := range errorCodes {
		m.requests.WithLabelValues(route, method, code)
	}
	m.duration.WithLabelValues(route, method)
}

// routeLabel names the request's route in metrics and logs: its Template,
// "/api-json" for the document, "unmatched" for an unknown route.
func routeLabel(c *gin.Context) string {
	if rt := RouteOf(c); rt.Path != "" {
		return rt.Template()
	}
	if p := c.FullPath(); p != "" {
		return p
	}
	return "unmatched"
}

var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

func (m *metrics) middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := routeLabel(c)
		method := c.Request.Method
		if !knownMethods[method] {
			method = "other" // bounded label values
		}
		m.requests.WithLabelValues(route, method, strconv.Itoa(c.Writer.Status())).Inc()
		m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
	}
}

// accessLog logs one line per request; 5xx with the cause, at warn level
// for 503 and error level for the rest.
func accessLog(logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		status := c.Writer.Status()
		attrs := []slog.Attr{
			slog.String("method", c.Request.Method),
			slog.String("route", routeLabel(c)),
			slog.String("path", c.Request.URL.Path),
			slog.Int("status", status),
			slog.Duration("duration", time.Since(start)),
			slog.Int("bytes", c.Writer.Size()),
			slog.String("client_ip", c.ClientIP()),
		}
		level := slog.LevelInfo
		switch {
		case status == http.StatusServiceUnavailable:
			level = slog.LevelWarn // an outage of ClickHouse: logged, not an error of ours
		case status >= 500:
			level = slog.LevelError
		}
		if err := c.Errors.Last(); err != nil && status >= 500 {
			attrs = append(attrs, slog.String("err", err.Err.Error()))
		}
		logger.LogAttrs(c.Request.Context(), level, "http request", attrs...)
	}
}

// recovery turns a handler panic into a logged 500 with the usual body.
func recovery(logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			r := recover()
			if r == nil {
				return
			}
			if r == http.ErrAbortHandler {
				panic(r)
			}
			logger.Error("panic in handler", "route", c.FullPath(), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			if c.Writer.Written() {
				c.Abort()
				return
			}
			apierr.Write(c, apierr.Internal(fmt.Errorf("panic: %v", r)))
		}()
		c.Next()
	}
}

// cors lets browsers call the API from any origin, as NestJS's enableCors()
// does: the API is public and authenticates with a header, never a cookie,
// so "*" exposes nothing. Preflights are answered here, before routing
// (gin runs this middleware for unmatched paths too).
func cors() gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.GetHeader("Origin") == "" {
			c.Next()
			return
		}
		h := c.Writer.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		if c.Request.Method == http.MethodOptions && c.GetHeader("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET,HEAD,PUT,PATCH,POST,DELETE")
			if req := c.GetHeader("Access-Control-Request-Headers"); req != "" {
				h.Set("Access-Control-Allow-Headers", req)
			}
			h.Set("Access-Control-Max-Age", "86400")
			h.Add("Vary", "Access-Control-Request-Headers")
			c.AbortWithStatus(http.StatusNoContent)
			return
		}
		c.Next()
	}
}

// keepBadEscapes makes a query parameter whose value (or name) holds an
// invalid percent escape ("?pageSize=%ZZ") arrive as its raw text, as the
// qs parser of Express does, instead of vanishing: net/url drops such a
// pair, so the parameter read as absent (its default) where NestJS
// validates "%ZZ" and answers 400. Pieces that decode are left alone.
func keepBadEscapes() gin.HandlerFunc {
	return func(c *gin.Context) {
		raw := c.Request.URL.RawQuery
		if !strings.Contains(raw, "%") {
			c.Next()
			return
		}
		if _, err := url.ParseQuery(raw); err == nil {
			c.Next()
			return
		}
		pieces := strings.Split(raw, "&")
		for i, p := range pieces {
			k, v, _ := strings.Cut(p, "=")
			if _, err := url.QueryUnescape(k); err != nil {
				k = strings.ReplaceAll(k, "%", "%25")
			}
			if _, err := url.QueryUnescape(v); err != nil {
				v = strings.ReplaceAll(v, "%", "%25")
			}
			if strings.Contains(p, "=") {
				pieces[i] = k + "=" + v
			} else {
				pieces[i] = k
			}
		}
		c.Request.URL.RawQuery = strings.Join(pieces, "&")
		c.Next()
	}
}
