package watch

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/obs"
)

// publishMetrics are the publisher's; subsystem is the host service's
// (query: moraine_query_watch_*, delivery: moraine_delivery_watch_*).
type publishMetrics struct {
	produced        *prometheus.CounterVec
	produceDuration prometheus.Histogram
}

func newPublishMetrics(reg prometheus.Registerer, subsystem string) *publishMetrics {
	f := obs.NewMetrics(reg, subsystem)
	m := &publishMetrics{
		produced: f.CounterVec("watch_records_produced_total", "Address-watch records produced, by result (ok, error).", "result"),
		produceDuration: f.Histogram("watch_produce_duration_seconds", "Time of one synchronous produce of address-watch records.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}),
	}
	m.produced.WithLabelValues("ok")
	m.produced.WithLabelValues("error")
	return m
}
