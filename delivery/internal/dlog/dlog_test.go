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
