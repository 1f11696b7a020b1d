package balances

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/moraine-data/moraine/pkg/evm"
)

// memo remembers one value per holder, each with the version of the chain
// it was read under (V: a head, or a summed prefix), so a read under the
// same version takes it instead of reading ClickHouse. Concurrent reads of
// one holder and version wait for one read. Values are kept in two
// generations of at most budget/2 size units each (pairs); a holder whose
// value does not fit (the read says so) is remembered as such, and its
// reads go to ClickHouse every time.
type memo[V comparable, T any] struct {
	budget int

	mu                 sync.Mutex
	cur, old           map[dirKey]*memoEntry[V, T]
	curSize            int
	big                map[dirKey]bool
	loads              singleflight.Group
	hits, reads, wides int // for tests
}

type dirKey struct {
	chainID uint64
	holder  evm.Address
}

type memoEntry[V comparable, T any] struct {
	version V
	value   T
	size    int
}

func newMemo[V comparable, T any](budget int) *memo[V, T] {
	return &memo[V, T]{budget: max(budget, 2), cur: map[dirKey]*memoEntry[V, T]{}, big: map[dirKey]bool{}}
}

// get returns the holder's value under version, reading it through read
// unless it is remembered; ok is false for a holder whose value does not
// fit (read returned fits false). read returns the value and its size.
func (m *memo[V, T]) get(ctx context.Context, k dirKey, version V, read func(ctx context.Context) (v T, size int, fits bool, err error)) (value T, ok bool, err error) {
	var zero T
	m.mu.Lock()
	if m.big[k] {
		m.wides++
		m.mu.Unlock()
		return zero, false, nil
	}
	e, found := m.cur[k]
	if !found {
		if e, found = m.old[k]; found && e.version == version {
			m.putLocked(k, e)
		}
	}
	if found && e.version == version {
		m.hits++
		m.mu.Unlock()
		return e.value, true, nil
	}
	m.mu.Unlock()
	v, err, _ := m.loads.Do(fmt.Sprintf("%d/%x/%v", k.chainID, k.holder[:], version), func() (any, error) {
		m.mu.Lock()
		e, found := m.cur[k] // read by a flight that ended since
		m.mu.Unlock()
		if found && e.version == version {
			return e, nil
		}
		// One read serves every waiting caller: not the first one's
		// cancellation, but a deadline of its own.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), memoReadTimeout)
		defer cancel()
		v, size, fits, err := read(ctx)
		if err != nil {
			return nil, err
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.reads++
		if !fits {
			m.big[k] = true
			return (*memoEntry[V, T])(nil), nil
		}
		e = &memoEntry[V, T]{version: version, value: v, size: size}
		m.putLocked(k, e)
		return e, nil
	})
	if err != nil {
		return zero, false, err
	}
	if e := v.(*memoEntry[V, T]); e != nil {
		return e.value, true, nil
	}
	return zero, false, nil
}

// memoReadTimeout bounds the read of a value to remember.
const memoReadTimeout = 10 * time.Second

func (m *memo[V, T]) putLocked(k dirKey, e *memoEntry[V, T]) {
	if old, ok := m.cur[k]; ok {
		m.curSize -= old.size
	}
	if m.curSize+e.size > m.budget/2 {
		m.old, m.cur, m.curSize = m.cur, map[dirKey]*memoEntry[V, T]{}, 0
	}
	m.cur[k] = e
	m.curSize += e.size
}
