package pipeline

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/obs"
)

type metrics struct {
	attempts        *prometheus.CounterVec
	attemptDuration prometheus.Histogram
	endToEnd        prometheus.Histogram
	retriesPending  prometheus.Gauge
	retriesQueued   prometheus.Counter
	inFlight        prometheus.Gauge
	dropped         *prometheus.CounterVec
	deferred        prometheus.Counter
	unsigned        prometheus.Counter
	replayAttempts  *prometheus.CounterVec
	replayInFlight  prometheus.Gauge
	replayGivenUp   prometheus.Counter
}

// Attempt results (the result label), and reasons for dropping a message
// without an attempt.
var (
	attemptResults = []string{accountdb.ResultSuccess, accountdb.ResultHTTPError, accountdb.ResultTimeout,
		accountdb.ResultNetwork, accountdb.ResultRefusedTarget}
	dropReasons = []string{"inactive", "unknown_webhook", "malformed"}
)

func newMetrics(reg prometheus.Registerer) *metrics {
	f := obs.NewMetrics(reg, "delivery")
	m := &metrics{
		attempts: f.CounterVec("attempts_total",
			"Delivery attempts by result (success, http_error, timeout, network, refused_target).", "result"),
		attemptDuration: f.Histogram("attempt_duration_seconds",
			"Duration of one delivery attempt, from dial to the drained response.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15}),
		endToEnd: f.Histogram("end_to_end_latency_seconds",
			"From ingest reading the block from the node (block_fetched_at_unix_ms) to the endpoint's 2xx, retries included.",
			[]float64{.025, .05, .1, .2, .3, .5, .75, 1, 2, 5, 10, 30, 60, 300, 1800, 7200, 43200, 86400, 172800}),
		retriesPending: f.Gauge("retries_pending",
			"Messages waiting on a retry level (the consumer group's lag there, all instances together)."),
		retriesQueued: f.Counter("retries_scheduled_total",
			"Failed attempts whose next attempt was scheduled on a retry level."),
		inFlight: f.Gauge("in_flight", "Delivery attempts in progress in this process."),
		dropped: f.CounterVec("messages_dropped_total",
			"Messages finished without an attempt, by reason (inactive webhook, unknown_webhook, malformed record).", "reason"),
		deferred: f.Counter("deferred_total",
			"Messages parked on the first retry level because their endpoint host was busy (no attempt counted)."),
		unsigned: f.Counter("unsigned_total", "Attempts sent without signatures because the account has no shared secret."),
		replayAttempts: f.CounterVec("replay_attempts_total",
			"Attempts of replayed messages by result (not in attempts_total).", "result"),
		replayInFlight: f.Gauge("replay_in_flight", "Attempts of replayed messages in progress in this process."),
		replayGivenUp: f.Counter("replay_messages_given_up_total",
			"Replayed messages that failed every attempt of --delivery.replay-retry-schedule."),
	}
	for _, r := range attemptResults {
		m.attempts.WithLabelValues(r)
		m.replayAttempts.WithLabelValues(r)
	}
	for _, r := range dropReasons {
		m.dropped.WithLabelValues(r)
	}
	return m
}
