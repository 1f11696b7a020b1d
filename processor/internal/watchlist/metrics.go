package watchlist

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/obs"
)

type metrics struct {
	applied   *prometheus.CounterVec
	malformed prometheus.Counter
	stale     prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, t *Table) *metrics {
	f := obs.NewMetrics(reg, "processor")
	m := &metrics{
		applied: f.CounterVec("watchlist_records_applied_total", "Address-watch records applied to the watch table, by kind.", "kind"),
		malformed: f.Counter("watchlist_malformed_records_total",
			"Address-watch records that could not be used (their key was dropped)."),
		stale: f.Counter("watchlist_stale_records_total",
			"Address-watch records dropped because the table had seen a newer version of their key (pkg/watch Versions)."),
	}
	for _, k := range []string{"webhook", "address", "account", "tombstone"} {
		m.applied.WithLabelValues(k)
	}
	f.GaugeFunc("watchlist_addresses", "Watched (webhook, address) entries in the watch table.",
		func() float64 { return float64(t.Addresses()) })
	f.GaugeFunc("watchlist_webhooks", "Webhooks whose settings the watch table holds (any status).",
		func() float64 { return float64(t.Webhooks()) })
	return m
}
