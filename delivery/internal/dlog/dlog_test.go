package dlog

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/accountdb"
)

type fakeStore struct {
	mu      sync.Mutex
	batches [][]accountdb.Delivery
	fail    int
}

func (f *fakeStore) PutDeliveries(_ context.Context, rows []accountdb.Delivery) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return errors.New("clickhouse down")
	}
	f.batches = append(f.batches, append([]accountdb.Delivery(nil), rows...))
	return nil
}

func (f *fakeStore) rows() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, b := range f.batches {
		n += len(b)
	}
	return n
}

// TestBatchesFlushesAndDrops: rows go out in batches of at most Batch,
// every FlushInterval, a failed insert is retried, a full buffer drops
// (counted), and stopping flushes what is buffered.
func TestBatchesFlushesAndDrops(t *testing.T) {
	st := &fakeStore{fail: 1}
	reg := prometheus.NewRegistry()
	l, err := New(Config{FlushInterval: 20 * time.Millisecond, Batch: 3, Buffer: 10}, st, slog.New(slog.DiscardHandler), reg)
	require.NoError(t, err)
	for i := range 12 { // two over the buffer
		l.Add(accountdb.Delivery{MessageID: string(rune('a' + i))})
	}
	require.Equal(t, 2.0, testutil.ToFloat64(l.rows.WithLabelValues("dropped")))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	require.Eventually(t, func() bool { return st.rows() == 10 }, 5*time.Second, 10*time.Millisecond)
	for _, b := range st.batches {
		require.LessOrEqual(t, len(b), 3)
	}
	l.Add(accountdb.Delivery{MessageID: "last"})
	cancel()
	<-done
	require.Equal(t, 11, st.rows(), "stopping flushes the buffer")
	require.Equal(t, 11.0, testutil.ToFloat64(l.rows.WithLabelValues("written")))
	_, err = New(Config{FlushInterval: time.Second, Batch: 10, Buffer: 5}, st, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	require.Error(t, err)
}

type fakeDropper struct {
	mu      sync.Mutex
	cutoffs []time.Time
	fail    bool
}

func (f *fakeDropper) DropDeliveriesBefore(_ context.Context, cutoff time.Time) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cutoffs = append(f.cutoffs, cutoff)
	if f.fail {
		f.fail = false
		return nil, errors.New("clickhouse down")
	}
	return []string{"202401"}, nil
}

func (f *fakeDropper) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.cutoffs)
}

// TestRetention: a pass at start and then every interval, the cutoff the
// retention before now, a failed pass retried at the next interval; no
// retention, no pass.
func TestRetention(t *testing.T) {
	now := time.Date(2024, 5, 20, 0, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	l, err := New(Config{FlushInterval: time.Second, Batch: 1, Buffer: 1, Retention: 30 * 24 * time.Hour, RetentionInterval: 10 * time.Millisecond},
		&fakeStore{}, slog.New(slog.DiscardHandler), reg)
	require.NoError(t, err)
	d := &fakeDropper{fail: true}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.RunRetention(ctx, d, func() time.Time { return now }) }()
	require.Eventually(t, func() bool { return d.calls() >= 3 }, 5*time.Second, 5*time.Millisecond)
	cancel()
	<-done
	require.Equal(t, time.Date(2024, 4, 20, 0, 0, 0, 0, time.UTC), d.cutoffs[0])
	require.Equal(t, float64(d.calls()-1), testutil.ToFloat64(l.dropped), "every pass but the failed first dropped one month")

	off, err := New(Config{FlushInterval: time.Second, Batch: 1, Buffer: 1}, &fakeStore{}, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	require.NoError(t, err)
	d = &fakeDropper{}
	require.NoError(t, off.RunRetention(context.Background(), d, time.Now))
	require.Zero(t, d.calls())

	_, err = New(Config{FlushInterval: time.Second, Batch: 1, Buffer: 1, Retention: time.Hour}, &fakeStore{}, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	require.Error(t, err, "a retention without an interval")
}
