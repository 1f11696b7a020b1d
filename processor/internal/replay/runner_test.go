package replay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFailedJobsWaitLongerEachTime: a job that keeps failing (Kafka or
// ClickHouse unreachable) starts again after 1, 2, 4, ... s, at most the
// bound; one that ended well starts again at once and its next failure
// waits the least again.
func TestFailedJobsWaitLongerEachTime(t *testing.T) {
	w := newRetryWaits(time.Second, 5*time.Second)
	now := time.Unix(1000, 0)
	require.True(t, w.mayStart("j", now))
	for _, want := range []time.Duration{1, 2, 4, 5, 5} {
		require.Equal(t, want*time.Second, w.started("j"))
		w.ended("j", true, now)
		require.False(t, w.mayStart("j", now.Add(want*time.Second-time.Millisecond)), "held back %s", want*time.Second)
		now = now.Add(want * time.Second)
		require.True(t, w.mayStart("j", now))
	}
	w.started("j")
	w.ended("j", false, now)
	require.True(t, w.mayStart("j", now))
	require.Equal(t, time.Second, w.started("j"))

	w.ended("j", true, now)
	w.keepOnly(func(string) bool { return false })
	require.True(t, w.mayStart("j", now), "a job that ended elsewhere is forgotten")
}
