package obs

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Retry is the policy of a retry loop: every loop in moraine that calls
// something again after a failure (a server not up yet, a batch to write
// again, a session to rebuild) runs through Retry.Do, so that all of them
// wait and log the same way.
//
// The logging rule: with Log set, a failed attempt is logged at Warn on the
// 1st, 11th, 21st... failure in a row, and at Debug otherwise, with Msg, the
// attempt number (1-based), the error and Attrs. An outage is visible at
// once and stays visible (a line about every minute at the usual backoff
// bounds) without a line per attempt. A failure marked Expected, which the
// loop waits out in normal operation, warns only from the 10th attempt on
// (10th, 20th...). A failure while ctx is ending is not logged: it is the
// shutdown, not the trouble. Without Log nothing is logged, for loops whose
// caller reports the outcome (a few attempts, then one error).
type Retry struct {
	// Initial and Max bound the wait between attempts (Backoff).
	Initial, Max time.Duration
	// Attempts bounds the calls of op; 0 calls it until it succeeds, fails
	// Permanently or ctx ends.
	Attempts int
	// ResetAfter, when positive, starts the backoff and the log count again
	// after an attempt that ran at least this long before it failed: it
	// worked for a while, so the next failure is news and the retry is quick.
	ResetAfter time.Duration

	Log   *slog.Logger
	Msg   string
	Attrs []any
}

// Do calls op until it returns nil, waiting Backoff between attempts. It
// returns nil once op succeeds; else op's last error (unwrapped from
// Permanent or Expected), when op fails Permanently, when the Attempts are
// used up, or when ctx ends (ctx is not checked before the first call, so op
// runs at least once).
//
// An error with a RetryAfter() time.Duration method (a server's requested
// delay) waits that long instead of the backoff when it is longer, up to
// four times Max.
func (r Retry) Do(ctx context.Context, op func() error) error {
	n := 0 // failures in a row
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := op()
		if err == nil {
			return nil
		}
		var p *permanentError
		if errors.As(err, &p) {
			return p.err
		}
		if ctx.Err() != nil || (r.Attempts > 0 && attempt >= r.Attempts) {
			return unwrapExpected(err)
		}
		if r.ResetAfter > 0 && time.Since(start) >= r.ResetAfter {
			n = 0
		}
		r.log(n+1, err)
		wait := Backoff(n, r.Initial, r.Max)
		var ra interface{ RetryAfter() time.Duration }
		if errors.As(err, &ra) && ra.RetryAfter() > wait {
			wait = min(ra.RetryAfter(), 4*r.Max)
		}
		n++
		if !Sleep(ctx, wait) {
			return unwrapExpected(err)
		}
	}
}

// log reports the nth failure in a row by the logging rule.
func (r Retry) log(n int, err error) {
	if r.Log == nil {
		return
	}
	level := slog.LevelDebug
	var e *expectedError
	if errors.As(err, &e) {
		if n%10 == 0 {
			level = slog.LevelWarn
		}
	} else if n%10 == 1 {
		level = slog.LevelWarn
	}
	if !r.Log.Enabled(context.Background(), level) {
		return
	}
	r.Log.Log(context.Background(), level, r.Msg, append([]any{"attempt", n, "err", err}, r.Attrs...)...)
}

// Permanent marks err as not worth retrying: Do returns it at once. A nil
// err stays nil (success).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// Expected marks err as a failure the loop waits out in normal operation
// (a block the node announced but does not serve yet): it is logged at
// Debug until it persists (see Retry). A nil err stays nil.
func Expected(err error) error {
	if err == nil {
		return nil
	}
	return &expectedError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

type expectedError struct{ err error }

func (e *expectedError) Error() string { return e.err.Error() }
func (e *expectedError) Unwrap() error { return e.err }

func unwrapExpected(err error) error {
	if e, ok := err.(*expectedError); ok {
		return e.err
	}
	return err
}

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
