package follow

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/obs"
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
	verifyFailures   *prometheus.CounterVec
	halted           *prometheus.GaugeVec
	// lead and leadHolding: the backfill's records not yet committed by
	// the sink's group, and whether the backfill waits for it (lead.go).
	lead        *prometheus.GaugeVec
	leadHolding *prometheus.GaugeVec
}

// Stage label values of moraine_ingest_stage_duration_seconds.
const (
	stageFetch   = "fetch"
	stageConvert = "convert"
	stageEncode  = "encode"
	stageProduce = "produce"
	stageVerify  = "verify"
)

// NewMetrics registers the series on reg (nil: unregistered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := obs.NewMetrics(reg, "ingest")
	return &Metrics{
		head:         f.GaugeVec("head_block", "Highest block number the node announced.", "chain"),
		lastProduced: f.GaugeVec("last_produced_block", "Number of the last block Kafka acknowledged.", "chain"),
		lastProducedTime: f.GaugeVec("last_produced_block_timestamp_seconds",
			"Timestamp (Unix seconds) of the last block Kafka acknowledged.", "chain"),
		blocks:   f.CounterVec("blocks_produced_total", "Blocks acknowledged by Kafka.", "chain"),
		txs:      f.CounterVec("transactions_produced_total", "Transactions in the blocks acknowledged by Kafka.", "chain"),
		reorgs:   f.CounterVec("reorgs_total", "Reorg events produced.", "chain"),
		orphaned: f.CounterVec("orphaned_blocks_total", "Produced blocks that a reorg took off the canonical chain.", "chain"),
		retries: f.CounterVec("block_fetch_retries_total",
			"Block fetches retried, by reason: not_found (null from a lagging node), incomplete (receipts or traces missing or from another block), rpc_error, invalid, unverified (failed verification).",
			"chain", "reason"),
		stage: f.HistogramVec("stage_duration_seconds",
			"Time spent per stage: fetch (one RPC batch of blocks, retries included), convert, verify and encode (one block), produce (one record, enqueue to acknowledgement).",
			[]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, "chain", "stage"),
		recoveries: f.CounterVec("checkpoint_recoveries_total",
			"Times the checkpoint was read back from Kafka: at start and after a produce failure.", "chain"),
		bufferedBytes: f.GaugeVec("produce_buffered_bytes", "Encoded bytes produced but not yet acknowledged.", "chain"),
		verifyFailures: f.CounterVec("verification_failures_total",
			"Block answers that failed verification before producing, by the node that gave them and the check (receiptsRoot, logsBloom, transactionsRoot, traces); the block is fetched again from another node.",
			"chain", "node", "check"),
		halted: f.GaugeVec("halted",
			"1 while the chain is stopped because every node's answer for the next block fails verification (nothing after it is produced; the log names the block and the check), else 0.",
			"chain"),
		lead: f.GaugeVec("backfill_lead_records",
			"Records of the chain's partition that the sink's consumer group (--ingest.lead-group) has not committed (with --ingest.max-lead).", "chain"),
		leadHolding: f.GaugeVec("backfill_waiting",
			"1 while the backfill waits for the sink: more than --ingest.max-lead records not committed by it.", "chain"),
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
	m.lead.WithLabelValues(chain)
	m.leadHolding.WithLabelValues(chain)
	for _, r := range []string{"not_found", "incomplete", "rpc_error", "invalid", "unverified"} {
		m.retries.WithLabelValues(chain, r)
	}
	m.halted.WithLabelValues(chain)
	for _, s := range []string{stageFetch, stageConvert, stageVerify, stageEncode, stageProduce} {
		m.stage.WithLabelValues(chain, s)
	}
}
