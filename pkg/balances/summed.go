package balances

import (
	"bytes"
	"context"
	"math/big"
	"slices"

	"github.com/moraine-data/moraine/pkg/chclient"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// A holder's summed state: per pair, the sum of its level-2 and level-1
// rows of a plan's summed prefix (epochs, buckets). Summed buckets never
// change (the roller sums only settled blocks), so one state serves every
// read whose plan has the same prefix: every read past the summed buckets
// (at and near the head), until the roller sums the next bucket, about
// every 1,024 blocks. Such a read then takes the deltas since (level 0) of
// all the holder's pairs after its cursor, one key range per level-1
// bucket of deltas (two or three), and adds them to the state: a page is
// one read however many of the holder's pairs have a zero balance. Read a
// window at a time instead, the page of a holder of 10,000 NFTs who sent
// 2,000 others read three windows of its directory, each of five or six
// ranges (docs/balances.md, "Pages").

// summedAt is the summed prefix a state is read under.
type summedAt struct{ epochs, buckets uint64 }

// summedPair is a pair's non-zero sum in a state.
type summedPair struct {
	pair schema.PairBytes
	sum  *big.Int
}

// summedRowsPerPair bounds the rows read for a state, per pair a holder
// may have (the remembered directories' limit): a holder of a few pairs
// each moved in every level-1 bucket of the current level-2 bucket reads
// a page a window at a time instead.
const summedRowsPerPair = 8

// summed returns q.Holder's state under l's prefix, read unless
// remembered; ok is false when r remembers none or the holder's state is
// too large to remember.
func (r *Reader) summed(ctx context.Context, q Query, p Progress, l levels) (st []summedPair, ok bool, err error) {
	return r.states.get(ctx, dirKey{q.ChainID, q.Holder}, summedAt{l.epochs, l.buckets}, func(ctx context.Context) ([]summedPair, int, bool, error) {
		ranges := l.summedRanges(q.ChainID, q.Holder, schema.PairBytes{}, schema.MaxPair)
		rows, err := r.rows(ctx, rowBudget(summedRowsPerPair*r.dirs.perHolder), Query{}, ranges)
		if chclient.TooManyRows(err) {
			return nil, 0, false, nil
		}
		if err != nil {
			return nil, 0, false, err
		}
		sums, _, err := r.sum(ctx, q.ChainID, p, l, rows)
		if err != nil {
			return nil, 0, false, err
		}
		for pair, v := range sums {
			if v.Sign() != 0 {
				st = append(st, summedPair{pair: pair, sum: v})
			}
		}
		slices.SortFunc(st, func(a, b summedPair) int { return bytes.Compare(a.pair[:], b.pair[:]) })
		return st, len(st), len(st) <= r.dirs.perHolder, nil
	})
}

// pageFromSummed answers the page q at the levels l, whose summed prefix
// is p's (a read past the summed buckets), from the holder's state and the
// deltas since. ok is false when the state is not remembered: the caller
// reads windows instead. Only for chains whose balances start at their
// first block: no opening balances to add.
func (r *Reader) pageFromSummed(ctx context.Context, q Query, p Progress, l levels) (res Result, ok bool, err error) {
	st, ok, err := r.summed(ctx, q, p, l)
	if err != nil || !ok {
		return Result{}, false, err
	}
	res.Progress = p
	lo := schema.PairBytes{}
	if q.After != nil {
		lo = q.After.Bytes()
	}
	rows, err := r.rows(ctx, nil, q, l.deltaRanges(q.ChainID, q.Holder, lo, schema.MaxPair))
	if err != nil {
		return Result{}, false, err
	}
	deltas, _, err := r.sum(ctx, q.ChainID, p, l, rows)
	if err != nil {
		return Result{}, false, err
	}
	moved := make([]schema.PairBytes, 0, len(deltas))
	for pair := range deltas {
		moved = append(moved, pair)
	}
	slices.SortFunc(moved, func(a, b schema.PairBytes) int { return bytes.Compare(a[:], b[:]) })

	// The pairs after the cursor of the state and of the deltas, in order.
	i, _ := slices.BinarySearchFunc(st, lo, func(s summedPair, t schema.PairBytes) int { return bytes.Compare(s.pair[:], t[:]) })
	j := 0
	listed := 0
	for i < len(st) || j < len(moved) {
		c := 0 // which comes first: the state's pair (-1), the moved one (1), or one pair in both
		switch {
		case j == len(moved):
			c = -1
		case i == len(st):
			c = 1
		default:
			c = bytes.Compare(st[i].pair[:], moved[j][:])
		}
		var pair schema.PairBytes
		v := new(big.Int)
		if c <= 0 {
			pair = st[i].pair
			v.Set(st[i].sum)
			i++
		}
		if c >= 0 {
			pair = moved[j]
			v.Add(v, deltas[pair])
			j++
		}
		if (q.After != nil && bytes.Compare(pair[:], lo[:]) <= 0) || !q.keeps(pair) {
			continue
		}
		if v.Sign() == 0 {
			continue
		}
		if listed == q.Limit {
			res.More = true
			return res, true, nil
		}
		h := Holding{BalancePair: pair.Pair(), Balance: v}
		res.Holdings = append(res.Holdings, h)
		if h.Listable() {
			listed++
		}
	}
	return res, true, nil
}
