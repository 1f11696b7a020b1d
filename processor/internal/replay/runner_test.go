package replay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFailedJobsWaitLongerEachTime: a job that keeps failing (Kafka or
// ClickHouse unreachable) starts again after about 1, 2, 4, ... s (obs.Backoff:
// up to a fifth less, so that instances spread out), at most the bound; one
// that ended well starts again at once and its next failure waits the least
// again.
func TestFailedJobsWaitLongerEachTime(t *testing.T) {
	w := newRetryWaits(time.Second, 5*time.Second)
	now := time.Unix(1000, 0)
	require.True(t, w.mayStart("j", now))
	inRange := func(got, want time.Duration) {
		t.Helper()
		require.True(t, got > want*4/5 && got <= want, "wait %s, want about %s", got, want)
	}
	for _, want := range []time.Duration{1, 2, 4, 5, 5} {
		wait := w.started("j")
		inRange(wait, want*time.Second)
		w.ended("j", true, now)
		require.False(t, w.mayStart("j", now.Add(wait-time.Millisecond)), "held back %s", wait)
		now = now.Add(wait)
		require.True(t, w.mayStart("j", now))
	}
	w.started("j")
	w.ended("j", false, now)
	require.True(t, w.mayStart("j", now))
	inRange(w.started("j"), time.Second)

	w.ended("j", true, now)
	w.keepOnly(func(string) bool { return false })
	require.True(t, w.mayStart("j", now), "a job that ended elsewhere is forgotten")
}
