package follow

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/ingest/internal/chaintest"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/rpc"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/record"
)

// startNodes runs a follower of chain over a pool of nodes.
func startNodes(t *testing.T, k *kafka, nodes []*chaintest.Node, chain chains.Chain, mods ...func(*Config)) *harness {
	t.Helper()
	logger := testenv.Logger(t)
	var more []string
	for _, n := range nodes[1:] {
		more = append(more, n.URL())
	}
	pool := testPool(t, nodes[0].URL(), chain.EVMChainID, rpc.PoolConfig{PollInterval: 20 * time.Millisecond}, nil, more...)
	cfg := Config{Chain: chain, Topic: topic, Concurrency: 4, BatchBlocks: 3, ShutdownTimeout: 5 * time.Second, HaltRetry: 200 * time.Millisecond}
	for _, m := range mods {
		m(&cfg)
	}
	f, err := New(cfg, Deps{Logger: logger, Kafka: k.producer, KafkaOpts: k.cfg.BaseOpts(logger, "test"), RPC: pool})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	h := &harness{f: f, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- f.Run(ctx) }()
	t.Cleanup(func() { h.stop(t) })
	return h
}

func countLogs(bs []*record.Block) int {
	n := 0
	for _, b := range bs {
		for _, tx := range b.Transactions {
			n += len(tx.Logs)
		}
	}
	return n
}

// TestCorruptNodeIsBypassed: one of two nodes drops a log from every
// receipts answer; every block is produced complete, from the other node,
// and the bad answers are counted against the node that gave them.
func TestCorruptNodeIsBypassed(t *testing.T) {
	blocks := recording(t)
	bad, good := chaintest.NewNode(t, blocks), chaintest.NewNode(t, blocks)
	bad.SetCorrupt(chaintest.DropFirstLog)
	k := newKafka(t, 4)
	h := startNodes(t, k, []*chaintest.Node{bad, good}, testChain(1))
	h.waitAcked(t, 100)
	h.stop(t)
	chain, _ := chaintest.Validate(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 0, true)
	require.Equal(t, wantNumbers(blocks), blockNumbers(chain))
	require.Equal(t, 54, countLogs(chain), "every log of the recording")
	m := h.f.deps.Metrics
	require.Positive(t, testutil.ToFloat64(m.verifyFailures.WithLabelValues("43114", "0", chains.CheckReceiptsRoot)))
	require.Zero(t, testutil.ToFloat64(m.verifyFailures.WithLabelValues("43114", "1", chains.CheckReceiptsRoot)))
	require.Zero(t, testutil.ToFloat64(m.halted.WithLabelValues("43114")))
}

// TestEveryNodeCorruptHaltsTheChain: when no node answers a block
// completely, the chain stops before it (nothing after it is produced,
// not ready, halted = 1), and resumes once a node answers it completely.
func TestEveryNodeCorruptHaltsTheChain(t *testing.T) {
	blocks := recording(t)
	a, b := chaintest.NewNode(t, blocks), chaintest.NewNode(t, blocks)
	a.SetCorrupt(chaintest.DropFirstLog)
	b.SetCorrupt(chaintest.DropFirstLog)
	// The first block with a log.
	var first uint64
	for _, bl := range blocks {
		if first == 0 && len(chaintest.DropFirstLog("eth_getBlockReceipts", bl.Receipts)) != len(bl.Receipts) {
			first = bl.Number
		}
	}
	require.NotZero(t, first)
	k := newKafka(t, 4)
	h := startNodes(t, k, []*chaintest.Node{a, b}, testChain(1))
	m := h.f.deps.Metrics
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.halted.WithLabelValues("43114")) == 1 }, 30*time.Second, 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // a retry round
	// Stopped before the block (the blocks of its batch before it wait
	// with it).
	require.LessOrEqual(t, h.f.ackedNext.Load(), first)
	require.GreaterOrEqual(t, h.f.ackedNext.Load()+3, first)
	require.Equal(t, first+1, h.f.haltedAt.Load())
	require.ErrorContains(t, h.f.Ready(t.Context()), "verification")
	b.SetCorrupt(nil)
	h.waitAcked(t, 100)
	require.Zero(t, testutil.ToFloat64(m.halted.WithLabelValues("43114")))
	h.stop(t)
	chain, _ := chaintest.Validate(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 0, true)
	require.Equal(t, wantNumbers(blocks), blockNumbers(chain))
	require.Equal(t, 54, countLogs(chain))
}

// TestTruncatedTracesAreRefetched: a node whose trace lists lack their
// last entry is bypassed; every transaction keeps its trace.
func TestTruncatedTracesAreRefetched(t *testing.T) {
	blocks := recording(t)
	bad, good := chaintest.NewNode(t, blocks), chaintest.NewNode(t, blocks)
	bad.SetCorrupt(chaintest.TruncateTraces)
	k := newKafka(t, 4)
	h := startNodes(t, k, []*chaintest.Node{bad, good}, testChain(1))
	h.waitAcked(t, 100)
	h.stop(t)
	m := h.f.deps.Metrics
	require.Positive(t, testutil.ToFloat64(m.verifyFailures.WithLabelValues("43114", "0", chains.CheckTraces)))
	chain, _ := chaintest.Validate(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 0, true)
	for _, b := range chain {
		for _, tx := range b.Transactions {
			require.NotEmpty(t, tx.InternalTransactions, "block %d tx %x", b.Number, tx.Hash)
		}
	}
}
