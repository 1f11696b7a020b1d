package ratelimit

import (
	"context"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moraine-data/moraine/query/internal/access/plan"
)

// Window is one budget: Quota compute units per Length (0 Quota: unlimited).
type Window struct {
	Quota  int64
	Length time.Duration
}

// Policy is the set of windows a request must fit in, e.g. 8,000 CU per
// minute and 2,000,000 per day.
type Policy struct {
	Windows []Window
}

// PolicyFor returns a plan's policy for one of instances query instances:
// each quota divided by instances (rounded up), so that instances counting
// separately admit about the plan's budget in total when a load balancer
// spreads a client's requests evenly.
func PolicyFor(p plan.Plan, instances int) Policy {
	if instances < 1 {
		instances = 1
	}
	div := func(q int64) int64 {
		if q == 0 {
			return 0
		}
		return (q + int64(instances) - 1) / int64(instances)
	}
	var ws []Window
	if p.CUPerMinute > 0 {
		ws = append(ws, Window{Quota: div(p.CUPerMinute), Length: time.Minute})
	}
	if p.CUPerDay > 0 {
		ws = append(ws, Window{Quota: div(p.CUPerDay), Length: 24 * time.Hour})
	}
	return Policy{Windows: ws}
}

// Header is the ratelimit-policy value: "8000;w=60, 2000000;w=86400".
func (p Policy) Header() string {
	parts := make([]string, len(p.Windows))
	for i, w := range p.Windows {
		parts[i] = strconv.FormatInt(w.Quota, 10) + ";w=" + strconv.FormatInt(int64(w.Length/time.Second), 10)
	}
	return strings.Join(parts, ", ")
}

// Decision is the outcome of one Take.
type Decision struct {
	Allowed bool
	// Limit and Remaining describe the window closest to exhaustion (the
	// IETF draft's choice for RateLimit-Limit / RateLimit-Remaining).
	Limit     int64
	Remaining int64
	// Reset is the time until that window starts over; when the request was
	// refused, until every window that refused it has room again.
	Reset time.Duration
}

// Limiter charges compute units. Implementations must be safe for
// concurrent use. The in-process Memory limiter is the only one shipped; a
// shared store (Redis, a database) can implement the same interface to make
// several instances share one budget.
type Limiter interface {
	Take(ctx context.Context, subject string, p Policy, cost int64, now time.Time) (Decision, error)
}

// Memory is a fixed-window limiter in process memory. Windows are aligned
// to the Unix epoch (minutes start at :00, days at 00:00 UTC), so every
// instance and every restart agrees on when a window resets. A request is
// charged to every window or to none: a refused request costs nothing.
//
// A restart forgets the counts (a client may get up to one extra budget).
type Memory struct {
	seed   maphash.Seed
	shards [64]shard
}

type shard struct {
	mu       sync.Mutex
	subjects map[string]*usage
}

type usage struct {
	windows []windowUse
	last    time.Time
}

type windowUse struct {
	index int64 // which window (Unix time / length)
	used  int64
}

// NewMemory returns an empty limiter.
func NewMemory() *Memory {
	m := &Memory{seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].subjects = map[string]*usage{}
	}
	return m
}

func (m *Memory) shard(subject string) *shard {
	return &m.shards[maphash.String(m.seed, subject)%uint64(len(m.shards))]
}

// Take implements Limiter.
func (m *Memory) Take(_ context.Context, subject string, p Policy, cost int64, now time.Time) (Decision, error) {
	s := m.shard(subject)
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.subjects[subject]
	if u == nil || len(u.windows) != len(p.Windows) {
		u = &usage{windows: make([]windowUse, len(p.Windows))}
		s.subjects[subject] = u
	}
	u.last = now
	nowNs := now.UnixNano()
	for i, w := range p.Windows {
		idx := nowNs / int64(w.Length)
		if u.windows[i].index != idx {
			u.windows[i] = windowUse{index: idx}
		}
	}
	until := func(i int) time.Duration {
		l := int64(p.Windows[i].Length)
		return time.Duration((u.windows[i].index+1)*l - nowNs)
	}
	d := Decision{Allowed: true}
	for i, w := range p.Windows {
		if w.Quota > 0 && u.windows[i].used+cost > w.Quota {
			d.Allowed = false
			if r := until(i); r > d.Reset {
				d.Reset = r
			}
		}
	}
	if d.Allowed {
		for i := range p.Windows {
			u.windows[i].used += cost
		}
	}
	best := -1
	for i, w := range p.Windows {
		if w.Quota == 0 {
			continue
		}
		rem := max(w.Quota-u.windows[i].used, 0)
		if best < 0 || rem < d.Remaining {
			best, d.Limit, d.Remaining = i, w.Quota, rem
		}
	}
	if d.Allowed && best >= 0 {
		d.Reset = until(best)
	}
	return d, nil
}

// Sweep forgets subjects not seen for idle (longer than the longest window,
// so no count that still matters is lost) and returns how many remain.
func (m *Memory) Sweep(now time.Time, idle time.Duration) int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for k, u := range s.subjects {
			if now.Sub(u.last) > idle {
				delete(s.subjects, k)
			}
		}
		n += len(s.subjects)
		s.mu.Unlock()
	}
	return n
}
