package rpc

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics are the client's Prometheus series, shared by the clients of all
// chains (the chain is a label).
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the series on reg (nil: unregistered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: "moraine", Subsystem: "ingest", Name: "rpc_requests_total",
			Help: "JSON-RPC calls by method and outcome (ok, rpc_error, rate_limited, http_error, timeout, transport_error, bad_response).",
		}, []string{"chain", "method", "result"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "moraine", Subsystem: "ingest", Name: "rpc_request_duration_seconds",
			Help:    "Duration of JSON-RPC HTTP round trips; a batch mixing methods is method=\"batch\".",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"chain", "method"}),
	}
}

// results are the values of the result label (resultLabel).
var results = []string{"ok", "rpc_error", "rate_limited", "http_error", "timeout", "transport_error", "bad_response"}

// Init pre-creates the series of the given methods at 0 for a chain, every
// result included: an error ratio (rules.yml's
// moraine:ingest_rpc_error_ratio:rate5m) has no numerator until an error
// series exists, and rate() cannot count the increase that creates a
// series, so without them the first errors would never alert.
func (m *Metrics) Init(chain string, methods ...string) {
	for _, meth := range methods {
		for _, r := range results {
			m.requests.WithLabelValues(chain, meth, r)
		}
		m.duration.WithLabelValues(chain, meth)
	}
}
