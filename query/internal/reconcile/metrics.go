package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	pending         prometheus.Gauge
	runs            *prometheus.CounterVec
	runDuration     *prometheus.HistogramVec
	republished     *prometheus.CounterVec
	topicKeys       prometheus.Gauge
	ready           prometheus.Gauge
	phantomsRefused prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		pending: f.NewGauge(prometheus.GaugeOpts{
			Namespace: "moraine", Subsystem: "query", Name: "watch_pending_versions",
			Help: "Changes this instance failed to publish and the reconciler has not yet covered.",
		}),
		runs: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: "moraine", Subsystem: "query", Name: "watch_reconcile_runs_total",
			Help: "Reconciliation passes by mode (incremental, full) and result (ok, error).",
		}, []string{"mode", "result"}),
		runDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "moraine", Subsystem: "query", Name: "watch_reconcile_duration_seconds",
			Help:    "Time of one reconciliation pass, by mode.",
			Buckets: prometheus.ExponentialBuckets(0.005, 3, 10),
		}, []string{"mode"}),
		republished: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: "moraine", Subsystem: "query", Name: "watch_republished_total",
			Help: "Records the reconciler published because the topic disagreed with ClickHouse, by kind (webhook, address, tombstone, account, phantom).",
		}, []string{"kind"}),
		topicKeys: f.NewGauge(prometheus.GaugeOpts{
			Namespace: "moraine", Subsystem: "query", Name: "watch_topic_keys",
			Help: "Keys of the address-watch topic known to the reconciler.",
		}),
		phantomsRefused: f.NewCounter(prometheus.CounterOpts{
			Namespace: "moraine", Subsystem: "query", Name: "watch_phantom_tombstones_refused_total",
			Help: "Full passes that found too many topic keys unknown to ClickHouse to delete them (a likely misconfiguration).",
		}),
		ready: f.NewGauge(prometheus.GaugeOpts{
			Namespace: "moraine", Subsystem: "query", Name: "watch_ready",
			Help: "1 once the first full reconciliation finished.",
		}),
	}
	for _, mode := range []string{"incremental", "full"} {
		m.runs.WithLabelValues(mode, "ok")
		m.runs.WithLabelValues(mode, "error")
		m.runDuration.WithLabelValues(mode)
	}
	for _, k := range []string{"webhook", "address", "tombstone", "account", "phantom"} {
		m.republished.WithLabelValues(k)
	}
	return m
}
