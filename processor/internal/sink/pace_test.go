package sink

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/processor/internal/budget"
	"github.com/moraine-data/moraine/schemas/topics"
)

// TestPausedPollIntegration: during a backfill batch's pause, a record of a
// chain at its head is released at once with the held records of its
// partition before it, the other partitions' records stay held until the
// pause ends, and nothing is lost or reordered on the way.
func TestPausedPollIntegration(t *testing.T) {
	kcfg := testenv.Kafka(t)
	logger := testenv.Logger(t)
	topic := kcfg.Topic(topics.Blocks)
	prod, err := kafkautil.NewClient(t.Context(), logger, append(kcfg.BaseOpts(logger, "pace-test"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	require.NoError(t, err)
	defer prod.Close()
	// Chain 1 backfills on partition 0, chain 2 is at its head on
	// partition 1; partition 0 also carries a record of chain 2 first (two
	// chains can share a partition).
	send := func(key string, part int32, value string) {
		t.Helper()
		require.NoError(t, prod.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Partition: part, Key: []byte(key), Value: []byte(value)}).FirstErr())
	}
	cl, err := kafkautil.NewClient(t.Context(), logger, kcfg.ConsumerOpts(logger, "pace-test", kcfg.TopicPrefix+"pace-test-"+testenv.Suffix(), topic)...)
	require.NoError(t, err)
	defer cl.Close()

	b := budget.New(budget.Config{ReadLatencyTarget: 50 * time.Millisecond, MinShare: 0.1, BackfillLag: time.Minute},
		prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	c := &consumer{cfg: Config{BatchRows: 1000}, cl: cl, budget: b, atHead: map[string]bool{"1": false, "2": true}}

	// Joined and assigned first: a warm-up record comes back.
	send("1", 0, "w0")
	require.Eventually(t, func() bool {
		f := cl.PollFetches(t.Context())
		cl.AllowRebalance()
		return len(f.Records()) == 1
	}, 30*time.Second, 10*time.Millisecond)

	// No pause due, nothing held: nothing.
	require.Empty(t, c.pausedPoll(t.Context()))

	send("1", 0, "a1")
	send("1", 0, "a2")
	send("1", 1, "b1") // chain 1's record on partition 1, before chain 2's head
	c.pauseUntil = time.Now().Add(3 * time.Second)
	go func() {
		time.Sleep(time.Second)
		send("2", 1, "h1")
	}()
	start := time.Now()
	got := c.pausedPoll(t.Context())
	require.Less(t, time.Since(start), 2500*time.Millisecond, "the head record ended the wait")
	require.Equal(t, []string{"b1", "h1"}, values(got), "partition 1's held record, then the head's")
	require.Equal(t, []string{"a1", "a2"}, values(c.held), "partition 0's stay held")
	cl.AllowRebalance()

	// The pause goes on: the held records come out when it ends, with
	// what arrived meanwhile, in order.
	send("1", 0, "a3")
	got = c.pausedPoll(t.Context())
	require.False(t, time.Now().Before(start.Add(3*time.Second)), "returned before the pause ended")
	require.Equal(t, []string{"a1", "a2", "a3"}, values(got))
	require.Empty(t, c.held)
	require.True(t, c.pauseUntil.IsZero())
	cl.AllowRebalance()
}

func values(rs []*kgo.Record) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, string(r.Value))
	}
	return out
}

// TestBatchesShrinkWithTheShare: while the budget holds the backfill back, a
// batch and a poll are the share's fraction of a full one (with floors), so
// that a batch's pause, at most maxPause, is what the share asks for.
func TestBatchesShrinkWithTheShare(t *testing.T) {
	for _, tc := range []struct {
		minShare              float64
		slowProbes, batchRows int
		wantRows, wantPoll    int
	}{
		{minShare: 0.1, slowProbes: 0, batchRows: 200000, wantRows: 200000, wantPoll: pollChunk},
		{minShare: 0.1, slowProbes: 50, batchRows: 200000, wantRows: 20000, wantPoll: 25},
		{minShare: 0.01, slowProbes: 50, batchRows: 200000, wantRows: minThrottledBatchRows, wantPoll: minThrottledPoll},
		{minShare: 0.1, slowProbes: 1, batchRows: 200000, wantRows: 140000, wantPoll: 179},
		{minShare: 0.1, slowProbes: 50, batchRows: 5000, wantRows: 5000, wantPoll: 25},
	} {
		b := budget.New(budget.Config{ReadLatencyTarget: 50 * time.Millisecond, MinShare: tc.minShare, BackfillLag: time.Minute},
			prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		for range tc.slowProbes {
			b.Observe(time.Second)
		}
		c := &consumer{cfg: Config{BatchRows: tc.batchRows}, budget: b}
		require.Equal(t, tc.wantRows, c.batchRows(), "rows at share %g", b.Share())
		require.Equal(t, tc.wantPoll, c.pollSize(), "poll at share %g", b.Share())
	}
}
