package balances

import (
	"bytes"
	"context"
	"slices"

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
// A holder with more than perHolder pairs is not remembered, and
// remembered as such so its pages keep reading windows of the directory
// instead.
type directory struct {
	perHolder int
	*memo[Head, []schema.PairBytes]
}

// newDirectory remembers up to budget pairs in all, and the directories of
// holders of up to perHolder pairs.
func newDirectory(budget, perHolder int) *directory {
	return &directory{perHolder: perHolder, memo: newMemo[Head, []schema.PairBytes](budget)}
}

// get returns the holder's directory under head, reading up to n pairs
// through read unless it is remembered; ok is false for a holder of more
// than perHolder pairs.
func (d *directory) get(ctx context.Context, k dirKey, head Head, read func(ctx context.Context, n int) ([]schema.PairBytes, bool, error)) ([]schema.PairBytes, bool, error) {
	return d.memo.get(ctx, k, head, func(ctx context.Context) ([]schema.PairBytes, int, bool, error) {
		ps, done, err := read(ctx, d.perHolder+1)
		return ps, len(ps), done, err
	})
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
