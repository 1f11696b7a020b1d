package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLimiter(t *testing.T) {
	ctx := context.Background()
	l := newLimiter(3, 2, 1, 400*time.Millisecond)

	// Two slots per host; the third waits, and is deferred after wait.
	r1, err := l.acquire(ctx, "a", time.Second)
	require.NoError(t, err)
	r2, err := l.acquire(ctx, "a", time.Second)
	require.NoError(t, err)
	start := time.Now()
	_, err = l.acquire(ctx, "a", 50*time.Millisecond)
	require.ErrorIs(t, err, errDeferred)
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)

	// Another host is not affected; the global bound (3) is.
	r3, err := l.acquire(ctx, "b", time.Second)
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = l.acquire(cctx, "c", time.Second)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	r3(time.Millisecond)

	// A queue slot frees when a holder releases.
	done := make(chan error, 1)
	go func() {
		r, err := l.acquire(ctx, "a", time.Second)
		if err == nil {
			r(time.Millisecond)
		}
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	r1(time.Millisecond)
	require.NoError(t, <-done)

	// A host whose slots have not freed for slow/4, with maxQueue waiting,
	// defers at once.
	r4, err := l.acquire(ctx, "a", time.Second)
	require.NoError(t, err)
	time.Sleep(150 * time.Millisecond)
	waited := make(chan struct{})
	go func() { // the one allowed to wait
		defer close(waited)
		if r, err := l.acquire(ctx, "a", 300*time.Millisecond); err == nil {
			r(time.Millisecond)
		}
	}()
	time.Sleep(20 * time.Millisecond)
	start = time.Now()
	_, err = l.acquire(ctx, "a", time.Second)
	require.ErrorIs(t, err, errDeferred)
	require.Less(t, time.Since(start), 100*time.Millisecond)
	r2(time.Millisecond)
	r4(time.Millisecond)
	<-waited
	l.mu.Lock()
	defer l.mu.Unlock()
	require.Empty(t, l.hosts, "entries go when nobody holds or waits")
}
