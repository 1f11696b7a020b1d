package pipeline

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errDeferred: the endpoint host is busy beyond the queue's bounds.
var errDeferred = errors.New("endpoint host busy")

// limiter bounds concurrent attempts per endpoint host and in all.
//
// A host whose slots are all taken queues further messages. When maxQueue
// already wait and the host is slow (its attempts' moving average latency
// is above slow, or no slot has freed for slow/4), a further message is
// deferred at once; any message that waits longer than the acquire's wait
// is deferred too. A fast host with a backlog (a burst, a restart) keeps
// its queue: it drains it quickly.
type limiter struct {
	global   chan struct{}
	perHost  int
	maxQueue int
	slow     time.Duration

	mu    sync.Mutex
	hosts map[string]*hostSlots
}

type hostSlots struct {
	slots   chan struct{}
	waiting int
	refs    int           // holders and waiters; the entry goes at zero
	latency time.Duration // moving average of attempt durations
	freed   time.Time     // when a slot last freed (or the entry was made)
}

func newLimiter(global, perHost, maxQueue int, slow time.Duration) *limiter {
	return &limiter{global: make(chan struct{}, global), perHost: perHost, maxQueue: maxQueue, slow: slow, hosts: map[string]*hostSlots{}}
}

func (l *limiter) unref(host string, h *hostSlots) {
	if h.refs--; h.refs == 0 {
		delete(l.hosts, host)
	}
}

// acquire takes a slot of host and then a global one. It returns
// errDeferred when the host is slow and maxQueue others already wait, or
// when no host slot frees within wait, and ctx's error when ctx ends.
// release takes the attempt's duration.
func (l *limiter) acquire(ctx context.Context, host string, wait time.Duration) (release func(time.Duration), err error) {
	l.mu.Lock()
	h := l.hosts[host]
	if h == nil {
		h = &hostSlots{slots: make(chan struct{}, l.perHost), freed: time.Now()}
		l.hosts[host] = h
	}
	h.refs++
	select {
	case h.slots <- struct{}{}:
		l.mu.Unlock()
	default:
		if h.waiting >= l.maxQueue && (h.latency > l.slow || time.Since(h.freed) > l.slow/4) {
			l.unref(host, h)
			l.mu.Unlock()
			return nil, errDeferred
		}
		h.waiting++
		l.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case h.slots <- struct{}{}:
			t.Stop()
			l.mu.Lock()
			h.waiting--
			l.mu.Unlock()
		case <-t.C:
			err = errDeferred
		case <-ctx.Done():
			t.Stop()
			err = ctx.Err()
		}
		if err != nil {
			l.mu.Lock()
			h.waiting--
			l.unref(host, h)
			l.mu.Unlock()
			return nil, err
		}
	}
	releaseHost := func(d time.Duration) {
		<-h.slots
		l.mu.Lock()
		if d >= 0 {
			// An exponential moving average over about the last 8 attempts.
			h.latency += (d - h.latency) / 8
		}
		h.freed = time.Now()
		l.unref(host, h)
		l.mu.Unlock()
	}
	select {
	case l.global <- struct{}{}:
	case <-ctx.Done():
		releaseHost(-1)
		return nil, ctx.Err()
	}
	return func(d time.Duration) {
		<-l.global
		releaseHost(d)
	}, nil
}
