package usagesink

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/obs"
)

type metrics struct {
	records     *prometheus.CounterVec
	batch       prometheus.Histogram
	lastWritten prometheus.Gauge
	dropped     prometheus.Counter
	topRequests *prometheus.GaugeVec
	topUnits    *prometheus.GaugeVec
	topErrors   *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := obs.NewMetrics(reg, "processor")
	m := &metrics{
		records: f.CounterVec("usage_records_total",
			"Request records by result: written to ClickHouse, duplicate (already there, skipped), undecodable (skipped).", "result"),
		batch: f.Histogram("usage_batch_duration_seconds", "Time to write one batch of request records, retries included.",
			prometheus.ExponentialBuckets(0.005, 2, 16)),
		lastWritten: f.Gauge("usage_last_written_timestamp_seconds", "Arrival time (Unix seconds) of the newest request record written."),
		dropped:     f.Counter("usage_partitions_dropped_total", "Request-log and usage-rollup partitions dropped by retention."),
		topRequests: f.GaugeVec("usage_top_account_requests",
			"Requests in the last hour of the 10 accounts with the most (account \"none\": keyless requests).", "account", "name"),
		topUnits: f.GaugeVec("usage_top_account_compute_units",
			"Compute units charged in the last hour to the 10 accounts charged the most.", "account", "name"),
		topErrors: f.GaugeVec("usage_top_account_errors",
			"Requests answered 4xx or 5xx in the last hour, of the 10 accounts with the most requests.", "account", "name"),
	}
	for _, r := range []string{"written", "duplicate", "undecodable"} {
		m.records.WithLabelValues(r)
	}
	return m
}
