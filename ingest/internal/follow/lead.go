package follow

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// lead bounds how far a backfill runs ahead of the consumer group that
// writes the chain to ClickHouse (the processor's sink): while the chain's
// partition holds more than max records the group has not committed, the
// follower fetches no new span below the head. Fetching a backfill is
// ingest's largest CPU cost, and the node's (the replay source's here): if
// the sink gives way to reads (the processor's write budget), this makes
// ingest give way too, instead of filling Kafka at full speed. At the head
// nothing waits.
//
// Unknown (the group has committed nothing on the partition yet, or Kafka
// does not answer): no bound, so a misnamed group never stalls a chain.
//
// Between two reads the lead is estimated: the lead read plus the blocks
// dispatched since, as if the sink had committed nothing meanwhile. The
// estimate only overstates, so the bound holds however late a read comes
// (a loaded machine can delay one by seconds, in which a fast node's
// backfill could otherwise run to the head).
type lead struct {
	f     *Follower
	adm   *kadm.Client
	group string
	max   int64

	mu      sync.Mutex
	known   bool
	read    int64  // the lead at the last read
	sent    uint64 // blocks dispatched, in all
	readAt  uint64 // sent at the last read
	holding bool
	wake    chan struct{} // closed when holding turns false
}

// leadPoll is how often the group's committed offset is read (a variable
// for tests).
var leadPoll = 500 * time.Millisecond

func newLead(f *Follower) *lead {
	if f.cfg.LeadGroup == "" || f.cfg.MaxLead <= 0 {
		return nil
	}
	return &lead{f: f, adm: kadm.NewClient(f.deps.Kafka), group: f.cfg.LeadGroup, max: f.cfg.MaxLead, wake: make(chan struct{})}
}

// refresh reads the lead once. Run calls it before the first span is
// dispatched, so that a restart against a sink far behind does not start
// with a burst.
func (l *lead) refresh(ctx context.Context) {
	l.mu.Lock()
	at := l.sent
	l.mu.Unlock()
	n, known := l.measure(ctx)
	l.f.deps.Metrics.lead.WithLabelValues(l.f.chain).Set(float64(n))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.known, l.read, l.readAt = known, n, at
	l.setLocked(l.overLocked())
}

// run refreshes the lead every leadPoll until ctx ends.
func (l *lead) run(ctx context.Context) {
	t := time.NewTicker(leadPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.mu.Lock()
			l.known = false
			l.setLocked(false)
			l.mu.Unlock()
			return
		case <-t.C:
			l.refresh(ctx)
		}
	}
}

// measure is how many records of the chain's partition the group has not
// committed, plus the blocks dispatched but not yet acknowledged by Kafka.
func (l *lead) measure(ctx context.Context) (int64, bool) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	topic := l.f.cfg.Topic
	ends, err := l.adm.ListEndOffsets(rctx, topic)
	if err != nil || ends.Error() != nil {
		return 0, false
	}
	p := partitionFor(topic, l.f.key, len(ends[topic]))
	end, ok := ends.Lookup(topic, p)
	if !ok {
		return 0, false
	}
	offs, err := l.adm.FetchOffsets(rctx, l.group)
	if err != nil || offs.Error() != nil {
		return 0, false
	}
	committed, ok := offs.Lookup(topic, p)
	if !ok || committed.At < 0 {
		return 0, false
	}
	// Blocks fetched or being fetched but not yet in Kafka are ahead of the
	// sink too: without them, a burst of fetches would pass the bound
	// before Kafka showed it.
	var unacked int64
	if d, a := l.f.dispatchedNext.Load(), l.f.ackedNext.Load(); d > a {
		unacked = int64(d - a)
	}
	return max(0, end.Offset-committed.At) + unacked, true
}

// overLocked is whether the estimated lead passes the bound.
func (l *lead) overLocked() bool {
	return l.known && l.read+int64(l.sent-l.readAt) > l.max
}

func (l *lead) setLocked(holding bool) {
	if holding == l.holding {
		return
	}
	l.holding = holding
	v := 0.0
	if holding {
		v = 1
		l.f.logger.Info("backfill waits for the sink", "group", l.group, "max_lead", l.max)
	} else {
		close(l.wake)
		l.wake = make(chan struct{})
	}
	l.f.deps.Metrics.leadHolding.WithLabelValues(l.f.chain).Set(v)
}

// hold reports whether a backfill span may not be dispatched now, and a
// channel closed once that changes.
func (l *lead) hold() (bool, <-chan struct{}) {
	if l == nil {
		return false, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setLocked(l.overLocked())
	return l.holding, l.wake
}

// dispatched counts n blocks handed to a fetch into the estimate.
func (l *lead) dispatched(n uint64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.sent += n
	l.mu.Unlock()
}
