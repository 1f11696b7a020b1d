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

// Result is the answer to a Query.
type Result struct {
	// Holdings has every pair whose balance is not zero (negative sums,
	// which a standard token never has, included: see docs/balances.md),
	// sorted by token, token id and kind.
	Holdings []Holding
	// Progress is the chain's, as the read used it.
	Progress Progress
}

// Reader reads balances at a block: per pair, the sum of a holder's rows of
// every level that together cover the chain up to the block (plan), the
// deltas kept only where their block is canonical. What one read touches
// is bounded by the levels' bucket sizes, not by the holder's number of
// transfers (docs/balances.md, "Layout").
type Reader struct {
	db        DB
	canonical Canonical
	opener    *Opener

	mu       sync.Mutex
	progress map[uint64]cachedProgress
	now      func() time.Time
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
// opener (nil: none) reads missing opening balances from the node.
func NewReader(db DB, canonical Canonical, opener *Opener) *Reader {
	return &Reader{db: db, canonical: canonical, opener: opener, progress: map[uint64]cachedProgress{}, now: time.Now}
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

// plan returns the key ranges of holder's rows that sum to its balances at
// block b, given the chain's progress:
//
//	level 3  every opening row (the caller keeps those read at the
//	         chain's opening block);
//	level 2  the summed level-2 buckets before b's;
//	level 1  the summed level-1 buckets from there up to b's, in each
//	         level-2 bucket they fall in (one range per parent);
//	level 0  the deltas of the blocks from there up to b, one range per
//	         level-1 bucket.
//
// With the rollups keeping up, that is six ranges at most; every level-1
// bucket the rollup is behind adds one, up to maxDeltaBuckets.
func plan(chainID uint64, holder [20]byte, b uint64, p Progress) ([]keyRange, error) {
	const perEpoch = 1 << (schema.EpochBits - schema.BucketBits)
	k1, k2 := b>>schema.BucketBits, b>>schema.EpochBits
	buckets := min(k1, p.Buckets)
	epochs := min(k2, p.Epochs, buckets/perEpoch)
	if k1-buckets >= maxDeltaBuckets {
		return nil, fmt.Errorf("%w: block %d is %d blocks past the summed balances of chain %d", ErrBehind, b, b-buckets<<schema.BucketBits, chainID)
	}
	var out []keyRange
	add := func(level uint8, parent, first, last uint64) {
		from, to := schema.BalanceHolderRange(chainID, level, parent, holder, first, last)
		out = append(out, keyRange{from, to})
	}
	add(schema.BalanceLevelOpening, 0, 0, 1<<64-1)
	if epochs > 0 {
		add(schema.BalanceLevelEpoch, 0, 0, epochs-1)
	}
	for lo := epochs * perEpoch; lo < buckets; {
		hi := min(buckets, (lo/perEpoch+1)*perEpoch) // the end of lo's level-2 bucket
		add(schema.BalanceLevelBucket, lo/perEpoch, lo, hi-1)
		lo = hi
	}
	for j := buckets; j <= k1; j++ {
		add(schema.BalanceLevelDelta, j, j<<schema.BucketBits, min(b, (j+1)<<schema.BucketBits-1))
	}
	return out, nil
}

// maxDeltaBuckets bounds the level-1 buckets of deltas one read takes (one
// key range each, so 32 reads of rangeSlots ranges): the roller keeps two
// or three unsummed behind the head, more only while it catches up after
// an outage or during a backfill.
const maxDeltaBuckets = 256

// ErrBehind means the block asked about is further past the summed buckets
// than one read takes (maxDeltaBuckets): the roller is catching up.
var ErrBehind = errors.New("balances: not summed yet")

// rangeSlots is the number of key ranges one qHolderRows reads; a plan with
// more takes several reads.
const rangeSlots = 8

// qHolderRows reads the rows of up to rangeSlots key ranges (unused slots
// get an empty range), optionally of some kinds (? = 1 and the set of kind
// numbers) and tokens (? = 1 and the set of hex addresses, upper case as
// hex() writes them). LIMIT 1 BY drops copies of a row that merges have not
// collapsed yet: a redelivered block writes the same keys again.
var qHolderRows = `SELECT bal_key, amount
FROM balances
WHERE (` + strings.Repeat(`(bal_key >= unhex(?) AND bal_key <= unhex(?)) OR `, rangeSlots-1) + `(bal_key >= unhex(?) AND bal_key <= unhex(?)))
	AND (? = 0 OR reinterpretAsUInt8(substring(bal_key, ` + fmt.Sprint(schema.BalanceKindAt+1) + `, 1)) IN ?)
	AND (? = 0 OR hex(substring(bal_key, ` + fmt.Sprint(schema.BalanceTokenAt+1) + `, 20)) IN ?)
LIMIT 1 BY bal_key`

// row is one bal_key and amount read.
type row struct {
	key    schema.BalanceKey
	amount string
}

// rows reads every row of the ranges, filtered as q says.
func (r *Reader) rows(ctx context.Context, q Query, ranges []keyRange) ([]row, error) {
	const name = "balance_rows"
	kinds, useKinds := []any{uint8(0)}, 0
	if len(q.Kinds) > 0 {
		kinds, useKinds = make([]any, len(q.Kinds)), 1
		for i, k := range q.Kinds {
			kinds[i] = k
		}
	}
	tokens, useTokens := []any{""}, 0
	if len(q.Tokens) > 0 {
		tokens, useTokens = make([]any, len(q.Tokens)), 1
		for i, t := range q.Tokens {
			tokens[i] = strings.ToUpper(hex.EncodeToString(t[:]))
		}
	}
	var out []row
	for len(ranges) > 0 {
		n := min(len(ranges), rangeSlots)
		args := make([]any, 0, 2*rangeSlots+4)
		for i := range rangeSlots {
			if i < n {
				args = append(args, hex.EncodeToString(ranges[i].from[:]), hex.EncodeToString(ranges[i].to[:]))
			} else {
				args = append(args, "ff", "00") // empty
			}
		}
		args = append(args, useKinds, clickhouse.GroupSet{Value: kinds}, useTokens, clickhouse.GroupSet{Value: tokens})
		ranges = ranges[n:]
		rows, done, err := r.db.Query(ctx, name, nil, qHolderRows, args...)
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

// At answers q.
func (r *Reader) At(ctx context.Context, q Query) (Result, error) {
	p, err := r.Progress(ctx, q.ChainID)
	if err != nil {
		return Result{}, err
	}
	ranges, err := plan(q.ChainID, q.Holder, q.Block, p)
	if err != nil {
		return Result{}, err
	}
	rows, err := r.rows(ctx, q, ranges)
	if err != nil {
		return Result{}, err
	}
	canon, err := r.canonicalOf(ctx, q.ChainID, rows)
	if err != nil {
		return Result{}, err
	}
	sums := map[schema.BalancePair]*big.Int{}
	opened := map[schema.BalancePair]bool{}
	for _, rw := range rows {
		k := &rw.key
		switch k.Level() {
		case schema.BalanceLevelDelta:
			if !canon[BlockRef{k.Bucket(), k.BlockHash()}] {
				continue // an orphaned block's delta
			}
		case schema.BalanceLevelOpening:
			if p.Complete() || k.Bucket() != p.OpeningBlock() {
				continue // opened for another start of the chain
			}
			opened[k.Pair()] = true
		}
		v, ok := new(big.Int).SetString(rw.amount, 10)
		if !ok {
			return Result{}, fmt.Errorf("balances: amount %q of row %x is not a decimal", rw.amount, k[:])
		}
		pair := k.Pair()
		if s, ok := sums[pair]; ok {
			s.Add(s, v)
		} else {
			sums[pair] = v
		}
	}
	partial := map[schema.BalancePair]bool{}
	if !p.Complete() {
		var unopened []schema.BalancePair
		for pair := range sums {
			if !opened[pair] {
				unopened = append(unopened, pair)
			}
		}
		// A named ERC-20 token with no transfer since the first block may
		// still have a balance from before it.
		if len(q.Kinds) == 1 && q.Kinds[0] == uint8(evm.ERC20) {
			for _, t := range q.Tokens {
				pair := schema.BalancePair{Kind: uint8(evm.ERC20), Token: t}
				if _, seen := sums[pair]; !seen && !opened[pair] {
					unopened = append(unopened, pair)
					sums[pair] = new(big.Int)
				}
			}
		}
		slices.SortFunc(unopened, ComparePairs)
		got := map[schema.BalancePair]*big.Int{}
		if r.opener != nil && len(unopened) > 0 {
			if got, err = r.opener.Open(ctx, q.ChainID, q.Holder, p.OpeningBlock(), unopened); err != nil {
				return Result{}, err
			}
		}
		for _, pair := range unopened {
			if v, ok := got[pair]; ok {
				sums[pair].Add(sums[pair], v)
			} else {
				partial[pair] = true
			}
		}
	}
	res := Result{Progress: p, Holdings: make([]Holding, 0, len(sums))}
	for pair, v := range sums {
		if v.Sign() != 0 || partial[pair] {
			res.Holdings = append(res.Holdings, Holding{BalancePair: pair, Balance: v, Partial: partial[pair]})
		}
	}
	slices.SortFunc(res.Holdings, func(a, b Holding) int { return ComparePairs(a.BalancePair, b.BalancePair) })
	return res, nil
}

// ComparePairs orders pairs by token, token id, then kind: an NFT
// collection's ids in numeric order.
func ComparePairs(a, b schema.BalancePair) int {
	if c := bytes.Compare(a.Token[:], b.Token[:]); c != 0 {
		return c
	}
	if c := bytes.Compare(a.TokenID[:], b.TokenID[:]); c != 0 {
		return c
	}
	return int(a.Kind) - int(b.Kind)
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
	slices.SortFunc(blocks, func(a, b BlockRef) int { return cmpU64(a.Number, b.Number) })
	return r.canonical.AreCanonical(ctx, chainID, blocks)
}
