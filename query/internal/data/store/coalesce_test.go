package store

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// fakeReads is a coalescer's read function that records the keys of each
// read and, while gate is open, blocks every read until it is closed.
type fakeReads struct {
	mu      sync.Mutex
	reads   [][]int
	started chan struct{} // one value per read started
	release chan struct{} // closed to let reads finish
	err     error
}

func newFakeReads() *fakeReads {
	return &fakeReads{started: make(chan struct{}, 100), release: make(chan struct{})}
}

func (f *fakeReads) read(_ context.Context, keys []int) (map[int]string, error) {
	f.mu.Lock()
	f.reads = append(f.reads, slices.Clone(keys))
	f.mu.Unlock()
	f.started <- struct{}{}
	<-f.release
	if f.err != nil {
		return nil, f.err
	}
	out := map[int]string{}
	for _, k := range keys {
		if k >= 0 { // negative keys have no value
			out[k] = "v" + string(rune('a'+k%26))
		}
	}
	return out, nil
}

func (f *fakeReads) recorded() [][]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.reads)
	for _, r := range out {
		slices.Sort(r)
	}
	return out
}

func newTestCoalescer(f *fakeReads, limit, maxKeys int) *coalescer[int, string] {
	return &coalescer[int, string]{
		name: "test", limit: limit, read: f.read, maxKeys: maxKeys, wait: time.Minute,
		together: func(a, b int) bool { return (a >= 100) == (b >= 100) }, // two groups: below 100 and from 100
		keys:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: "keys"}),
	}
}

type result struct {
	key int
	val string
	ok  bool
	err error
}

// getAsync starts a get and returns where its result arrives.
func getAsync(ctx context.Context, c *coalescer[int, string], key int) <-chan result {
	out := make(chan result, 1)
	go func() {
		v, ok, err := c.get(ctx, key)
		out <- result{key, v, ok, err}
	}()
	return out
}

// waitQueued waits until n requests wait in c.
func waitQueued(t *testing.T, c *coalescer[int, string], n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.waiting) == n
	}, 5*time.Second, time.Millisecond)
}

func TestCoalescerReadsALoneRequestAtOnce(t *testing.T) {
	f := newFakeReads()
	close(f.release)
	c := newTestCoalescer(f, 2, 64)
	v, ok, err := c.get(t.Context(), 3)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "vd", v)
	_, ok, err = c.get(t.Context(), -1)
	require.NoError(t, err)
	require.False(t, ok, "a key the read does not return has no value")
	require.Equal(t, [][]int{{3}, {-1}}, f.recorded())
}

// While the only read runs, later requests wait and are read together: one
// query for each group of keys that can share one, at most maxKeys distinct
// keys each, a key asked twice read once and answered twice.
func TestCoalescerReadsWaitingRequestsTogether(t *testing.T) {
	f := newFakeReads()
	c := newTestCoalescer(f, 1, 3)
	first := getAsync(t.Context(), c, 0)
	<-f.started
	var waiting []<-chan result
	for _, k := range []int{1, 100, 2, 2, 3, 101, 4, -5} {
		waiting = append(waiting, getAsync(t.Context(), c, k))
		waitQueued(t, c, len(waiting))
	}
	close(f.release)
	require.Equal(t, result{0, "va", true, nil}, <-first)
	for _, w := range waiting {
		r := <-w
		require.NoError(t, r.err)
		if r.key < 0 {
			require.False(t, r.ok)
			continue
		}
		require.True(t, r.ok)
		require.Equal(t, "v"+string(rune('a'+r.key%26)), r.val, "key %d", r.key)
	}
	// In order of the oldest waiting request: 1, 2, 2, 3 (three distinct
	// keys), then 100 and 101, then 4 and -5.
	require.Equal(t, [][]int{{0}, {1, 2, 3}, {100, 101}, {-5, 4}}, f.recorded())
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Zero(t, c.running, "every read loop ended when nothing was left")
}

func TestCoalescerAnswersEveryRequestOfAFailedRead(t *testing.T) {
	f := newFakeReads()
	f.err = errors.New("clickhouse said no")
	c := newTestCoalescer(f, 1, 64)
	first := getAsync(t.Context(), c, 0)
	<-f.started
	second, third := getAsync(t.Context(), c, 1), getAsync(t.Context(), c, 2)
	waitQueued(t, c, 2)
	close(f.release)
	for _, r := range []result{<-first, <-second, <-third} {
		require.ErrorIs(t, r.err, f.err)
	}
}

// A request whose caller gives up returns at once, and is not read if it
// was still waiting; the read it would have joined goes on for the others.
func TestCoalescerLetsACallerGoWithoutEndingTheRead(t *testing.T) {
	f := newFakeReads()
	c := newTestCoalescer(f, 1, 64)
	running, cancelRunning := context.WithCancel(t.Context())
	first := getAsync(running, c, 0)
	<-f.started
	waitingCtx, cancelWaiting := context.WithCancel(t.Context())
	gone := getAsync(waitingCtx, c, 1)
	stays := getAsync(t.Context(), c, 2)
	waitQueued(t, c, 2)

	cancelWaiting()
	require.ErrorIs(t, (<-gone).err, context.Canceled)
	cancelRunning()
	require.ErrorIs(t, (<-first).err, context.Canceled)

	close(f.release)
	r := <-stays
	require.NoError(t, r.err)
	require.Equal(t, "vc", r.val)
	require.Equal(t, [][]int{{0}, {2}}, f.recorded(), "the request whose caller left was not read")
}

// A request queued behind a read that hangs fails when its wait is over, as
// a read of its own would have at the store's deadline.
func TestCoalescerBoundsAWaitBehindAHungRead(t *testing.T) {
	f := newFakeReads()
	defer close(f.release)
	c := newTestCoalescer(f, 1, 64)
	c.wait = 50 * time.Millisecond
	hung := getAsync(t.Context(), c, 0)
	<-f.started
	start := time.Now()
	_, _, err := c.get(t.Context(), 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, ErrUnavailable)
	require.Less(t, time.Since(start), 5*time.Second)
	require.ErrorIs(t, (<-hung).err, context.DeadlineExceeded)
}
