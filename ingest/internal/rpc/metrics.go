package rpc

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/obs"
)

// Metrics are the client's Prometheus series, shared by the clients of all
// chains (the chain is a label).
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the series on reg (nil: unregistered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := obs.NewMetrics(reg, "ingest")
	return &Metrics{
		requests: f.CounterVec("rpc_requests_total",
			"JSON-RPC calls by method and outcome (ok, rpc_error, rate_limited, http_error, timeout, transport_error, bad_response).",
			"chain", "method", "result"),
		duration: f.HistogramVec("rpc_request_duration_seconds",
			"Duration of JSON-RPC HTTP round trips; a batch mixing methods is method=\"batch\".",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}, "chain", "method"),
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
