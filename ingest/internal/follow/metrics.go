package follow

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics are the follower's Prometheus series, shared by all chains (the
// chain is a label). The list is in doc.go.
type Metrics struct {
	head         *prometheus.GaugeVec
	lastProduced *prometheus.GaugeVec
	// lastProducedTime is the last acknowledged block's timestamp: time()
	// minus it is how far the ingested chain lags the wall clock.
	lastProducedTime *prometheus.GaugeVec
	blocks           *prometheus.CounterVec
	txs              *prometheus.CounterVec
	reorgs           *prometheus.CounterVec
	orphaned         *prometheus.CounterVec
	retries          *prometheus.CounterVec
	stage            *prometheus.HistogramVec
	recoveries       *prometheus.CounterVec
	bufferedBytes    *prometheus.GaugeVec
}

// Stage label values of moraine_ingest_stage_duration_seconds.
const (
	stageFetch   = "fetch"
	stageConvert = "convert"
	stageEncode  = "encode"
	stageProduce = "produce"
)

// NewMetrics registers the series on reg (nil: unregistered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	const ns, sub = "moraine", "ingest"
	return &Metrics{
		head: f.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "head_block",
			Help: "Highest block number the node announced."}, []string{"chain"}),
		lastProduced: f.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "last_produced_block",
			Help: "Number of the last block Kafka acknowledged."}, []string{"chain"}),
		lastProducedTime: f.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "last_produced_block_timestamp_seconds",
			Help: "Timestamp (Unix seconds) of the last block Kafka acknowledged."}, []string{"chain"}),
		blocks: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "blocks_produced_total",
			Help: "Blocks acknowledged by Kafka."}, []string{"chain"}),
		txs: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "transactions_produced_total",
			Help: "Transactions in the blocks acknowledged by Kafka."}, []string{"chain"}),
		reorgs: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "reorgs_total",
			Help: "Reorg events produced."}, []string{"chain"}),
		orphaned: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "orphaned_blocks_total",
			Help: "Produced blocks that a reorg took off the canonical chain."}, []string{"chain"}),
		retries: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "block_fetch_retries_total",
			Help: "Block fetches retried, by reason: not_found (null from a lagging node), incomplete (receipts or traces missing or from another block), rpc_error, invalid."}, []string{"chain", "reason"}),
		stage: f.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "stage_duration_seconds",
			Help:    "Time spent per stage: fetch (one RPC batch of blocks, retries included), convert and encode (one block), produce (one record, enqueue to acknowledgement).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}},
			[]string{"chain", "stage"}),
		recoveries: f.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "checkpoint_recoveries_total",
			Help: "Times the checkpoint was read back from Kafka: at start and after a produce failure."}, []string{"chain"}),
		bufferedBytes: f.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "produce_buffered_bytes",
			Help: "Encoded bytes produced but not yet acknowledged."}, []string{"chain"}),
	}
}

// init pre-creates a chain's series at 0.
func (m *Metrics) init(chain string) {
	m.head.WithLabelValues(chain)
	m.lastProduced.WithLabelValues(chain)
	m.lastProducedTime.WithLabelValues(chain)
	m.blocks.WithLabelValues(chain)
	m.txs.WithLabelValues(chain)
	m.reorgs.WithLabelValues(chain)
	m.orphaned.WithLabelValues(chain)
	m.recoveries.WithLabelValues(chain)
	m.bufferedBytes.WithLabelValues(chain)
	for _, r := range []string{"not_found", "incomplete", "rpc_error", "invalid"} {
		m.retries.WithLabelValues(chain, r)
	}
	for _, s := range []string{stageFetch, stageConvert, stageEncode, stageProduce} {
		m.stage.WithLabelValues(chain, s)
	}
}
