package replay

import (
	"testing"
	"time"
)

// simulatePacer runs a job of total messages at rate whose chunks each
// cost overhead besides their messages, and returns the messages per
// second it achieved and the largest chunk.
func simulatePacer(rate uint32, total int, overhead time.Duration) (float64, int) {
	t0 := time.Unix(1_700_000_000, 0)
	now := t0
	p := newPacer(rate, now)
	done, largest := 0, 0
	for done < total {
		n := min(p.budget(now, 2000), total-done)
		now = now.Add(overhead)
		done += n
		largest = max(largest, n)
		now = now.Add(p.produced(n, now))
	}
	return float64(done) / now.Sub(t0).Seconds(), largest
}

func TestPacerHoldsTheRateOnAverage(t *testing.T) {
	for _, overhead := range []time.Duration{0, 50 * time.Millisecond, 900 * time.Millisecond, 2 * time.Second, 9 * time.Second} {
		got, largest := simulatePacer(15, 20000, overhead)
		// The rate, whatever a chunk's fixed price below maxBehind: the
		// chunks grow to spread it.
		if got < 14 || got > 15.01 {
			t.Errorf("overhead %s: %.2f messages per second, want 15", overhead, got)
		}
		if most := int(15 * (time.Second + maxBehind).Seconds()); largest > most {
			t.Errorf("overhead %s: a chunk of %d messages, more than %d", overhead, largest, most)
		}
	}
	// Chunks that cost little hold a second's worth each.
	if _, largest := simulatePacer(15, 300, 10*time.Millisecond); largest > 16 {
		t.Errorf("a chunk of %d messages on schedule, want a second's worth", largest)
	}
}

func TestPacerForgivesArrearsBeyondMaxBehind(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	p := newPacer(10, now)
	// A minute's stall: the next chunk holds the chunk's second and
	// maxBehind's worth, and the job then waits for its schedule again.
	now = now.Add(time.Minute)
	caughtUp := p.budget(now, 2000)
	if want := 10 * int((time.Second + maxBehind).Seconds()); caughtUp != want {
		t.Fatalf("budget after a stall: %d, want %d", caughtUp, want)
	}
	if wait := p.produced(caughtUp, now); wait != time.Second {
		t.Fatalf("wait after catching up: %s, want 1s", wait)
	}
	if got := p.budget(now.Add(time.Second), 2000); got != 10 {
		t.Fatalf("budget back on schedule: %d, want 10", got)
	}
	// A block larger than the budget is produced whole, and paid for.
	if wait := p.produced(100, now.Add(time.Second)); wait != 10*time.Second {
		t.Fatalf("wait after 100 messages at 10/s: %s", wait)
	}
	if got := p.budget(now, 7); got != 7 {
		t.Fatalf("budget above the most a chunk may hold: %d, want 7", got)
	}
	unpaced := newPacer(0, now)
	if got, wait := unpaced.budget(now, 2000), unpaced.produced(2000, now); got != 2000 || wait != 0 {
		t.Fatalf("unpaced: budget %d, wait %s", got, wait)
	}
}

func TestReadWindowFollowsTheChunks(t *testing.T) {
	w := newReadWindow(10000)
	steps := []struct {
		used uint64
		cut  bool
		want uint64
	}{
		{3, true, 6},        // a dense webhook: a few blocks filled the budget
		{6, false, 12},      // the window read whole, budget not filled
		{12, false, 24},     // and again
		{1, true, 2},        // denser still
		{0, true, 1},        // never below a block
		{1, false, 2},       // sparse again: doubling
		{5000, true, 10000}, // never above the most
	}
	for i, s := range steps {
		w.chunked(s.used, s.cut)
		if w.blocks != s.want {
			t.Fatalf("step %d: window %d, want %d", i, w.blocks, s.want)
		}
	}
}
