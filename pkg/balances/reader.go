package balances

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/moraine-data/moraine/pkg/evm"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// Query asks what Holder held at Block.
type Query struct {
	ChainID uint64
	Holder  evm.Address
	Block   uint64
	// Kinds keeps these kinds only (evm.Kind values); empty: every kind.
	Kinds []uint8
	// Tokens keeps these tokens only; empty: every token. On a chain whose
	// balances start after its first block, a named ERC-20 token is opened
	// even when Holder has no transfer of it since (Opener), so the answer
	// for it is complete.
	Tokens []evm.Address
	// After starts the answer after this pair (list order: ComparePairs);
	// Limit, when positive, ends it once it holds Limit listable holdings
	// (Listable), and Result.More then says whether more may follow. A
	// page of a list so reads the rows of its own pairs only: the pairs
	// come from the holder's directory (balance_pairs), a window at a time.
	After *schema.BalancePair
	Limit int
	// Head, when set, is the chain's indexed head as the caller saw it
	// before the read: the holder's directory may then be remembered for
	// the next pages read under the same head, and a page past the summed
	// buckets may read from the holder's summed state (Remember).
	Head *Head
}

// Holding is Holder's balance of one pair at the block.
type Holding struct {
	schema.BalancePair
	Balance *big.Int
	// Partial: the balances start after the chain's first block and the
	// opening balance of this pair could not be read (no Opener, or the
	// node could not say): Balance counts only the transfers since
	// Progress.First.
	Partial bool
}

// Listable reports whether h is what a list shows: a positive balance
// whose opening is known.
func (h Holding) Listable() bool { return h.Balance.Sign() > 0 && !h.Partial }

// Result is the answer to a Query.
type Result struct {
	// Holdings has every pair whose balance is not zero (negative sums,
	// which a standard token never has, included: see docs/balances.md),
	// and every partial one, sorted by token, token id and kind (after
	// Query.After, up to Query.Limit listable ones).
	Holdings []Holding
	// More: Query.Limit ended the answer and pairs may follow its last.
	More bool
	// Progress is the chain's, as the read used it.
	Progress Progress
}

// Reader reads balances at a block: per pair, the sum of a holder's rows of
// every level that together cover the chain up to the block (plan), the
// deltas kept only where their block is canonical. What one read touches
// is bounded by the levels' bucket sizes, not by the holder's number of
// transfers (docs/balances.md, "Layout"), and a page of a list reads the
// pairs of that page.
type Reader struct {
	db        DB
	canonical Canonical
	opener    *Opener

	mu       sync.Mutex
	progress map[uint64]cachedProgress
	now      func() time.Time

	// What r remembers (Remember); nil: nothing.
	dirs   *directory
	states *memo[summedAt, []summedPair]
}

type cachedProgress struct {
	p  Progress
	at time.Time
}

// progressTTL is how long a chain's progress is reused. A stale progress
// only makes a read use fewer sums and more rows below them, never a wrong
// answer: summed rows stay where they were.
const progressTTL = 2 * time.Second

// NewReader returns a reader on db; canonical decides which deltas count,
// opener (nil: none) finds missing opening balances.
func NewReader(db DB, canonical Canonical, opener *Opener) *Reader {
	return &Reader{db: db, canonical: canonical, opener: opener, progress: map[uint64]cachedProgress{}, now: time.Now}
}

// Remember makes r remember, for the reads that name the head they are
// made under (Query.Head), the directories of holders of up to perHolder
// pairs and their summed states (summed.go), budget pairs of each in all
// (a directory's pair takes 73 bytes, a state's about 120). Call it before
// the first read.
func (r *Reader) Remember(budget, perHolder int) {
	if budget > 0 && perHolder > 0 {
		r.dirs = newDirectory(budget, perHolder)
		r.states = newMemo[summedAt, []summedPair](budget)
	}
}

// Progress returns the chain's progress, read at most progressTTL ago.
func (r *Reader) Progress(ctx context.Context, chainID uint64) (Progress, error) {
	r.mu.Lock()
	c, ok := r.progress[chainID]
	r.mu.Unlock()
	if ok && r.now().Sub(c.at) < progressTTL {
		return c.p, nil
	}
	p, err := ReadProgress(ctx, r.db, chainID)
	if err != nil {
		return Progress{}, err
	}
	r.mu.Lock()
	r.progress[chainID] = cachedProgress{p: p, at: r.now()}
	r.mu.Unlock()
	return p, nil
}

// keyRange is an inclusive range of bal_key.
type keyRange struct{ from, to schema.BalanceKey }

// levels says which rows of each level make a holder's balances at block
// b (plan), as bounds on their bucket:
//
//	level 3  the opening rows read at the chain's opening block;
//	level 2  the summed level-2 buckets before b's: bucket < epochs;
//	level 1  the summed level-1 buckets from there up to b's:
//	         epochs*1024 <= bucket < buckets;
//	level 0  the deltas of the blocks from there up to b:
//	         buckets*1024 <= block <= b, of canonical blocks.
type levels struct {
	epochs, buckets, block uint64
	// parents are the parent buckets of the level-1 and level-0 rows.
	l1Parents, l0Parents [2]uint64 // first, last (first > last: none)
}

// plan returns the levels of a read at block b, given the chain's progress.
// With the rollups keeping up, that is six key ranges per pair window at
// most (levels 3 and 2, one or two level-1 parents, two or three level-0
// ones); every level-1 bucket the rollup is behind adds one, up to
// maxDeltaBuckets.
func plan(b uint64, p Progress) (levels, error) {
	const perEpoch = 1 << (schema.EpochBits - schema.BucketBits)
	k1, k2 := b>>schema.BucketBits, b>>schema.EpochBits
	buckets := min(k1, p.Buckets)
	epochs := min(k2, p.Epochs, buckets/perEpoch)
	if k1-buckets >= maxDeltaBuckets {
		return levels{}, fmt.Errorf("%w: block %d is %d blocks past the summed balances", ErrBehind, b, b-buckets<<schema.BucketBits)
	}
	l := levels{epochs: epochs, buckets: buckets, block: b, l1Parents: [2]uint64{1, 0}, l0Parents: [2]uint64{buckets, k1}}
	if buckets > epochs*perEpoch {
		l.l1Parents = [2]uint64{epochs, (buckets - 1) / perEpoch}
	}
	return l, nil
}

// ranges are the key ranges of holder's rows of pairs [lo, hi] at the
// levels l: the opening rows when the chain has openings, the summed ones
// and the deltas.
func (l levels) ranges(chainID uint64, holder [20]byte, lo, hi schema.PairBytes, openings bool) []keyRange {
	var out []keyRange
	if openings {
		out = append(out, holderRange(chainID, schema.BalanceLevelOpening, 0, holder, lo, hi))
	}
	out = append(out, l.summedRanges(chainID, holder, lo, hi)...)
	return append(out, l.deltaRanges(chainID, holder, lo, hi)...)
}

// summedRanges are the key ranges of holder's level-2 and level-1 rows of
// pairs [lo, hi] at the levels l.
func (l levels) summedRanges(chainID uint64, holder [20]byte, lo, hi schema.PairBytes) []keyRange {
	var out []keyRange
	if l.epochs > 0 {
		out = append(out, holderRange(chainID, schema.BalanceLevelEpoch, 0, holder, lo, hi))
	}
	for e := l.l1Parents[0]; e <= l.l1Parents[1] && l.l1Parents[0] <= l.l1Parents[1]; e++ {
		out = append(out, holderRange(chainID, schema.BalanceLevelBucket, e, holder, lo, hi))
	}
	return out
}

// deltaRanges are the key ranges of holder's level-0 rows of pairs [lo, hi]
// at the levels l.
func (l levels) deltaRanges(chainID uint64, holder [20]byte, lo, hi schema.PairBytes) []keyRange {
	var out []keyRange
	for j := l.l0Parents[0]; j <= l.l0Parents[1]; j++ {
		out = append(out, holderRange(chainID, schema.BalanceLevelDelta, j, holder, lo, hi))
	}
	return out
}

// holderRange is the key range of holder's rows of pairs [lo, hi] of one
// level and parent.
func holderRange(chainID uint64, level uint8, parent uint64, holder [20]byte, lo, hi schema.PairBytes) keyRange {
	from, to := schema.BalanceHolderRange(chainID, level, parent, holder, lo, hi)
	return keyRange{from, to}
}

// counts reports whether a row of level-1 or level-2 bucket, or level-0
// block, is part of the balances at l (the ranges read whole parents).
func (l levels) counts(k *schema.BalanceKey) bool {
	const perEpoch = 1 << (schema.EpochBits - schema.BucketBits)
	switch k.Level() {
	case schema.BalanceLevelEpoch:
		return k.Bucket() < l.epochs
	case schema.BalanceLevelBucket:
		return k.Bucket() >= l.epochs*perEpoch && k.Bucket() < l.buckets
	case schema.BalanceLevelDelta:
		return k.Bucket() >= l.buckets<<schema.BucketBits && k.Bucket() <= l.block
	}
	return true
}

// maxDeltaBuckets bounds the level-1 buckets of deltas one read takes (one
// key range each): the roller keeps two or three unsummed behind the
// head, more only while it catches up after an outage or during a
// backfill.
const maxDeltaBuckets = 256

// ErrBehind means the block asked about is further past the summed buckets
// than one read takes (maxDeltaBuckets): the roller is catching up.
var ErrBehind = errors.New("balances: not summed yet")

// rangeSlots is the number of key ranges one qHolderRows reads; a plan with
// more takes several reads.
const rangeSlots = 8

// holderRowsQuery reads the rows of n key ranges (1 to rangeSlots: two
// hex keys each), of q's kinds (the set of kind numbers) and tokens (the
// set of hex addresses, upper case as hex() writes them) when q names
// some (filterArgs). A filter q does not use is left out of the text, not
// switched off by a parameter, and no range slot is left empty: ClickHouse
// 18.16 evaluates every condition on every row read, and the hex() of
// every key and the empty ranges cost a list page more than reading its
// rows (bench/history.md, "Balance reads"). LIMIT 1 BY drops copies of a
// row that merges have not collapsed yet: a redelivered block writes the
// same keys again.
func holderRowsQuery(n int, q Query) string {
	var b strings.Builder
	b.WriteString("SELECT bal_key, amount\nFROM balances\nWHERE (")
	for i := range n {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString("(bal_key >= unhex(?) AND bal_key <= unhex(?))")
	}
	b.WriteString(")")
	b.WriteString(q.filterText("bal_key", schema.BalanceKindAt+1, schema.BalancePairAt+1))
	b.WriteString("\nLIMIT 1 BY bal_key")
	return b.String()
}

// pairsQuery reads the next pairs of a holder's directory after a key (up
// to ?), filtered as holderRowsQuery.
func pairsQuery(q Query) string {
	return "SELECT pair_key\nFROM balance_pairs\nWHERE pair_key > unhex(?) AND pair_key <= unhex(?)" +
		q.filterText("pair_key", schema.PairKeyLen, schema.PairKeyHolderLen+1) +
		"\nORDER BY pair_key\nLIMIT 1 BY pair_key\nLIMIT ?"
}

// filterText is the conditions on q's kinds and tokens, for a key column
// with the kind byte and the token at these (1-based) positions.
func (q Query) filterText(col string, kindAt, tokenAt int) string {
	var s string
	if len(q.Kinds) > 0 {
		s += fmt.Sprintf("\n\tAND reinterpretAsUInt8(substring(%s, %d, 1)) IN ?", col, kindAt)
	}
	if len(q.Tokens) > 0 {
		s += fmt.Sprintf("\n\tAND hex(substring(%s, %d, 20)) IN ?", col, tokenAt)
	}
	return s
}

// filterArgs are the sets filterText's conditions take.
func (q Query) filterArgs() []any {
	var args []any
	if len(q.Kinds) > 0 {
		kinds := make([]any, len(q.Kinds))
		for i, k := range q.Kinds {
			kinds[i] = k
		}
		args = append(args, clickhouse.GroupSet{Value: kinds})
	}
	if len(q.Tokens) > 0 {
		tokens := make([]any, len(q.Tokens))
		for i, t := range q.Tokens {
			tokens[i] = strings.ToUpper(hex.EncodeToString(t[:]))
		}
		args = append(args, clickhouse.GroupSet{Value: tokens})
	}
	return args
}

// row is one bal_key and amount read.
type row struct {
	key    schema.BalanceKey
	amount string
}

// rows reads every row of the ranges, filtered as q says, with the
// settings (nil: none).
func (r *Reader) rows(ctx context.Context, settings clickhouse.Settings, q Query, ranges []keyRange) ([]row, error) {
	const name = "balance_rows"
	var out []row
	for len(ranges) > 0 {
		n := min(len(ranges), rangeSlots)
		args := make([]any, 0, 2*n+2)
		for _, rg := range ranges[:n] {
			args = append(args, hex.EncodeToString(rg.from[:]), hex.EncodeToString(rg.to[:]))
		}
		args = append(args, q.filterArgs()...)
		ranges = ranges[n:]
		rows, done, err := r.db.Query(ctx, name, settings, holderRowsQuery(n, q), args...)
		if err != nil {
			return nil, err
		}
		err = each(name, rows, func() error {
			var key, amount string
			if err := rows.Scan(&key, &amount); err != nil {
				return scanErr(name, err)
			}
			k, err := schema.ParseBalanceKey(key)
			if err != nil {
				return fmt.Errorf("balances: %s: %w", name, err)
			}
			out = append(out, row{key: k, amount: amount})
			return nil
		})
		done()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pairs reads up to n pairs of q.Holder's directory after after (nil: from
// the first), filtered as q says; done is true when the directory has no
// more.
func (r *Reader) pairs(ctx context.Context, q Query, after *schema.PairBytes, n int) (out []schema.PairBytes, done bool, err error) {
	const name = "balance_pairs"
	// From the all-zero pair, which no holding has (kind 0 is none).
	from := schema.NewPairKey(q.ChainID, q.Holder, schema.PairBytes{})
	if after != nil {
		from = schema.NewPairKey(q.ChainID, q.Holder, *after)
	}
	to := schema.NewPairKey(q.ChainID, q.Holder, schema.MaxPair)
	args := append([]any{hex.EncodeToString(from[:]), hex.EncodeToString(to[:])}, q.filterArgs()...)
	args = append(args, n)
	rows, release, err := r.db.Query(ctx, name, nil, pairsQuery(q), args...)
	if err != nil {
		return nil, false, err
	}
	defer release()
	err = each(name, rows, func() error {
		var key string
		if err := rows.Scan(&key); err != nil {
			return scanErr(name, err)
		}
		if len(key) != schema.PairKeyLen {
			return fmt.Errorf("balances: %s: pair_key of %d bytes", name, len(key))
		}
		var k schema.PairKey
		copy(k[:], key)
		out = append(out, k.Pair())
		return nil
	})
	return out, len(out) < n, err
}

// pageSlack is the number of pairs the first window of a paged read takes
// beyond its limit (pairs of zero balance are in the directory too); each
// next window is pageGrowth times the last, so a page behind thousands of
// pairs a holder no longer has (an NFT trader's) takes a few windows.
const (
	pageSlack  = 8
	pageGrowth = 4
)

// At answers q.
func (r *Reader) At(ctx context.Context, q Query) (Result, error) {
	p, err := r.Progress(ctx, q.ChainID)
	if err != nil {
		return Result{}, err
	}
	l, err := plan(q.Block, p)
	if err != nil {
		return Result{}, fmt.Errorf("chain %d: %w", q.ChainID, err)
	}
	res := Result{Progress: p}
	// A whole answer, or a page of a few named ERC-20 tokens: one window.
	if q.Limit <= 0 || (len(q.Tokens) > 0 && len(q.Kinds) == 1 && q.Kinds[0] == uint8(evm.ERC20)) {
		lo, hi := schema.PairBytes{}, schema.MaxPair
		if len(q.Tokens) > 0 {
			lo, hi = tokenSpan(q.Tokens)
		}
		hs, err := r.window(ctx, q, p, l, lo, hi, true)
		if err != nil {
			return Result{}, err
		}
		res.Holdings, res.More = Page(hs, q.After, q.Limit)
		return res, nil
	}
	// A page past the summed buckets: the holder's summed state and the
	// deltas since.
	if r.states != nil && q.Head != nil && p.Complete() && l.buckets == p.Buckets {
		if res, ok, err := r.pageFromSummed(ctx, q, p, l); err != nil || ok {
			return res, err
		}
	}
	// A page: the directory's pairs after the cursor, a window at a time,
	// until the page is full or the pairs end. At a block below the summed
	// buckets the directory also lists the pairs the holder first had
	// after it, which have no rows there: the first window is then as
	// large as a second one, which costs ClickHouse about as much as a
	// smaller one (a window reads about a granule per key range and part).
	src, err := r.pairSource(ctx, q)
	if err != nil {
		return Result{}, err
	}
	listed := 0
	first := q.Limit + 1 + pageSlack
	if l.buckets < p.Buckets {
		first *= pageGrowth
	}
	for n := first; ; n *= pageGrowth {
		ps, last, err := src.next(ctx, n)
		if err != nil {
			return Result{}, err
		}
		if len(ps) > 0 {
			hs, err := r.window(ctx, q, p, l, ps[0], ps[len(ps)-1], false)
			if err != nil {
				return Result{}, err
			}
			for _, h := range hs {
				if listed == q.Limit {
					res.More = true
					return res, nil
				}
				res.Holdings = append(res.Holdings, h)
				if h.Listable() {
					listed++
				}
			}
		}
		if last {
			return res, nil
		}
	}
}

// pairSource is where a page's pairs come from: q.Holder's remembered
// directory when r remembers it under q.Head, else balance_pairs.
func (r *Reader) pairSource(ctx context.Context, q Query) (pairSource, error) {
	if r.dirs != nil && q.Head != nil {
		read := func(ctx context.Context, n int) ([]schema.PairBytes, bool, error) {
			return r.pairs(ctx, Query{ChainID: q.ChainID, Holder: q.Holder}, nil, n)
		}
		all, ok, err := r.dirs.get(ctx, dirKey{q.ChainID, q.Holder}, *q.Head, read)
		if err != nil {
			return nil, err
		}
		if ok {
			return newListed(q, all), nil
		}
	}
	s := &queried{r: r, q: q}
	if q.After != nil {
		b := q.After.Bytes()
		s.after = &b
	}
	return s, nil
}

// Page keeps the holdings (sorted) after after, up to limit listable ones
// (limit <= 0: all); more says whether it cut any.
func Page(hs []Holding, after *schema.BalancePair, limit int) ([]Holding, bool) {
	if after != nil {
		i, _ := slices.BinarySearchFunc(hs, *after, func(h Holding, a schema.BalancePair) int { return ComparePairs(h.BalancePair, a) })
		for i < len(hs) && ComparePairs(hs[i].BalancePair, *after) <= 0 {
			i++
		}
		hs = hs[i:]
	}
	if limit <= 0 {
		return hs, false
	}
	listed := 0
	for i, h := range hs {
		if listed == limit {
			return hs[:i], true
		}
		if h.Listable() {
			listed++
		}
	}
	return hs, false
}

// tokenSpan is the pair range from the first to the last token's pairs.
func tokenSpan(tokens []evm.Address) (lo, hi schema.PairBytes) {
	first, last := tokens[0], tokens[0]
	for _, t := range tokens[1:] {
		if bytes.Compare(t[:], first[:]) < 0 {
			first = t
		}
		if bytes.Compare(t[:], last[:]) > 0 {
			last = t
		}
	}
	copy(lo[:], first[:])
	hi = schema.MaxPair
	copy(hi[:], last[:])
	return lo, hi
}

// window reads and sums q.Holder's rows of pairs [lo, hi] at the levels l,
// opening what needs an opening; named (a whole answer) also opens the
// named ERC-20 tokens that have no row.
func (r *Reader) window(ctx context.Context, q Query, p Progress, l levels, lo, hi schema.PairBytes, named bool) ([]Holding, error) {
	rows, err := r.rows(ctx, nil, q, l.ranges(q.ChainID, q.Holder, lo, hi, !p.Complete()))
	if err != nil {
		return nil, err
	}
	sums, opened, err := r.sum(ctx, q.ChainID, p, l, rows)
	if err != nil {
		return nil, err
	}
	partial := map[schema.PairBytes]bool{}
	if !p.Complete() {
		var unopened []schema.BalancePair
		for pair := range sums {
			if !opened[pair] {
				unopened = append(unopened, pair.Pair())
			}
		}
		// A named ERC-20 token with no transfer since the first block may
		// still have a balance from before it.
		if named && len(q.Kinds) == 1 && q.Kinds[0] == uint8(evm.ERC20) {
			for _, t := range q.Tokens {
				pair := schema.BalancePair{Kind: uint8(evm.ERC20), Token: t}
				if _, seen := sums[pair.Bytes()]; !seen && !opened[pair.Bytes()] {
					unopened = append(unopened, pair)
					sums[pair.Bytes()] = new(big.Int)
				}
			}
		}
		slices.SortFunc(unopened, ComparePairs)
		got := map[schema.BalancePair]*big.Int{}
		if r.opener != nil && len(unopened) > 0 {
			if got, err = r.opener.Open(ctx, q.ChainID, q.Holder, p.OpeningBlock(), unopened); err != nil {
				return nil, err
			}
		}
		for _, pair := range unopened {
			if v, ok := got[pair]; ok {
				sums[pair.Bytes()].Add(sums[pair.Bytes()], v)
			} else {
				partial[pair.Bytes()] = true
			}
		}
	}
	out := make([]Holding, 0, len(sums))
	for pair, v := range sums {
		if v.Sign() != 0 || partial[pair] {
			out = append(out, Holding{BalancePair: pair.Pair(), Balance: v, Partial: partial[pair]})
		}
	}
	slices.SortFunc(out, func(a, b Holding) int { return ComparePairs(a.BalancePair, b.BalancePair) })
	return out, nil
}

// sum adds up rows per pair: the rows that make the balances at the
// levels l, of deltas only those of canonical blocks, of openings only
// those read at the chain's opening block (opened names their pairs).
func (r *Reader) sum(ctx context.Context, chainID uint64, p Progress, l levels, rows []row) (sums map[schema.PairBytes]*big.Int, opened map[schema.PairBytes]bool, err error) {
	canon, err := r.canonicalOf(ctx, chainID, rows)
	if err != nil {
		return nil, nil, err
	}
	sums = map[schema.PairBytes]*big.Int{}
	opened = map[schema.PairBytes]bool{}
	for i := range rows {
		k := &rows[i].key
		switch k.Level() {
		case schema.BalanceLevelDelta:
			if !canon[BlockRef{k.Bucket(), k.BlockHash()}] {
				continue // an orphaned block's delta
			}
		case schema.BalanceLevelOpening:
			if p.Complete() || k.Bucket() != p.OpeningBlock() {
				continue // opened for another start of the chain
			}
			opened[k.PairBytes()] = true
		}
		if !l.counts(k) {
			continue
		}
		if err := addAmount(sums, k, rows[i].amount); err != nil {
			return nil, nil, err
		}
	}
	return sums, opened, nil
}

// addAmount adds the decimal amount of row k to its pair's sum.
func addAmount(sums map[schema.PairBytes]*big.Int, k *schema.BalanceKey, amount string) error {
	v, ok := new(big.Int).SetString(amount, 10)
	if !ok {
		return fmt.Errorf("balances: amount %q of row %x is not a decimal", amount, k[:])
	}
	pair := k.PairBytes()
	if s, ok := sums[pair]; ok {
		s.Add(s, v)
	} else {
		sums[pair] = v
	}
	return nil
}

// ComparePairs orders pairs by token, token id, then kind: an NFT
// collection's ids in numeric order, as the keys sort them.
func ComparePairs(a, b schema.BalancePair) int {
	x, y := a.Bytes(), b.Bytes()
	return bytes.Compare(x[:], y[:])
}

// canonicalOf says which of the blocks of rows' deltas are canonical.
func (r *Reader) canonicalOf(ctx context.Context, chainID uint64, rows []row) (map[BlockRef]bool, error) {
	seen := map[BlockRef]bool{}
	var blocks []BlockRef
	for i := range rows {
		if k := &rows[i].key; k.Level() == schema.BalanceLevelDelta {
			b := BlockRef{k.Bucket(), k.BlockHash()}
			if !seen[b] {
				seen[b] = true
				blocks = append(blocks, b)
			}
		}
	}
	if len(blocks) == 0 {
		return map[BlockRef]bool{}, nil
	}
	slices.SortFunc(blocks, func(a, b BlockRef) int { return cmpU64(a.Number, b.Number) })
	return r.canonical.AreCanonical(ctx, chainID, blocks)
}
