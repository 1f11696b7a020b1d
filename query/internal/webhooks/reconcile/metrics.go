package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/obs"
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
	f := obs.NewMetrics(reg, "query")
	m := &metrics{
		pending: f.Gauge("watch_pending_versions",
			"Changes this instance failed to publish and the reconciler has not yet covered."),
		runs: f.CounterVec("watch_reconcile_runs_total",
			"Reconciliation passes by mode (incremental, full) and result (ok, error).", "mode", "result"),
		runDuration: f.HistogramVec("watch_reconcile_duration_seconds", "Time of one reconciliation pass, by mode.",
			prometheus.ExponentialBuckets(0.005, 3, 10), "mode"),
		republished: f.CounterVec("watch_republished_total",
			"Records the reconciler published because the topic disagreed with ClickHouse, by kind (webhook, address, tombstone, account, phantom).",
			"kind"),
		topicKeys: f.Gauge("watch_topic_keys", "Keys of the address-watch topic known to the reconciler."),
		phantomsRefused: f.Counter("watch_phantom_tombstones_refused_total",
			"Full passes that found too many topic keys unknown to ClickHouse to delete them (a likely misconfiguration)."),
		ready: f.Gauge("watch_ready", "1 once the first full reconciliation finished."),
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
