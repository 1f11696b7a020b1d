package follow

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/ingest/internal/chaintest"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/rpc"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/topics"
)

// BenchmarkGunzillaIngest ingests the Gunzilla recording (1,001 blocks every
// 100th number, 9,887 txs, 207,990 call frames) from a fake node in replay
// mode into the real Kafka broker of the local stack, and reports
// transactions per second and each stage's share of the work (the _sum of
// moraine_ingest_stage_duration_seconds).
//
//	go test -run XXX -bench GunzillaIngest -benchtime 3x ./internal/follow/
func BenchmarkGunzillaIngest(b *testing.B) {
	blocks := chaintest.Load(b, "avalanche/gunzilla_14M/GUNZILLA_BLOCKS.jsonl.zst")
	txs := 0
	for _, bl := range blocks {
		txs += bl.TxCount
	}
	// MORAINE_BENCH_RPC_URL points the benchmark at another source, e.g.
	// deploy/cmd/replay serving the same file, to measure ingest alone.
	url := os.Getenv("MORAINE_BENCH_RPC_URL")
	if url == "" {
		url = chaintest.NewNode(b, blocks).URL()
	}
	logger := slog.New(slog.DiscardHandler)
	var total time.Duration
	for b.Loop() {
		kcfg := testenv.Kafka(b) // fresh topics each round
		producer, err := kgo.NewClient(ProducerOpts(kcfg, logger, "bench", "43419")...)
		require.NoError(b, err)
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg)
		client := testPool(b, url, "43419", rpc.PoolConfig{PollInterval: 50 * time.Millisecond}, rpc.NewMetrics(reg))
		f, err := New(Config{
			Chain:       chains.Chain{EVMChainID: "43419", Name: "Gunzilla", Network: "mainnet", Traces: true, Replay: true, StartBlock: 14000000},
			Topic:       kcfg.Topic(topics.Blocks),
			Concurrency: envInt("MORAINE_BENCH_CONCURRENCY", 4),
			BatchBlocks: envInt("MORAINE_BENCH_BATCH_BLOCKS", 10),
		}, Deps{Logger: logger, Kafka: producer, KafkaOpts: kcfg.BaseOpts(logger, "bench"), RPC: client, Metrics: m})
		require.NoError(b, err)
		ctx, cancel := context.WithCancel(b.Context())
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- f.Run(ctx) }()
		last := blocks[len(blocks)-1].Number
		for f.ackedNext.Load() <= last {
			time.Sleep(2 * time.Millisecond)
		}
		elapsed := time.Since(start)
		total += elapsed
		cancel()
		require.NoError(b, <-done)
		producer.Close()

		mfs, err := reg.Gather()
		require.NoError(b, err)
		sums := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "moraine_ingest_stage_duration_seconds" {
				continue
			}
			for _, mm := range mf.GetMetric() {
				sums[label(mm, "stage")] += mm.GetHistogram().GetSampleSum()
			}
		}
		b.Logf("%d txs in %v: %.0f tx/s; stage seconds (summed over workers): fetch %.2f (convert %.2f inside), encode %.2f, produce %.2f",
			txs, elapsed.Round(time.Millisecond), float64(txs)/elapsed.Seconds(), sums[stageFetch], sums[stageConvert], sums[stageEncode], sums[stageProduce])
	}
	b.ReportMetric(float64(txs*b.N)/total.Seconds(), "tx/s")
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
