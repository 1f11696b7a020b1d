package rpc

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/obs"
)

// Metrics are the JSON-RPC series of a process, shared by the clients and
// pools of all its chains (chain and node are labels; node is the name from
// the chains file, never the URL).
type Metrics struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	head        *prometheus.GaugeVec
	up          *prometheus.GaugeVec
	limit       *prometheus.GaugeVec
	inflight    *prometheus.GaugeVec
	failovers   *prometheus.CounterVec
	hedges      *prometheus.CounterVec
	unavailable *prometheus.CounterVec
}

// registered holds the Metrics of each registry: every pool of a process
// shares one set of series, however many packages build pools.
var registered sync.Map // prometheus.Registerer -> *Metrics

// NewMetrics registers the series on reg, once per registry: a second call
// with the same reg returns the first call's Metrics (nil: unregistered,
// for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		return newMetrics(nil)
	}
	if m, ok := registered.Load(reg); ok {
		return m.(*Metrics)
	}
	mu.Lock()
	defer mu.Unlock()
	if m, ok := registered.Load(reg); ok {
		return m.(*Metrics)
	}
	m := newMetrics(reg)
	registered.Store(reg, m)
	return m
}

var mu sync.Mutex

func newMetrics(reg prometheus.Registerer) *Metrics {
	f := obs.NewMetrics(reg, "rpc")
	return &Metrics{
		requests: f.CounterVec("requests_total",
			"JSON-RPC calls by node, method and outcome (ok, rpc_error, rate_limited, http_error, timeout, transport_error, bad_response).",
			"chain", "node", "method", "result"),
		duration: f.HistogramVec("request_duration_seconds",
			"Duration of JSON-RPC HTTP round trips; a batch mixing methods is method=\"batch\".",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}, "chain", "node", "method"),
		head: f.GaugeVec("node_head_block",
			"The newest block each node reports (eth_blockNumber, polled).", "chain", "node"),
		up: f.GaugeVec("node_up",
			"1 while the pool sends work to the node, 0 while it is cooling down after failures (its head poll takes it back).", "chain", "node"),
		limit: f.GaugeVec("node_concurrency_limit",
			"The adaptive limit of requests in flight to the node (lowered on 429s and rising latency).", "chain", "node"),
		inflight: f.GaugeVec("node_inflight_requests",
			"Requests in flight to the node.", "chain", "node"),
		failovers: f.CounterVec("failovers_total",
			"Requests sent again to another node after this node failed them, by the failure (the result labels).", "chain", "node", "reason"),
		hedges: f.CounterVec("hedges_total",
			"Hedged requests: sent (a copy to a second node after the first was slow) and won (the copy answered first).", "chain", "result"),
		unavailable: f.CounterVec("unavailable_total",
			"Calls the node could not answer for the block asked (pruned state, missing trie node, header not found).", "chain", "node"),
	}
}

// results are the values of the result label (resultLabel).
var results = []string{"ok", "rpc_error", "rate_limited", "http_error", "timeout", "transport_error", "bad_response"}

// Init pre-creates the series of the given methods at 0 for a chain's node,
// every result included: an error ratio (rules.yml's
// moraine:rpc_error_ratio:rate5m) has no numerator until an error series
// exists, and rate() cannot count the increase that creates a series, so
// without them the first errors would never alert.
func (m *Metrics) Init(chain, node string, methods ...string) {
	for _, meth := range methods {
		for _, r := range results {
			m.requests.WithLabelValues(chain, node, meth, r)
		}
		m.duration.WithLabelValues(chain, node, meth)
	}
	m.unavailable.WithLabelValues(chain, node)
	for _, r := range results[1:] {
		m.failovers.WithLabelValues(chain, node, r)
	}
	m.hedges.WithLabelValues(chain, "sent")
	m.hedges.WithLabelValues(chain, "won")
}
