package obs

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Every kind of series is named moraine_<subsystem>_<name>, with the help,
// labels and buckets given.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := NewMetrics(reg, "sub")
	f.Counter("c_total", "A counter.").Add(2)
	f.CounterVec("cv_total", "A counter with labels.", "a", "b").WithLabelValues("x", "y").Inc()
	f.Gauge("g", "A gauge.").Set(3)
	f.GaugeVec("gv", "A gauge with a label.", "a").WithLabelValues("x").Set(4)
	f.GaugeFunc("gf", "A gauge read at scrape time.", func() float64 { return 5 })
	f.Histogram("h_seconds", "A histogram.", []float64{1, 2}).Observe(1.5)
	f.HistogramVec("hv_seconds", "A histogram with a label.", []float64{0.5}, "a").WithLabelValues("x").Observe(1)

	want := `
# HELP moraine_sub_c_total A counter.
# TYPE moraine_sub_c_total counter
moraine_sub_c_total 2
# HELP moraine_sub_cv_total A counter with labels.
# TYPE moraine_sub_cv_total counter
moraine_sub_cv_total{a="x",b="y"} 1
# HELP moraine_sub_g A gauge.
# TYPE moraine_sub_g gauge
moraine_sub_g 3
# HELP moraine_sub_gf A gauge read at scrape time.
# TYPE moraine_sub_gf gauge
moraine_sub_gf 5
# HELP moraine_sub_gv A gauge with a label.
# TYPE moraine_sub_gv gauge
moraine_sub_gv{a="x"} 4
# HELP moraine_sub_h_seconds A histogram.
# TYPE moraine_sub_h_seconds histogram
moraine_sub_h_seconds_bucket{le="1"} 0
moraine_sub_h_seconds_bucket{le="2"} 1
moraine_sub_h_seconds_bucket{le="+Inf"} 1
moraine_sub_h_seconds_sum 1.5
moraine_sub_h_seconds_count 1
# HELP moraine_sub_hv_seconds A histogram with a label.
# TYPE moraine_sub_hv_seconds histogram
moraine_sub_hv_seconds_bucket{a="x",le="0.5"} 0
moraine_sub_hv_seconds_bucket{a="x",le="+Inf"} 1
moraine_sub_hv_seconds_sum{a="x"} 1
moraine_sub_hv_seconds_count{a="x"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// A name declared twice on one registry is a bug the service must show at
// start-up.
func TestMetricsDuplicatePanics(t *testing.T) {
	f := NewMetrics(prometheus.NewRegistry(), "sub")
	f.Counter("c_total", "A counter.")
	defer func() {
		if recover() == nil {
			t.Fatal("declaring moraine_sub_c_total twice did not panic")
		}
	}()
	f.Counter("c_total", "A counter.")
}
