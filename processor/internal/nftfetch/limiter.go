package nftfetch

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errBusy: the host's slots stayed taken for the whole wait.
var errBusy = errors.New("metadata host busy")

// limiter bounds concurrent fetches per host and in all. A fetch waits at
// most hostWait for a slot of its host: a slow host then costs the waiting
// fetches a deferral, never the worker's other hosts their turn.
type limiter struct {
	global  chan struct{}
	perHost int

	mu    sync.Mutex
	hosts map[string]*hostSlots
}

type hostSlots struct {
	slots chan struct{}
	refs  int // holders and waiters; the entry goes at zero
}

func newLimiter(global, perHost int) *limiter {
	return &limiter{global: make(chan struct{}, global), perHost: perHost, hosts: map[string]*hostSlots{}}
}

// acquire takes a slot of host, then a global one. It returns errBusy when
// no host slot frees within hostWait, and ctx's error when ctx ends.
func (l *limiter) acquire(ctx context.Context, host string, hostWait time.Duration) (release func(), err error) {
	l.mu.Lock()
	h := l.hosts[host]
	if h == nil {
		h = &hostSlots{slots: make(chan struct{}, l.perHost)}
		l.hosts[host] = h
	}
	h.refs++
	l.mu.Unlock()
	unref := func() {
		l.mu.Lock()
		if h.refs--; h.refs == 0 {
			delete(l.hosts, host)
		}
		l.mu.Unlock()
	}
	t := time.NewTimer(hostWait)
	defer t.Stop()
	select {
	case h.slots <- struct{}{}:
	case <-t.C:
		unref()
		return nil, errBusy
	case <-ctx.Done():
		unref()
		return nil, ctx.Err()
	}
	select {
	case l.global <- struct{}{}:
	case <-ctx.Done():
		<-h.slots
		unref()
		return nil, ctx.Err()
	}
	return func() {
		<-l.global
		<-h.slots
		unref()
	}, nil
}
