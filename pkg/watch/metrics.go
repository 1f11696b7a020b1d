package watch

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// publishMetrics are the publisher's; subsystem is the host service's
// (query: moraine_query_watch_*, delivery: moraine_delivery_watch_*).
type publishMetrics struct {
	produced        *prometheus.CounterVec
	produceDuration prometheus.Histogram
}

func newPublishMetrics(reg prometheus.Registerer, subsystem string) *publishMetrics {
	f := promauto.With(reg)
	m := &publishMetrics{
		produced: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: "moraine", Subsystem: subsystem, Name: "watch_records_produced_total",
			Help: "Address-watch records produced, by result (ok, error).",
		}, []string{"result"}),
		produceDuration: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: "moraine", Subsystem: subsystem, Name: "watch_produce_duration_seconds",
			Help:    "Time of one synchronous produce of address-watch records.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
	}
	m.produced.WithLabelValues("ok")
	m.produced.WithLabelValues("error")
	return m
}
