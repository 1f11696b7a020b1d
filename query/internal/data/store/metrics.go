package store

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/obs"
)

// queryNames are the values of the query label.
var queryNames = []string{"heads", "blocks_range", "blocks_range_before_lookup", "block_hash", "block_transactions", "block_transaction_rows", "migrations",
	"address_list", "address_activity", "blocks_lookup", "blocks_by_numbers", "tx_lookup", "orphaned_blocks"}

type metrics struct {
	duration      *prometheus.HistogramVec
	retries       *prometheus.CounterVec
	pointReadKeys *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := obs.NewMetrics(reg, "query")
	m := &metrics{
		duration: f.HistogramVec("clickhouse_query_duration_seconds",
			"Time until ClickHouse answered a query (first block of the result), by named query.",
			[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}, "query"),
		retries: f.CounterVec("clickhouse_connection_retries_total",
			"Reads sent again on a new connection after theirs failed without an answer (a replica went away).", "query"),
		pointReadKeys: f.HistogramVec("clickhouse_point_read_keys",
			"Keys (blocks) read by one query of the point lookups that read concurrent requests together, by lookup.",
			[]float64{1, 2, 4, 8, 16, 32, 64}, "lookup"),
	}
	for _, q := range queryNames {
		m.duration.WithLabelValues(q)
		m.retries.WithLabelValues(q)
	}
	return m
}

func (m *metrics) observe(query string, start time.Time) {
	m.duration.WithLabelValues(query).Observe(time.Since(start).Seconds())
}
