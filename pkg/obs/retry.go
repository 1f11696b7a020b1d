package obs

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff returns the wait before retry attempt n (0-based): exponential from
// initial, capped at max, with up to 20% jitter so that many clients retrying
// at once spread out.
func Backoff(n int, initial, max time.Duration) time.Duration {
	d := initial
	for i := 0; i < n && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// Sleep waits d or until ctx ends; it reports whether the full wait elapsed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
