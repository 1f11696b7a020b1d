package obs

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Namespace is the first part of every moraine metric name.
const Namespace = "moraine"

// Metrics declares the series of one subsystem (the service: ingest,
// processor, query, delivery) on a registerer, each named
// moraine_<subsystem>_<name>. The namespace has its one home here, and a
// package names its subsystem once instead of in every declaration.
//
// Each method registers through promauto: a name declared twice on one
// registry panics when the service starts, not when it is scraped.
type Metrics struct {
	f         promauto.Factory
	subsystem string
}

// NewMetrics declares subsystem's series on reg (nil: unregistered, for
// tests).
func NewMetrics(reg prometheus.Registerer, subsystem string) Metrics {
	return Metrics{f: promauto.With(reg), subsystem: subsystem}
}

// Counter declares a counter.
func (m Metrics) Counter(name, help string) prometheus.Counter {
	return m.f.NewCounter(prometheus.CounterOpts(m.opts(name, help)))
}

// CounterVec declares a counter with labels.
func (m Metrics) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return m.f.NewCounterVec(prometheus.CounterOpts(m.opts(name, help)), labels)
}

// Gauge declares a gauge.
func (m Metrics) Gauge(name, help string) prometheus.Gauge {
	return m.f.NewGauge(m.opts(name, help))
}

// GaugeVec declares a gauge with labels.
func (m Metrics) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return m.f.NewGaugeVec(m.opts(name, help), labels)
}

// GaugeFunc declares a gauge whose value fn returns at each scrape.
func (m Metrics) GaugeFunc(name, help string, fn func() float64) prometheus.GaugeFunc {
	return m.f.NewGaugeFunc(m.opts(name, help), fn)
}

// Histogram declares a histogram with the given bucket upper bounds.
func (m Metrics) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return m.f.NewHistogram(m.histogramOpts(name, help, buckets))
}

// HistogramVec declares a histogram with labels.
func (m Metrics) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return m.f.NewHistogramVec(m.histogramOpts(name, help, buckets), labels)
}

// opts are GaugeOpts because prometheus.Opts, CounterOpts and GaugeOpts are
// one struct under three names.
func (m Metrics) opts(name, help string) prometheus.GaugeOpts {
	return prometheus.GaugeOpts{Namespace: Namespace, Subsystem: m.subsystem, Name: name, Help: help}
}

func (m Metrics) histogramOpts(name, help string, buckets []float64) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{Namespace: Namespace, Subsystem: m.subsystem, Name: name, Help: help, Buckets: buckets}
}
