package pipeline

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// item is one dispatched record; seq is its place in the partition's
// offset list.
type item struct {
	rec *kgo.Record
	seq int64
}

// offState is a dispatched offset: done once its record needs no more work
// here. Finished records keep only this, not the record.
type offState struct {
	off   int64
	epoch int32
	done  bool
}

// spanFactor bounds the offsets tracked behind the oldest unfinished
// record: window*spanFactor.
const spanFactor = 64

// partition runs one assigned topic partition: it takes fetched records
// in offset order, waits for a retry record's due time, dispatches each to
// its own goroutine, and tracks which offsets are done so that the commit
// only ever passes finished records.
//
// window bounds the records dispatched and not finished; records behind an
// unfinished one (a slow endpoint's) keep flowing, tracked as bare offsets,
// up to window*spanFactor of them. The commit waits for the unfinished one:
// a crash then redelivers what followed it (at least once).
type partition struct {
	pl     *Pipeline
	topic  string
	part   int32
	level  int // 0: activity, l: retry level l
	window int

	loopCtx    context.Context // dispatching
	stopLoop   context.CancelFunc
	itemCtx    context.Context // attempts and their durable steps
	stopItems  context.CancelFunc
	loopDone   chan struct{}
	items      sync.WaitGroup
	wake       chan struct{}
	windowFree chan struct{}

	mu         sync.Mutex
	queue      []*kgo.Record // fetched, not dispatched
	paused     bool
	offs       []offState // dispatched offsets, in order, from the oldest unfinished
	base       int64      // seq of offs[0]
	unfinished int
	next       int64 // offset to commit (-1: nothing finished yet)
	epoch      int32
	committed  int64
}

func newPartition(pl *Pipeline, topic string, part int32, level int) *partition {
	w := &partition{
		pl: pl, topic: topic, part: part, level: level, window: pl.cfg.PartitionWindow,
		loopDone: make(chan struct{}), wake: make(chan struct{}, 1), windowFree: make(chan struct{}, 1),
		next: -1, committed: -1,
	}
	w.loopCtx, w.stopLoop = context.WithCancel(context.Background())
	w.itemCtx, w.stopItems = context.WithCancel(context.Background())
	go w.loop()
	return w
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// add queues fetched records (poll loop) and reports whether the
// partition should now be paused (its queue reached the window).
func (w *partition) add(recs []*kgo.Record) (pause bool) {
	w.mu.Lock()
	w.queue = append(w.queue, recs...)
	if !w.paused && len(w.queue) >= w.window {
		w.paused, pause = true, true
	}
	w.mu.Unlock()
	signal(w.wake)
	return pause
}

// pop takes the next record, waiting for one; it resumes fetching when the
// queue has drained to half the window.
func (w *partition) pop() (*kgo.Record, bool) {
	for {
		w.mu.Lock()
		if len(w.queue) > 0 {
			r := w.queue[0]
			w.queue[0] = nil
			w.queue = w.queue[1:]
			resume := w.paused && len(w.queue) <= w.window/2
			if resume {
				w.paused = false
			}
			w.mu.Unlock()
			if resume {
				w.pl.resume(w.topic, w.part)
			}
			return r, true
		}
		w.mu.Unlock()
		select {
		case <-w.wake:
		case <-w.loopCtx.Done():
			return nil, false
		}
	}
}

func (w *partition) loop() {
	defer close(w.loopDone)
	for {
		rec, ok := w.pop()
		if !ok {
			return
		}
		if w.level > 0 {
			// Records of one level are in due order: waiting for the
			// head is waiting for the partition.
			if wait := time.Until(dueOf(rec)); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-w.loopCtx.Done():
					t.Stop()
					return
				}
			}
		}
		it, ok := w.track(rec)
		if !ok {
			return
		}
		w.items.Add(1)
		go func() {
			defer w.items.Done()
			w.pl.process(w, it)
		}()
	}
}

// track registers rec as dispatched once the window has room.
func (w *partition) track(rec *kgo.Record) (*item, bool) {
	for {
		w.mu.Lock()
		if w.unfinished < w.window && len(w.offs) < w.window*spanFactor {
			it := &item{rec: rec, seq: w.base + int64(len(w.offs))}
			w.offs = append(w.offs, offState{off: rec.Offset, epoch: rec.LeaderEpoch})
			w.unfinished++
			w.mu.Unlock()
			return it, true
		}
		w.mu.Unlock()
		select {
		case <-w.windowFree:
		case <-w.loopCtx.Done():
			return nil, false
		}
	}
}

// finish marks it done and advances the commit offset past every finished
// offset at the head.
func (w *partition) finish(it *item) {
	w.mu.Lock()
	w.offs[it.seq-w.base].done = true
	w.unfinished--
	n := 0
	for n < len(w.offs) && w.offs[n].done {
		w.next = w.offs[n].off + 1
		w.epoch = w.offs[n].epoch
		n++
	}
	if n > 0 {
		w.offs = w.offs[n:]
		w.base += int64(n)
		if cap(w.offs) > 4*w.window && len(w.offs) < cap(w.offs)/4 {
			w.offs = append([]offState(nil), w.offs...)
		}
	}
	w.mu.Unlock()
	signal(w.windowFree)
}

// toCommit returns the offset to commit if it moved since the last commit.
func (w *partition) toCommit() (kgo.EpochOffset, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.next < 0 || w.next == w.committed {
		return kgo.EpochOffset{}, false
	}
	return kgo.EpochOffset{Epoch: w.epoch, Offset: w.next}, true
}

func (w *partition) markCommitted(off int64) {
	w.mu.Lock()
	if off > w.committed {
		w.committed = off
	}
	w.mu.Unlock()
}

// stop stops dispatching and waits up to drain for the attempts in flight
// (graceful), then cancels the rest and waits for them to give up. Records
// not finished are redelivered to whoever owns the partition next.
func (w *partition) stop(drain time.Duration) {
	w.stopLoop()
	<-w.loopDone
	if drain > 0 {
		done := make(chan struct{})
		go func() { w.items.Wait(); close(done) }()
		t := time.NewTimer(drain)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	w.stopItems()
	w.items.Wait()
}
