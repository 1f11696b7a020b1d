package pipeline

import (
	"context"
	"flag"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestScheduleFlag(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.RegisterFlags(fs)
	require.Equal(t, DefaultSchedule(), c.Schedule, "the default is the hosted service's")
	require.Equal(t, 10, c.Schedule.Attempts())
	require.Equal(t, "10s,1m0s,5m0s,10m0s,30m0s,2h0m0s,6h0m0s,12h0m0s,24h0m0s", c.Schedule.String())
	require.NoError(t, fs.Parse([]string{"--delivery.retry-schedule=100ms, 200ms,1s"}))
	require.Equal(t, Schedule{100 * time.Millisecond, 200 * time.Millisecond, time.Second}, c.Schedule)
	require.NoError(t, c.Validate())
	require.Error(t, fs.Parse([]string{"--delivery.retry-schedule=1s,soon"}))
	c.Schedule = make(Schedule, 10)
	for i := range c.Schedule {
		c.Schedule[i] = time.Second
	}
	require.ErrorContains(t, c.Validate(), "1 to 9 waits")
	c = DefaultConfig()
	c.KeyEncoding = "base64"
	require.ErrorContains(t, c.Validate(), "signature-key-encoding")
}

func TestRetryHeaders(t *testing.T) {
	p := &Pipeline{retryTopics: []string{"r1", "r2"}}
	src := &kgo.Record{Key: []byte("w"), Value: []byte("v"), Headers: []kgo.RecordHeader{{Key: "schema", Value: []byte("s")}, {Key: HeaderAttempt, Value: []byte("2")}}}
	due := time.UnixMilli(1_700_000_000_123)
	r := p.retryRecord(2, src, 3, due)
	require.Equal(t, "r2", r.Topic)
	require.Equal(t, 3, attemptOf(r, 2))
	require.Equal(t, due, dueOf(r))
	require.Len(t, r.Headers, 3, "the old attempt header is replaced")
	require.Equal(t, 1, attemptOf(src, 0), "activity records are attempt 1")
	require.Equal(t, 5, attemptOf(&kgo.Record{}, 4), "a level without the header: level+1")
}

// TestPartitionCommitsOnlyFinishedOffsets: the commit offset stops at the
// oldest unfinished record while later ones keep being dispatched and
// finished.
func TestPartitionCommitsOnlyFinishedOffsets(t *testing.T) {
	w := &partition{window: 2, next: -1, committed: -1, windowFree: make(chan struct{}, 1)}
	w.loopCtx, w.stopLoop = context.WithCancel(context.Background())
	defer w.stopLoop()
	rec := func(off int64) *kgo.Record { return &kgo.Record{Offset: off, LeaderEpoch: 3} }
	a, ok := w.track(rec(10))
	require.True(t, ok)
	b, _ := w.track(rec(11))
	_, ok = w.toCommit()
	require.False(t, ok)
	w.finish(b) // 11 done, 10 still running: nothing to commit
	_, ok = w.toCommit()
	require.False(t, ok)
	c, _ := w.track(rec(12)) // the window counts unfinished records only
	w.finish(c)
	w.finish(a)
	eo, ok := w.toCommit()
	require.True(t, ok)
	require.Equal(t, kgo.EpochOffset{Epoch: 3, Offset: 13}, eo)
	w.markCommitted(13)
	_, ok = w.toCommit()
	require.False(t, ok)

	// A full window blocks until a record finishes.
	d, _ := w.track(rec(13))
	_, _ = w.track(rec(14))
	got := make(chan int64, 1)
	go func() {
		it, _ := w.track(rec(15))
		got <- it.seq
	}()
	select {
	case <-got:
		t.Fatal("track did not wait for the window")
	case <-time.After(50 * time.Millisecond):
	}
	w.finish(d)
	require.Equal(t, strconv.Itoa(5), strconv.FormatInt(<-got, 10))
}
