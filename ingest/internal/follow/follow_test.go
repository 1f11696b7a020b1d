package follow

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moraine-data/moraine/ingest/internal/chaintest"
	"github.com/moraine-data/moraine/ingest/internal/lease"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/rpc"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

const topic = "moraine.blocks"

var (
	loadOnce sync.Once
	cchain   []chaintest.Block
)

// recording returns C-Chain blocks 1..100 (loaded once per test binary).
func recording(t *testing.T) []chaintest.Block {
	loadOnce.Do(func() { cchain = chaintest.Load(t, "avalanche/cchain_1_100/blocks_1_100.jsonl.zst") })
	require.Len(t, cchain, 100)
	return cchain
}

// upTo returns the recorded blocks numbered up to n.
func upTo(blocks []chaintest.Block, n uint64) []chaintest.Block {
	var out []chaintest.Block
	for _, b := range blocks {
		if b.Number <= n {
			out = append(out, b)
		}
	}
	return out
}

// kafka is an in-process kfake cluster, a producer built like ingest's
// (transactional, for the follower) and a plain one for the tests' own
// records.
type kafka struct {
	cluster  *kfake.Cluster
	cfg      kafkautil.Config
	producer *kgo.Client
	plain    *kgo.Client
}

func newKafka(t *testing.T, partitions int32) *kafka {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	cfg := kafkautil.Config{Brokers: strings.Join(c.ListenAddrs(), ",")}
	logger := testenv.Logger(t)
	p, err := kgo.NewClient(ProducerOpts(cfg, logger, "test", "43114")...)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	plain, err := kgo.NewClient(cfg.ProducerOpts(logger, "test-plain")...)
	require.NoError(t, err)
	t.Cleanup(plain.Close)
	return &kafka{cluster: c, cfg: cfg, producer: p, plain: plain}
}

func testChain(start uint64) chains.Chain {
	return chains.Chain{EVMChainID: "43114", Name: "C-Chain", Network: "mainnet", Traces: true, StartBlock: start}
}

type harness struct {
	f      *Follower
	cancel context.CancelFunc
	done   chan error
}

// start runs a follower of chain against node and k.
func start(t *testing.T, k *kafka, node *chaintest.Node, chain chains.Chain, mods ...func(*Config)) *harness {
	t.Helper()
	return startWith(t, k, k.producer, node, chain, mods...)
}

// startWith runs a follower that produces with producer.
func startWith(t *testing.T, k *kafka, producer *kgo.Client, node *chaintest.Node, chain chains.Chain, mods ...func(*Config)) *harness {
	t.Helper()
	logger := testenv.Logger(t)
	client := testPool(t, node.URL(), chain.EVMChainID, rpc.PoolConfig{WSURL: node.WSURL(), PollInterval: 20 * time.Millisecond}, nil)
	cfg := Config{Chain: chain, Topic: topic, Concurrency: 4, BatchBlocks: 3, ShutdownTimeout: 5 * time.Second}
	for _, m := range mods {
		m(&cfg)
	}
	f, err := New(cfg, Deps{Logger: logger, Kafka: producer, KafkaOpts: k.cfg.BaseOpts(logger, "test"), RPC: client})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	h := &harness{f: f, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- f.Run(ctx) }()
	t.Cleanup(func() { h.stop(t) })
	return h
}

// stop cancels the follower and waits for it.
func (h *harness) stop(t *testing.T) {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("follower did not stop")
	}
}

// waitAcked waits until Kafka acknowledged block n.
func (h *harness) waitAcked(t *testing.T, n uint64) {
	t.Helper()
	require.Eventually(t, func() bool { return h.f.ackedNext.Load() > n }, 30*time.Second, 5*time.Millisecond,
		"block %d not produced (next %d)", n, h.f.ackedNext.Load())
}

func blockNumbers(bs []*record.Block) []uint64 {
	out := make([]uint64, len(bs))
	for i, b := range bs {
		out[i] = b.Number
	}
	return out
}

func wantNumbers(bs []chaintest.Block) []uint64 {
	out := make([]uint64, len(bs))
	for i, b := range bs {
		out[i] = b.Number
	}
	return out
}

func hexHash(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	require.NoError(t, err)
	return b
}

func TestBackfillProducesEveryBlockInOrder(t *testing.T) {
	blocks := recording(t)
	node := chaintest.NewNode(t, blocks)
	k := newKafka(t, 4)
	h := start(t, k, node, testChain(1))
	h.waitAcked(t, 100)
	require.NoError(t, h.f.Ready(t.Context()))
	h.stop(t)

	chain, reorgs := chaintest.Validate(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 0, true)
	require.Empty(t, reorgs)
	require.Equal(t, wantNumbers(blocks), blockNumbers(chain))
	for i, b := range chain {
		require.Equal(t, hexHash(t, blocks[i].Hash), b.Hash)
		require.True(t, b.TracesIncluded)
		require.NotZero(t, b.FetchedAtUnixMs)
	}
	require.Equal(t, uint64(81), chain[99].CumulativeTransactions)
	// Each block was fetched once: nothing was lost and fetched again.
	require.Equal(t, int64(100), node.MethodCalls("eth_getBlockReceipts"))
	m := h.f.deps.Metrics
	require.Equal(t, 100.0, testutil.ToFloat64(m.blocks.WithLabelValues("43114")))
	require.Equal(t, 81.0, testutil.ToFloat64(m.txs.WithLabelValues("43114")))
	require.Equal(t, 100.0, testutil.ToFloat64(m.lastProduced.WithLabelValues("43114")))
	require.Equal(t, 100.0, testutil.ToFloat64(m.head.WithLabelValues("43114")))
}

func TestRestartResumesWithoutGapOrDoubleCount(t *testing.T) {
	blocks := recording(t)
	node := chaintest.NewNode(t, blocks)
	k := newKafka(t, 4)

	// First run: stopped in the middle of the backfill.
	h := start(t, k, node, testChain(1), func(c *Config) { c.BatchBlocks = 2; c.Concurrency = 2 })
	h.waitAcked(t, 37)
	h.stop(t)
	first := chaintest.ReadEvents(t, k.cfg, topic, "43114")
	require.NotEmpty(t, first)
	require.Less(t, len(first), 100, "stopped midway")

	// Second run: resumes from what Kafka holds, ignoring StartBlock.
	h = start(t, k, node, testChain(1))
	h.waitAcked(t, 100)
	h.stop(t)
	chain, _ := chaintest.Validate(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 0, true)
	require.Equal(t, wantNumbers(blocks), blockNumbers(chain))
	require.Equal(t, uint64(81), chain[99].CumulativeTransactions)

	// Third run with nothing new: produces nothing.
	h = start(t, k, node, testChain(1))
	require.Eventually(t, func() bool { return h.f.Ready(t.Context()) == nil }, 10*time.Second, 5*time.Millisecond)
	h.stop(t)
	require.Len(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 100)
}

// forkAt returns the first block number ≥ from that has transactions, so
// that dropping them changes the cumulative counts.
func forkAt(blocks []chaintest.Block, from uint64) uint64 {
	for _, b := range blocks {
		if b.Number >= from && b.TxCount > 0 {
			return b.Number
		}
	}
	return from
}

// branch builds the blocks fork..to of another branch on top of fork-1; the
// first one loses its transactions.
func branch(t *testing.T, blocks []chaintest.Block, fork, to uint64, id int) []chaintest.Block {
	byNum := map[uint64]chaintest.Block{}
	for _, b := range blocks {
		byNum[b.Number] = b
	}
	parent := byNum[fork-1].Hash
	var out []chaintest.Block
	for n := fork; n <= to; n++ {
		b := chaintest.Fork(t, byNum[n], chaintest.ForkHash(byNum[n].Hash, id), parent, n == fork)
		out = append(out, b)
		parent = b.Hash
	}
	return out
}

func TestReorgAtDepth3(t *testing.T) {
	blocks := recording(t)
	fork := forkAt(blocks, 40)
	head := fork + 2 // the last three produced blocks get replaced
	node := chaintest.NewNode(t, upTo(blocks, 100))
	node.SetHead(head)
	k := newKafka(t, 4)
	h := start(t, k, node, testChain(1))
	h.waitAcked(t, head)

	newBranch := branch(t, blocks, fork, head+1, 1)
	node.Put(newBranch...)
	node.SetHead(head + 1)
	h.waitAcked(t, head+1)
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(h.f.deps.Metrics.reorgs.WithLabelValues("43114")) == 1
	}, 10*time.Second, 5*time.Millisecond)
	h.stop(t)

	chain, reorgs := chaintest.Validate(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 0, true)
	require.Len(t, reorgs, 1)
	r := reorgs[0]
	require.Equal(t, fork, r.ForkNumber)
	require.Equal(t, uint64(43114), r.ChainId)
	require.Len(t, r.Orphaned, 3)
	for i, o := range r.Orphaned {
		require.Equal(t, fork+uint64(i), o.Number)
		require.Equal(t, hexHash(t, blocks[fork-1+uint64(i)].Hash), o.Hash, "orphans are the originally produced blocks")
	}
	require.Equal(t, head+1, chain[len(chain)-1].Number)
	for i, b := range newBranch {
		got := chain[int(fork)-1+i]
		require.Equal(t, hexHash(t, b.Hash), got.Hash, "block %d is from the new branch", b.Number)
	}
	require.Empty(t, chain[fork-1].Transactions, "the new branch's first block is empty")
	require.Equal(t, 3.0, testutil.ToFloat64(h.f.deps.Metrics.orphaned.WithLabelValues("43114")))
}

func TestReorgWhileFollowingWithSubscription(t *testing.T) {
	// Two reorgs in a row, the second one replacing part of the first
	// branch, while heads arrive one by one.
	blocks := recording(t)
	node := chaintest.NewNode(t, blocks)
	node.SetHead(20)
	k := newKafka(t, 4)
	h := start(t, k, node, testChain(1))
	h.waitAcked(t, 20)
	b1 := branch(t, blocks, 19, 22, 1)
	node.Put(b1...)
	for n := uint64(21); n <= 22; n++ {
		node.SetHead(n)
	}
	h.waitAcked(t, 22)
	base := append(append(upTo(blocks, 18), b1...), blocks[22:25]...) // 1..18, 19'..22', 23..25
	b2 := branch(t, base, 21, 25, 2)
	node.Put(b2...)
	node.SetHead(25)
	h.waitAcked(t, 25)
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(h.f.deps.Metrics.reorgs.WithLabelValues("43114")) == 2
	}, 10*time.Second, 5*time.Millisecond)
	h.stop(t)
	chain, reorgs := chaintest.Validate(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 0, true)
	require.Len(t, reorgs, 2)
	require.Equal(t, uint64(19), reorgs[0].ForkNumber)
	require.Equal(t, uint64(21), reorgs[1].ForkNumber)
	require.Equal(t, hexHash(t, b2[len(b2)-1].Hash), chain[len(chain)-1].Hash)
}

func TestLaggingNodeNullsAreRetriedNotSkipped(t *testing.T) {
	blocks := recording(t)
	node := chaintest.NewNode(t, blocks)
	node.NullFor(10, 3)
	node.NullFor(11, 2)
	node.NullFor(77, 4)
	node.FailRequests(2) // and two HTTP 503s
	k := newKafka(t, 4)
	h := start(t, k, node, testChain(1))
	h.waitAcked(t, 100)
	h.stop(t)
	chain, _ := chaintest.Validate(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 0, true)
	require.Equal(t, wantNumbers(blocks), blockNumbers(chain))
	require.GreaterOrEqual(t, testutil.ToFloat64(h.f.deps.Metrics.retries.WithLabelValues("43114", "not_found")), 4.0)
}

func TestReplaySkipsMissingNumbers(t *testing.T) {
	// Every 7th block: numbers skip and parents do not link, as in the
	// Gunzilla recording. Replay mode accepts that without reorgs.
	var sparse []chaintest.Block
	for i, b := range recording(t) {
		if i%7 == 0 {
			sparse = append(sparse, b)
		}
	}
	spanned := int64(sparse[len(sparse)-1].Number - sparse[0].Number + 1)
	for _, c := range []struct {
		name    string
		listing bool
	}{{"probing each number", false}, {"listing the recorded numbers", true}} {
		t.Run(c.name, func(t *testing.T) {
			node := chaintest.NewNode(t, sparse)
			if c.listing {
				node.ListBlocks()
			}
			k := newKafka(t, 4)
			ch := testChain(0) // below the recording: starts at its first block
			ch.Replay = true
			ch.StartCumulativeTransactions = 1000
			h := start(t, k, node, ch, func(c *Config) { c.BatchBlocks = 2 })
			h.waitAcked(t, sparse[len(sparse)-1].Number)
			h.stop(t)
			chain, reorgs := chaintest.Validate(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 1000, false)
			require.Empty(t, reorgs)
			require.Equal(t, wantNumbers(sparse), blockNumbers(chain))
			txs := 0
			for _, b := range sparse {
				txs += b.TxCount
			}
			require.Equal(t, uint64(1000+txs), chain[len(chain)-1].CumulativeTransactions)
			// Once the density is learnt, missing numbers are not fetched
			// in full.
			require.Less(t, node.MethodCalls("eth_getBlockReceipts"), spanned/2)
			if c.listing {
				// One listing per span instead of a header probe per number.
				require.Positive(t, node.MethodCalls("moraine_recordedBlockNumbers"))
				require.Less(t, node.MethodCalls("eth_getBlockByNumber"), spanned/2)
			} else {
				// Answered "method not found" to the first spans fetched
				// at once (Concurrency, 4), never asked again.
				require.Positive(t, node.MethodCalls("moraine_recordedBlockNumbers"))
				require.LessOrEqual(t, node.MethodCalls("moraine_recordedBlockNumbers"), int64(4))
				require.GreaterOrEqual(t, node.MethodCalls("eth_getBlockByNumber"), spanned/2)
			}
		})
	}
}

func TestProduceFailureRecoversFromKafka(t *testing.T) {
	blocks := recording(t)
	node := chaintest.NewNode(t, blocks)
	k := newKafka(t, 4)
	// Let a few produce requests through, then fail one with a
	// non-retryable error.
	var seen int
	k.cluster.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		k.cluster.KeepControl()
		seen++
		if seen != 5 {
			return nil, nil, false
		}
		k.cluster.DropControl()
		t.Logf("failing produce request %d", seen)
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.InvalidRecord.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	h := start(t, k, node, testChain(1), func(c *Config) { c.BatchBlocks = 1; c.Concurrency = 1 })
	h.waitAcked(t, 100)
	h.stop(t)
	chain, _ := chaintest.Validate(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 0, true)
	require.Equal(t, wantNumbers(blocks), blockNumbers(chain))
	require.Equal(t, 2.0, testutil.ToFloat64(h.f.deps.Metrics.recoveries.WithLabelValues("43114")), "recovered once more after the failure")
}

func TestRecoverAfterReorgEventAtTail(t *testing.T) {
	// A crash right after producing a Reorg event: the restart must resume
	// at the fork with the ancestor's cumulative count.
	blocks := recording(t)
	fork := forkAt(blocks, 30)
	k := newKafka(t, 1)
	node := chaintest.NewNode(t, blocks)
	node.SetHead(fork + 1)
	h := start(t, k, node, testChain(1))
	h.waitAcked(t, fork+1)
	h.stop(t)
	// Another chain shares the single partition: recovery filters by key.
	other := &record.ChainEvent{Event: &record.ChainEvent_Block{Block: &record.Block{ChainId: 1, Number: 999, Hash: bytes.Repeat([]byte{9}, 32)}}}
	ov, err := codec.EncodeChainEvent(other)
	require.NoError(t, err)
	reorg := &record.ChainEvent{Event: &record.ChainEvent_Reorg{Reorg: &record.Reorg{ChainId: 43114, ForkNumber: fork, Orphaned: []*record.OrphanedBlock{
		{Number: fork, Hash: hexHash(t, blocks[fork-1].Hash)}, {Number: fork + 1, Hash: hexHash(t, blocks[fork].Hash)}}}}}
	rv, err := codec.EncodeChainEvent(reorg)
	require.NoError(t, err)
	hdr := []kgo.RecordHeader{{Key: codec.SchemaHeader, Value: []byte(codec.ChainEventSchema)}}
	require.NoError(t, k.plain.ProduceSync(t.Context(),
		&kgo.Record{Topic: topic, Key: []byte("43114"), Value: rv, Headers: hdr},
		&kgo.Record{Topic: topic, Key: []byte("1"), Value: ov, Headers: hdr}).FirstErr())

	newBranch := branch(t, blocks, fork, fork+2, 1)
	node.Put(newBranch...)
	node.SetHead(fork + 2)
	h = start(t, k, node, testChain(1))
	h.waitAcked(t, fork+2)
	h.stop(t)
	chain, reorgs := chaintest.Validate(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 0, true)
	require.Len(t, reorgs, 1)
	require.Equal(t, fork+2, chain[len(chain)-1].Number)
	require.Equal(t, hexHash(t, newBranch[2].Hash), chain[len(chain)-1].Hash)
}

// TestSecondWriterFencesTheFirst starts a second writer of a chain while
// the first still runs, as a standby taking over from an instance that lost
// its lease but has not noticed: the second registers the chain's
// transactional id, the first's next commit fails as fenced and it stops
// with lease.ErrFenced, and what consumers read is one contiguous chain
// with every block once.
func TestSecondWriterFencesTheFirst(t *testing.T) {
	blocks := recording(t)
	node := chaintest.NewNode(t, blocks)
	node.SetHead(50)
	k := newKafka(t, 4)
	first := start(t, k, node, testChain(1))
	first.waitAcked(t, 50)

	second, err := kgo.NewClient(ProducerOpts(k.cfg, testenv.Logger(t), "test-second", "43114")...)
	require.NoError(t, err)
	t.Cleanup(second.Close)
	other := startWith(t, k, second, node, testChain(1))
	require.Eventually(t, func() bool { return other.f.recovered.Load() }, 10*time.Second, 5*time.Millisecond)
	node.SetHead(100)
	other.waitAcked(t, 100)

	select {
	case err := <-first.done:
		require.ErrorIs(t, err, lease.ErrFenced)
		first.cancel = nil // stopped by itself
	case <-time.After(20 * time.Second):
		t.Fatal("the fenced writer did not stop")
	}
	require.LessOrEqual(t, first.f.ackedNext.Load(), uint64(51), "the fenced writer acknowledged blocks after the second registered")
	other.stop(t)
	chain, _ := chaintest.Validate(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 0, true)
	require.Equal(t, wantNumbers(blocks), blockNumbers(chain))
}

func TestPartitionForMatchesTheProducer(t *testing.T) {
	k := newKafka(t, 4)
	for _, key := range []string{"1", "43114", "43112", "43419", "43113"} {
		r := &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte("x")}
		require.NoError(t, k.plain.ProduceSync(t.Context(), r).FirstErr())
		require.Equal(t, r.Partition, partitionFor(topic, []byte(key), 4), "key %s", key)
	}
}

func TestReadyNeedsCheckpointHeadAndLag(t *testing.T) {
	blocks := recording(t)
	node := chaintest.NewNode(t, blocks)
	node.SetHead(10)
	k := newKafka(t, 4)
	logger := testenv.Logger(t)
	client := testPool(t, node.URL(), "1", rpc.PoolConfig{PollInterval: 10 * time.Millisecond}, nil)
	f, err := New(Config{Chain: testChain(1), Topic: topic, ReadyLag: 2}, Deps{Logger: logger, Kafka: k.producer,
		KafkaOpts: k.cfg.BaseOpts(logger, "test"), RPC: client})
	require.NoError(t, err)
	require.ErrorContains(t, f.Ready(t.Context()), "checkpoint")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	require.Eventually(t, func() bool { return f.Ready(t.Context()) == nil }, 10*time.Second, 5*time.Millisecond)
	// Stop the node answering blocks: the head moves on, ingest falls
	// behind and stops being ready once more than ReadyLag behind.
	for n := uint64(11); n <= 20; n++ {
		node.NullFor(n, 1<<30)
	}
	node.SetHead(20)
	require.Eventually(t, func() bool {
		err := f.Ready(t.Context())
		return err != nil && strings.Contains(err.Error(), "behind")
	}, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

func TestWindow(t *testing.T) {
	w := newWindow(4)
	for n := uint64(1); n <= 20; n++ {
		w.push(produced{Number: n, Cumulative: n * 10})
	}
	w.trim()
	require.Equal(t, 4, w.len())
	first, _ := w.first()
	require.Equal(t, uint64(17), first.Number)
	p, ok := w.get(18)
	require.True(t, ok)
	require.Equal(t, uint64(180), p.Cumulative)
	_, ok = w.get(3)
	require.False(t, ok)
	removed := w.truncateAbove(18)
	require.Len(t, removed, 2)
	last, _ := w.last()
	require.Equal(t, uint64(18), last.Number)
}

func TestReorgBeyondTheWindowIsFatal(t *testing.T) {
	// Every produced block is replaced: no common ancestor among them.
	blocks := recording(t)
	node := chaintest.NewNode(t, blocks)
	node.SetHead(10)
	k := newKafka(t, 4)
	h := start(t, k, node, testChain(1))
	h.waitAcked(t, 10)
	byNum := map[uint64]chaintest.Block{}
	for _, b := range blocks {
		byNum[b.Number] = b
	}
	parent := byNum[1].Parent
	for n := uint64(1); n <= 11; n++ {
		b := chaintest.Fork(t, byNum[n], chaintest.ForkHash(byNum[n].Hash, 3), parent, false)
		node.Put(b)
		parent = b.Hash
	}
	node.SetHead(11)
	select {
	case err := <-h.done:
		require.ErrorIs(t, err, ErrReorgTooDeep)
		h.cancel()
		h.cancel = nil
	case <-time.After(20 * time.Second):
		t.Fatal("a reorg deeper than the window did not stop the follower")
	}
	// Nothing of the new branch was produced.
	chain, reorgs := chaintest.Validate(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 0, true)
	require.Empty(t, reorgs)
	require.Len(t, chain, 10)
}

func TestShutdownProducesWhatWasFetched(t *testing.T) {
	// A slow producer side would lose nothing either way; here the point is
	// that a stop in the middle of a backfill leaves a prefix in Kafka and
	// acknowledged metrics that agree with it.
	blocks := recording(t)
	node := chaintest.NewNode(t, blocks)
	node.SetDelay(5 * time.Millisecond)
	k := newKafka(t, 4)
	h := start(t, k, node, testChain(1), func(c *Config) { c.BatchBlocks = 5 })
	h.waitAcked(t, 20)
	h.stop(t)
	acked := h.f.ackedNext.Load() - 1
	chain, _ := chaintest.Validate(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 0, true)
	require.Equal(t, acked, chain[len(chain)-1].Number, "everything acknowledged is in Kafka and nothing more")
	require.Equal(t, uint64(1), chain[0].Number)
}

func TestParseNumbers(t *testing.T) {
	sp := span{start: 100, end: 200}
	got, err := parseNumbers(json.RawMessage(`["0x64","0x6e","0xc7"]`), sp)
	require.NoError(t, err)
	require.Equal(t, []uint64{100, 110, 199}, got)
	got, err = parseNumbers(json.RawMessage(`[]`), sp)
	require.NoError(t, err)
	require.Empty(t, got)
	for _, bad := range []string{`{}`, `["64"]`, `["0xzz"]`, `["0xc8"]`, `["0x63"]`, `["0x6e","0x64"]`, `["0x64","0x64"]`, `[100]`} {
		_, err := parseNumbers(json.RawMessage(bad), sp)
		require.Error(t, err, bad)
	}
}

// With --ingest.max-lead, a backfill stops fetching while the sink's group
// is more than MaxLead records behind on the chain's partition, resumes
// when it commits, and produces every block once and in order; an unknown
// lead (the group has committed nothing) bounds nothing.
func TestBackfillWaitsForTheSink(t *testing.T) {
	blocks := recording(t)
	node := chaintest.NewNode(t, blocks)
	k := newKafka(t, 4)
	adm := kadm.NewClient(k.plain)
	const group = "sink"
	p := partitionFor(topic, []byte("43114"), 4)
	commit := func(at int64) {
		t.Helper()
		var offs kadm.Offsets
		offs.AddOffset(topic, p, at, -1)
		resp, err := adm.CommitOffsets(t.Context(), group, offs)
		require.NoError(t, err)
		require.NoError(t, resp.Error())
	}
	commit(0)
	defer func(d time.Duration) { leadPoll = d }(leadPoll)
	leadPoll = 5 * time.Millisecond
	h := start(t, k, node, testChain(1), func(c *Config) { c.LeadGroup, c.MaxLead = group, 30 })
	m := h.f.deps.Metrics
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.leadHolding.WithLabelValues("43114")) == 1 },
		20*time.Second, 10*time.Millisecond, "the backfill never waited")
	// Held: what was in flight lands, then nothing more. The estimate
	// between reads counts every dispatched block, so the backfill stops
	// near the bound however late a read comes (a loaded machine); it
	// must stop short of the head's margin (Concurrency x BatchBlocks
	// blocks), where nothing waits.
	time.Sleep(time.Second)
	held := h.f.ackedNext.Load()
	time.Sleep(time.Second)
	require.Equal(t, held, h.f.ackedNext.Load(), "blocks produced while the backfill waited")
	require.LessOrEqual(t, held, uint64(100-4*3), "the backfill did not stop before the head")
	require.Greater(t, testutil.ToFloat64(m.lead.WithLabelValues("43114")), 30.0)

	// The sink catches up: the backfill goes on to the head.
	ends, err := adm.ListEndOffsets(t.Context(), topic)
	require.NoError(t, err)
	end, _ := ends.Lookup(topic, p)
	commit(end.Offset)
	require.Eventually(t, func() bool {
		if testutil.ToFloat64(m.leadHolding.WithLabelValues("43114")) == 1 {
			// Held again further on: the sink catches up again.
			ends, err := adm.ListEndOffsets(t.Context(), topic)
			require.NoError(t, err)
			end, _ := ends.Lookup(topic, p)
			commit(end.Offset)
		}
		return h.f.ackedNext.Load() > 100
	}, 30*time.Second, 20*time.Millisecond)
	h.stop(t)
	chain, reorgs := chaintest.Validate(t, chaintest.ReadEvents(t, k.cfg, topic, "43114"), 0, true)
	require.Empty(t, reorgs)
	require.Equal(t, wantNumbers(blocks), blockNumbers(chain))
	require.Equal(t, int64(100), node.MethodCalls("eth_getBlockReceipts"), "a block fetched twice")
}

// testPool is a pool over the given node URLs (comma-free: one per
// argument list entry) with cfg's other settings.
func testPool(t testing.TB, url, chain string, cfg rpc.PoolConfig, m *rpc.Metrics, more ...string) *rpc.Pool {
	t.Helper()
	cfg.Chain = chain
	for _, u := range append([]string{url}, more...) {
		cfg.Nodes = append(cfg.Nodes, chains.Node{URL: u})
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	p, err := rpc.NewPool(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHeadBlocksCarryTheirArrival: a block the chain reached while ingest
// watched has the moment the pool heard of it as its record's timestamp,
// so the time a slow fetch took is in it (the processor's head signal
// starts there).
func TestHeadBlocksCarryTheirArrival(t *testing.T) {
	blocks := recording(t)
	node := chaintest.NewNode(t, blocks)
	node.SetHead(20)
	k := newKafka(t, 4)
	h := start(t, k, node, testChain(1))
	h.waitAcked(t, 20)
	const fetchDelay = 300 * time.Millisecond
	node.SetDelay(fetchDelay)
	announced := time.Now()
	node.SetHead(21)
	h.waitAcked(t, 21)
	h.stop(t)

	stamps := blockTimestamps(t, k, 21)
	require.Len(t, stamps, 21)
	// Block 21: heard of at once, produced after at least one slow fetch.
	require.False(t, stamps[21].Before(announced.Truncate(time.Millisecond)), "Kafka keeps milliseconds")
	require.Less(t, stamps[21].Sub(announced), fetchDelay, "block 21's timestamp is its produce, not its arrival")
	seen, ok := h.f.deps.RPC.SeenAt(21)
	require.True(t, ok)
	require.Equal(t, seen.UnixMilli(), stamps[21].UnixMilli())
}

// blockTimestamps reads the test chain's block records with their Kafka
// timestamps, by block number, until it has blocks of n numbers.
func blockTimestamps(t *testing.T, k *kafka, n int) map[uint64]time.Time {
	t.Helper()
	cl, err := kgo.NewClient(append(k.cfg.BaseOpts(testenv.Logger(t), "test-read"),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	require.NoError(t, err)
	defer cl.Close()
	out := map[uint64]time.Time{}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err0(), "%d of %d blocks read", len(out), n)
		fs.EachRecord(func(r *kgo.Record) {
			ev, err := codec.DecodeChainEvent(r.Value)
			require.NoError(t, err)
			if b := ev.GetBlock(); b != nil {
				out[b.Number] = r.Timestamp
			}
		})
	}
	return out
}
