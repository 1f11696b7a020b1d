package replay

import "time"

// maxBehind bounds what a paced job catches up in one chunk after it fell
// behind its schedule: at most this much of its rate on top of the chunk's
// second. It covers the slowest chunks measured (Kafka transactions of
// about 10 s while a processor's open transaction awaits its fencing,
// cluster fault suite), and keeps a job that was stalled for long to
// bounded bursts rather than its whole arrears at once.
const maxBehind = 10 * time.Second

// pacer holds a job to its messages per second on average.
//
// A chunk costs a fixed price besides its messages: its reads, and a Kafka
// transaction with its group fence and the webhook-stream catch-up, from a
// few tens of milliseconds to seconds on a busy cluster. Were each chunk
// to hold a second's worth and then wait out the rest of its second, a job
// would fall to a fraction of its rate whenever that price passes the
// second. So the pacer keeps a schedule (the time by which the messages
// produced so far were due) and lets a chunk hold what the job is behind
// it by, so that the price is spread over more messages.
type pacer struct {
	rate float64 // messages per second; 0: unpaced
	due  time.Time
}

func newPacer(rate uint32, now time.Time) *pacer {
	return &pacer{rate: float64(rate), due: now}
}

// budget is the most messages the next chunk, starting at now, may hold:
// a second's worth and what the job is behind its schedule by, and never
// more than most. Arrears beyond maxBehind are forgiven here: a job
// stalled for a minute goes on at its rate, after one larger chunk.
func (p *pacer) budget(now time.Time, most int) int {
	if p.rate <= 0 {
		return most
	}
	if now.Sub(p.due) > maxBehind {
		p.due = now.Add(-maxBehind)
	}
	behind := max(now.Sub(p.due), 0)
	return max(1, min(most, int(p.rate*(time.Second+behind).Seconds())))
}

// produced records a chunk of n messages produced at now and returns the
// wait before the next chunk may start.
func (p *pacer) produced(n int, now time.Time) time.Duration {
	if p.rate <= 0 || n <= 0 {
		return 0
	}
	p.due = p.due.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	return max(p.due.Sub(now), 0)
}

// readWindow is how many blocks the next chunk reads. Each chunk's reads
// (its canonical blocks, its candidates, its ledger entries) cost
// ClickHouse the whole range read, while a paced job's chunk holds a
// second or a few of messages: reading --replay.chunk-blocks blocks each
// time, a dense webhook's job would read thousands of blocks for a few
// blocks' worth, chunk after chunk (bench/history.md, "Paced replays").
// The window starts at most blocks and follows the chunks: twice the
// blocks of a chunk that its message budget cut, twice the window after
// one that read its window whole without filling its budget.
type readWindow struct {
	blocks, most uint64
}

func newReadWindow(most uint64) *readWindow { return &readWindow{blocks: most, most: most} }

// chunked records a chunk that took used blocks (from its first), cut by
// its message budget or not.
func (w *readWindow) chunked(used uint64, cut bool) {
	if cut {
		w.blocks = max(1, min(w.most, 2*used))
		return
	}
	w.blocks = min(w.most, 2*w.blocks)
}
