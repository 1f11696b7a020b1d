package replay

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/obs"
)

type metrics struct {
	messages  *prometheus.CounterVec
	stage     *prometheus.HistogramVec
	running   prometheus.Gauge
	finished  *prometheus.CounterVec
	rederived prometheus.Counter
	missing   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := obs.NewMetrics(reg, "processor")
	m := &metrics{
		messages: f.CounterVec("replay_messages_total",
			"Replayed messages committed to the replay topic: retransmitted (a message the stream carried, with its sequence number) or renumbered (one it never carried).", "kind"),
		stage: f.HistogramVec("replay_chunk_duration_seconds", "Time per replay chunk stage: derive (ClickHouse reads, matching, payloads), commit (the Kafka transaction).",
			prometheus.ExponentialBuckets(0.005, 2, 14), "stage"),
		running:  f.Gauge("replay_jobs_running", "Replay jobs this instance runs."),
		finished: f.CounterVec("replay_jobs_finished_total", "Replay jobs this instance ended, by status.", "status"),
		rederived: f.Counter("replay_chunks_rederived_total",
			"Replay chunks read again because the chain reorganized while they were read."),
		missing: f.Counter("replay_missing_messages_total",
			"Ledger messages a replay could not repeat: the indexed tables lack their transaction."),
	}
	for _, k := range []string{"retransmitted", "renumbered"} {
		m.messages.WithLabelValues(k)
	}
	for _, s := range []string{"derive", "commit"} {
		m.stage.WithLabelValues(s)
	}
	for _, s := range []string{accountdb.ReplayDone, accountdb.ReplayCancelled, accountdb.ReplayFailed} {
		m.finished.WithLabelValues(s)
	}
	return m
}
