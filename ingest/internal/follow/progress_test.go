package follow

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/ingest/internal/chaintest"
	"github.com/moraine-data/moraine/pkg/rpc"
)

func TestMeasureProgress(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s float64, blocks, txs uint64) progressSample {
		return progressSample{at: t0.Add(time.Duration(s * float64(time.Second))), blocks: blocks, txs: txs}
	}
	for _, tc := range []struct {
		name          string
		prev, cur     progressSample
		head          uint64
		known         bool
		ingested      uint64
		blockTime     time.Time
		wantBehind    uint64
		wantRate      float64
		wantETA       time.Duration
		wantLag       time.Duration
		wantTxsPerSec float64
	}{
		{name: "backfilling", prev: at(0, 0, 0), cur: at(10, 5000, 50000), head: 20000, known: true, ingested: 5000,
			blockTime: t0.Add(-time.Hour), wantBehind: 15000, wantRate: 500, wantETA: 30 * time.Second,
			wantLag: time.Hour + 10*time.Second, wantTxsPerSec: 5000},
		{name: "at the head", prev: at(0, 0, 0), cur: at(10, 10, 100), head: 100, known: true, ingested: 100,
			blockTime: t0.Add(9 * time.Second), wantRate: 1, wantETA: 0, wantLag: time.Second, wantTxsPerSec: 10},
		// Behind, and nothing moved: the ETA cannot be told.
		{name: "stalled", prev: at(0, 7, 7), cur: at(10, 7, 7), head: 100, known: true, ingested: 50,
			wantBehind: 50, wantETA: -1},
		// The node's head is not known yet: nothing is behind.
		{name: "no head", prev: at(0, 0, 0), cur: at(5, 10, 0), ingested: 10, wantRate: 2, wantETA: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := measure(tc.prev, tc.cur, tc.head, tc.known, tc.ingested, tc.blockTime)
			require.Equal(t, tc.wantBehind, p.Behind)
			require.InDelta(t, tc.wantRate, p.BlocksPerSecond, 1e-9)
			require.InDelta(t, tc.wantTxsPerSec, p.TxsPerSecond, 1e-9)
			require.Equal(t, tc.wantETA, p.ETA)
			require.Equal(t, tc.wantLag, p.Lag)
		})
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestProgressLine follows a chain whose head moves and checks the periodic
// progress lines and the timestamp gauge.
func TestProgressLine(t *testing.T) {
	blocks := recording(t)
	node := chaintest.NewNode(t, blocks)
	node.SetHead(20)
	k := newKafka(t, 4)
	var out syncBuffer
	logger := slog.New(slog.NewTextHandler(&out, nil))
	chain := testChain(1)
	client := testPool(t, node.URL(), chain.EVMChainID, rpc.PoolConfig{PollInterval: 10 * time.Millisecond}, nil)
	f, err := New(Config{Chain: chain, Topic: topic, BatchBlocks: 2, ProgressInterval: 40 * time.Millisecond},
		Deps{Logger: logger, Kafka: k.producer, KafkaOpts: k.cfg.BaseOpts(logger, "test"), RPC: client})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(t.Context())
	h := &harness{f: f, cancel: stop, done: make(chan error, 1)}
	go func() { h.done <- f.Run(runCtx) }()
	t.Cleanup(func() { h.stop(t) })
	for head := uint64(20); head <= 100; head += 4 {
		node.SetHead(head)
		time.Sleep(15 * time.Millisecond)
	}
	h.waitAcked(t, 100)
	require.Eventually(t, func() bool {
		return strings.Contains(out.String(), "msg=ingesting") || strings.Contains(out.String(), `msg="following the head"`)
	}, 5*time.Second, 10*time.Millisecond, "no progress line in:\n%s", out.String())
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "msg=ingesting") || strings.Contains(l, `msg="following the head"`) {
			line = l
			break
		}
	}
	t.Logf("progress line: %s", line)
	for _, field := range []string{"head=", "ingested=", "behind=", "lag=", "blocks_per_s=", "txs_per_s=", "eta="} {
		require.Contains(t, line, field)
	}
	var last struct{ Timestamp string }
	require.NoError(t, json.Unmarshal(blocks[99].Block, &last))
	ts, err := strconv.ParseUint(strings.TrimPrefix(last.Timestamp, "0x"), 16, 64)
	require.NoError(t, err)
	require.Equal(t, float64(ts), testutil.ToFloat64(f.deps.Metrics.lastProducedTime.WithLabelValues("43114")))
}
