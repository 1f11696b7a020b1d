package obs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

var errFlaky = errors.New("flaky")

// levels returns the level of every line logged to buf.
func levels(buf *bytes.Buffer) []string {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		_, rest, _ := strings.Cut(line, "level=")
		lvl, _, _ := strings.Cut(rest, " ")
		out = append(out, lvl)
	}
	return out
}

func logTo(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestRetrySucceedsAfterFailures(t *testing.T) {
	var buf bytes.Buffer
	calls := 0
	err := Retry{Initial: time.Microsecond, Max: time.Microsecond, Log: logTo(&buf), Msg: "x failed"}.Do(context.Background(), func() error {
		calls++
		if calls < 12 {
			return errFlaky
		}
		return nil
	})
	if err != nil || calls != 12 {
		t.Fatalf("err %v after %d calls, want nil after 12", err, calls)
	}
	// 11 failures: warned on the 1st and the 11th, debug otherwise.
	got := strings.Join(levels(&buf), ",")
	want := "WARN" + strings.Repeat(",DEBUG", 9) + ",WARN"
	if got != want {
		t.Fatalf("levels %s, want %s", got, want)
	}
	if !strings.Contains(buf.String(), "attempt=11") || !strings.Contains(buf.String(), "err=flaky") {
		t.Fatalf("log lacks the attempt or error: %s", buf.String())
	}
}

func TestRetryExpectedWarnsWhenItPersists(t *testing.T) {
	var buf bytes.Buffer
	calls := 0
	_ = Retry{Initial: time.Microsecond, Max: time.Microsecond, Attempts: 21, Log: logTo(&buf)}.Do(context.Background(), func() error {
		calls++
		return Expected(errFlaky)
	})
	var warns []int
	for i, l := range levels(&buf) {
		if l == "WARN" {
			warns = append(warns, i+1)
		}
	}
	if len(warns) != 2 || warns[0] != 10 || warns[1] != 20 {
		t.Fatalf("warned on failures %v, want [10 20]", warns)
	}
}

func TestRetryStops(t *testing.T) {
	r := Retry{Initial: time.Microsecond, Max: time.Microsecond, Attempts: 3}
	calls := 0
	err := r.Do(context.Background(), func() error { calls++; return Expected(errFlaky) })
	if calls != 3 || err != errFlaky {
		t.Fatalf("bounded: %d calls, err %v; want 3 calls and errFlaky unwrapped", calls, err)
	}

	calls = 0
	err = Retry{Initial: time.Microsecond, Max: time.Microsecond}.Do(context.Background(), func() error { calls++; return Permanent(errFlaky) })
	if calls != 1 || err != errFlaky {
		t.Fatalf("permanent: %d calls, err %v; want 1 call and errFlaky unwrapped", calls, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = Retry{Initial: time.Hour, Max: time.Hour}.Do(ctx, func() error {
		calls++
		cancel()
		return errFlaky
	})
	if calls != 1 || err != errFlaky {
		t.Fatalf("ctx ended: %d calls, err %v; want 1 call and the last error", calls, err)
	}
}

type retryAfter struct{ d time.Duration }

func (e retryAfter) Error() string             { return "slow down" }
func (e retryAfter) RetryAfter() time.Duration { return e.d }

func TestRetryHonoursRetryAfterUpToFourTimesMax(t *testing.T) {
	start := time.Now()
	calls := 0
	_ = Retry{Initial: time.Millisecond, Max: 10 * time.Millisecond, Attempts: 2}.Do(context.Background(), func() error {
		calls++
		return retryAfter{time.Hour}
	})
	if took := time.Since(start); calls != 2 || took < 40*time.Millisecond || took > 5*time.Second {
		t.Fatalf("%d calls in %s; want 2 calls about 40ms apart (4×Max, not the hour asked for)", calls, took)
	}
}

func TestRetryResetAfter(t *testing.T) {
	var buf bytes.Buffer
	calls := 0
	_ = Retry{Initial: time.Microsecond, Max: time.Microsecond, Attempts: 3, ResetAfter: 20 * time.Millisecond, Log: logTo(&buf)}.Do(context.Background(), func() error {
		calls++
		if calls == 2 {
			time.Sleep(30 * time.Millisecond) // it worked for a while
		}
		return errFlaky
	})
	// Failures 1 and 2 (a new run of failures after the long attempt) are
	// both first failures: warned.
	if got := strings.Join(levels(&buf), ","); got != "WARN,WARN" {
		t.Fatalf("levels %s, want WARN,WARN", got)
	}
}
