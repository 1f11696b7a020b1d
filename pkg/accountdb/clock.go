package accountdb

import (
	"sync"
	"time"
)

// Clock hands out row versions: Unix nanoseconds, strictly increasing within
// the process even if the wall clock stalls or steps back.
//
// Several writers (query instances, the command-line tool) each have their
// own Clock, so versions are ordered across writers only as well as their
// clocks agree. Two rules keep that safe: a change is always written with a
// version above the version of the row it was based on (Next(floor)), so a
// read-modify-write never loses to the row it read even on a lagging clock;
// and for two truly concurrent changes of one key on different instances,
// the one with the higher version wins in ClickHouse, and the reconciler
// then makes the topic agree with ClickHouse. Keep clocks NTP-synchronised;
// skew only decides which of two concurrent writers wins.
type Clock struct {
	mu   sync.Mutex
	last uint64
	now  func() time.Time
}

// NewClock returns a clock reading now (time.Now when nil).
func NewClock(now func() time.Time) *Clock {
	if now == nil {
		now = time.Now
	}
	return &Clock{now: now}
}

// Next returns a version greater than every earlier result and than floor.
func (c *Clock) Next(floor uint64) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := uint64(c.now().UnixNano())
	if v <= c.last {
		v = c.last + 1
	}
	if v <= floor {
		v = floor + 1
	}
	c.last = v
	return v
}
