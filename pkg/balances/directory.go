package balances

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/moraine-data/moraine/pkg/evm"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// Head is the indexed head of a chain as a reader saw it before a read: the
// block number and hash of its chain_heads row.
type Head struct {
	Number uint64
	Hash   [32]byte
}

// directory remembers holders' directories (every pair of balance_pairs of
// a holder, sorted), each with the indexed head it was read under. The
// sink writes a block's pairs before the chain head that names the block
// (WriteChildren before WriteBlocks), so a directory read after the head
// was seen holds every pair of the blocks up to it, and stays whole while
// the head is the same block: a new block, or a reorg (a new head hash),
// reads it again. More pairs than a read needs are harmless (they sum to
// nothing), so the directory serves reads at any block up to its head.
//
// Entries are kept in two generations of at most budget/2 pairs each, as
// Native keeps its answers; a holder with more than perHolder pairs is not
// remembered, and remembered as such so its pages keep reading windows of
// the directory instead.
type directory struct {
	perHolder int
	budget    int

	mu                 sync.Mutex
	cur, old           map[dirKey]*dirEntry
	curPairs           int
	big                map[dirKey]bool
	loads              singleflight.Group
	hits, reads, wides int // for tests
}

type dirKey struct {
	chainID uint64
	holder  evm.Address
}

type dirEntry struct {
	head  Head
	pairs []schema.PairBytes
}

// newDirectory remembers up to budget pairs in all, and the directories of
// holders of up to perHolder pairs.
func newDirectory(budget, perHolder int) *directory {
	return &directory{perHolder: perHolder, budget: max(budget, 2), cur: map[dirKey]*dirEntry{}, big: map[dirKey]bool{}}
}

// get returns the holder's directory under head, reading it through read
// (one read at a time per holder, the others waiting for it) unless it is
// remembered; ok is false for a holder of more than perHolder pairs.
func (d *directory) get(ctx context.Context, k dirKey, head Head, read func(ctx context.Context, n int) ([]schema.PairBytes, bool, error)) (pairs []schema.PairBytes, ok bool, err error) {
	d.mu.Lock()
	if d.big[k] {
		d.wides++
		d.mu.Unlock()
		return nil, false, nil
	}
	e, found := d.cur[k]
	if !found {
		if e, found = d.old[k]; found && e.head == head {
			d.putLocked(k, e)
		}
	}
	if found && e.head == head {
		d.hits++
		d.mu.Unlock()
		return e.pairs, true, nil
	}
	d.mu.Unlock()
	v, err, _ := d.loads.Do(fmt.Sprintf("%d/%x/%d/%x", k.chainID, k.holder[:], head.Number, head.Hash[:]), func() (any, error) {
		d.mu.Lock()
		e, found := d.cur[k] // read by a flight that ended since
		d.mu.Unlock()
		if found && e.head == head {
			return e, nil
		}
		ps, done, err := read(ctx, d.perHolder+1)
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.reads++
		if !done {
			d.big[k] = true
			return (*dirEntry)(nil), nil
		}
		e = &dirEntry{head: head, pairs: ps}
		d.putLocked(k, e)
		return e, nil
	})
	if err != nil {
		return nil, false, err
	}
	if e := v.(*dirEntry); e != nil {
		return e.pairs, true, nil
	}
	return nil, false, nil
}

func (d *directory) putLocked(k dirKey, e *dirEntry) {
	if old, ok := d.cur[k]; ok {
		d.curPairs -= len(old.pairs)
	}
	if d.curPairs+len(e.pairs) > d.budget/2 {
		d.old, d.cur, d.curPairs = d.cur, map[dirKey]*dirEntry{}, 0
	}
	d.cur[k] = e
	d.curPairs += len(e.pairs)
}

// pairSource hands out the pairs of a page's windows: n at a time, from
// the remembered directory or, without one, from balance_pairs.
type pairSource interface {
	next(ctx context.Context, n int) (ps []schema.PairBytes, done bool, err error)
}

// listed is a remembered directory after a cursor, filtered as a query
// says.
type listed struct {
	q     Query
	pairs []schema.PairBytes
}

func newListed(q Query, all []schema.PairBytes) *listed {
	if q.After != nil {
		after := q.After.Bytes()
		i, found := slices.BinarySearchFunc(all, after, func(a, b schema.PairBytes) int { return bytes.Compare(a[:], b[:]) })
		if found {
			i++
		}
		all = all[i:]
	}
	return &listed{q: q, pairs: all}
}

func (l *listed) next(_ context.Context, n int) ([]schema.PairBytes, bool, error) {
	var out []schema.PairBytes
	for len(l.pairs) > 0 && len(out) < n {
		p := l.pairs[0]
		l.pairs = l.pairs[1:]
		if l.q.keeps(p) {
			out = append(out, p)
		}
	}
	return out, len(l.pairs) == 0, nil
}

// keeps reports whether pair p is of the query's kinds and tokens.
func (q Query) keeps(p schema.PairBytes) bool {
	if len(q.Kinds) > 0 && !slices.Contains(q.Kinds, p[schema.BalancePairLen-1]) {
		return false
	}
	if len(q.Tokens) == 0 {
		return true
	}
	for _, t := range q.Tokens {
		if bytes.Equal(t[:], p[:20]) {
			return true
		}
	}
	return false
}

// queried reads the windows from balance_pairs.
type queried struct {
	r     *Reader
	q     Query
	after *schema.PairBytes
}

func (s *queried) next(ctx context.Context, n int) ([]schema.PairBytes, bool, error) {
	ps, done, err := s.r.pairs(ctx, s.q, s.after, n)
	if len(ps) > 0 {
		s.after = &ps[len(ps)-1]
	}
	return ps, done, err
}
