package watchlist

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	applied   *prometheus.CounterVec
	malformed prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, t *Table) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		applied: f.NewCounterVec(prometheus.CounterOpts{Namespace: "moraine", Subsystem: "processor",
			Name: "watchlist_records_applied_total", Help: "Address-watch records applied to the watch table, by kind."},
			[]string{"kind"}),
		malformed: f.NewCounter(prometheus.CounterOpts{Namespace: "moraine", Subsystem: "processor",
			Name: "watchlist_malformed_records_total", Help: "Address-watch records that could not be used (their key was dropped)."}),
	}
	for _, k := range []string{"webhook", "address", "account", "tombstone"} {
		m.applied.WithLabelValues(k)
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "moraine", Subsystem: "processor",
		Name: "watchlist_addresses", Help: "Watched (webhook, address) entries in the watch table."},
		func() float64 { return float64(t.Addresses()) })
	f.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "moraine", Subsystem: "processor",
		Name: "watchlist_webhooks", Help: "Webhooks whose settings the watch table holds (any status)."},
		func() float64 { return float64(t.Webhooks()) })
	return m
}
