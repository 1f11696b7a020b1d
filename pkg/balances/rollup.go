package balances

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/big"
	"strconv"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/obs"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// Roller sums settled buckets: once a chain's indexed head is Settle blocks
// past the end of a level-1 bucket, no reorg can change the bucket (ingest
// refuses reorgs deeper than its window), so its canonical deltas are summed
// into level-1 rows, one per (holder, token, token id); once every level-1
// bucket of a level-2 bucket is summed, those are summed into level-2 rows.
// Reads then take a few sums instead of every delta (plan).
//
// The sums are a pure function of settled, canonical rows, so writing them
// twice (a crash before the progress row, two processors during a
// rebalance) writes the same rows again. The progress rows, written after
// the sums, tell readers which buckets to take from which level.
//
// The sink notifies it of each chain's head after writing the head
// (Notify); it works in its own goroutine (Run) so the sink never waits
// for it.
type Roller struct {
	db     DB
	blocks BlockTable
	cfg    RollerConfig
	logger *slog.Logger
	m      *rollerMetrics

	mu    sync.Mutex
	heads map[uint64]uint64
	wake  chan struct{}
	known map[uint64]Progress
}

// RollerConfig tunes the roller.
type RollerConfig struct {
	// Settle is how far below the indexed head a block must be before its
	// bucket is summed: at least ingest's --ingest.reorg-window.
	Settle uint64
	// ScanRows is the most rows one read of a bucket takes; a larger bucket
	// is read in holder ranges.
	ScanRows int
}

// DefaultRollerConfig mirrors the processor's flag defaults.
func DefaultRollerConfig() RollerConfig { return RollerConfig{Settle: 1024, ScanRows: 262_144} }

type rollerMetrics struct {
	buckets  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	summed   *prometheus.GaugeVec
	errors   prometheus.Counter
}

// NewRoller returns a roller writing through db; its metrics go to reg under
// subsystem (the service's name).
func NewRoller(db DB, cfg RollerConfig, logger *slog.Logger, reg prometheus.Registerer, subsystem string) *Roller {
	f := obs.NewMetrics(reg, subsystem)
	return &Roller{db: db, blocks: BlockTable{DB: db}, cfg: cfg, logger: logger,
		heads: map[uint64]uint64{}, wake: make(chan struct{}, 1), known: map[uint64]Progress{},
		m: &rollerMetrics{
			buckets: f.CounterVec("balance_buckets_summed_total", "Balance buckets summed, by level (1: 1,024 blocks of deltas, 2: 1,024 level-1 buckets).", "level"),
			duration: f.HistogramVec("balance_rollup_duration_seconds", "Time to sum one balance bucket, by level.",
				prometheus.ExponentialBuckets(0.001, 4, 10), "level"),
			summed: f.GaugeVec("balance_summed_block", "Per chain, the block below which every balance delta is summed into level-1 rows.", "chain"),
			errors: f.Counter("balance_rollup_errors_total", "Failed attempts to sum balance buckets (retried)."),
		}}
}

// Notify tells the roller that the chain's head is written up to head. It
// never blocks.
func (r *Roller) Notify(chainID, head uint64) {
	r.mu.Lock()
	if head > r.heads[chainID] {
		r.heads[chainID] = head
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run sums buckets as heads are notified, until ctx ends. A failure (an
// outage of ClickHouse) is logged and tried again after a backoff; Run
// returns nil when ctx ends.
func (r *Roller) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		}
		r.mu.Lock()
		heads := make(map[uint64]uint64, len(r.heads))
		for c, h := range r.heads {
			heads[c] = h
		}
		r.mu.Unlock()
		for chainID, head := range heads {
			again := obs.Retry{Initial: time.Second, Max: 30 * time.Second, Log: r.logger, Msg: "balances: summing buckets failed, retrying",
				Attrs: []any{"chain_id", chainID}}
			_ = again.Do(ctx, func() error {
				err := r.Roll(ctx, chainID, head)
				if err != nil && ctx.Err() == nil {
					r.m.errors.Inc()
				}
				return err
			})
		}
	}
}

// passBuckets is the most level-1 buckets one pass sums: the canonical
// hashes of their blocks are read in one range (64 Ki blocks), and a chain
// with long quiet stretches (or a chain indexed from a late block, whose
// early buckets are empty) is summed a pass at a time, not a bucket.
const passBuckets = 64

// Roll sums every bucket of the chain that is settled at head and not
// summed yet.
func (r *Roller) Roll(ctx context.Context, chainID, head uint64) error {
	const perEpoch = 1 << (schema.EpochBits - schema.BucketBits)
	r.mu.Lock()
	p, ok := r.known[chainID]
	r.mu.Unlock()
	if !ok {
		var err error
		if p, err = ReadProgress(ctx, r.db, chainID); err != nil {
			return err
		}
		if !p.HasFirst {
			return nil // no deltas yet
		}
	}
	// Buckets before the chain's first delta are empty: start at its own.
	if b := p.First >> schema.BucketBits; p.Buckets < b {
		if err := writeProgress(ctx, r.db, chainID, schema.ProgressBuckets, b); err != nil {
			return err
		}
		p.Buckets = b
	}
	if e := p.First >> schema.EpochBits; p.Epochs < e {
		if err := writeProgress(ctx, r.db, chainID, schema.ProgressEpochs, e); err != nil {
			return err
		}
		p.Epochs = e
	}
	defer func() {
		r.mu.Lock()
		r.known[chainID] = p
		r.mu.Unlock()
		r.m.summed.WithLabelValues(strconv.FormatUint(chainID, 10)).Set(float64(p.Buckets << schema.BucketBits))
	}()
	// Bucket j is settled when its last block, (j+1)*1024-1, is at least
	// Settle below head.
	var settled uint64
	if head+1 >= r.cfg.Settle {
		settled = (head + 1 - r.cfg.Settle) >> schema.BucketBits
	}
	for {
		switch {
		case (p.Epochs+1)*perEpoch <= p.Buckets:
			if err := r.rollEpoch(ctx, chainID, p.Epochs); err != nil {
				return err
			}
			p.Epochs++
			if err := writeProgress(ctx, r.db, chainID, schema.ProgressEpochs, p.Epochs); err != nil {
				return err
			}
		case p.Buckets < settled:
			// A pass stops at the end of its level-2 bucket, which is then
			// summed before the next pass.
			last := min(settled, p.Buckets+passBuckets, (p.Buckets/perEpoch+1)*perEpoch) - 1
			if err := r.rollBuckets(ctx, chainID, p.Buckets, last); err != nil {
				return err
			}
			p.Buckets = last + 1
			if err := writeProgress(ctx, r.db, chainID, schema.ProgressBuckets, p.Buckets); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// rollBuckets sums the canonical deltas of level-1 buckets first..last.
func (r *Roller) rollBuckets(ctx context.Context, chainID, first, last uint64) error {
	start := time.Now()
	canon, err := r.blocks.CanonicalRange(ctx, chainID, first<<schema.BucketBits, (last+1)<<schema.BucketBits-1)
	if err != nil {
		return err
	}
	from, _ := schema.BalancePrefixRange(schema.BalanceParentPrefix(chainID, schema.BalanceLevelDelta, first))
	_, to := schema.BalancePrefixRange(schema.BalanceParentPrefix(chainID, schema.BalanceLevelDelta, last))
	err = r.sumRange(ctx, from, to, func(k *schema.BalanceKey) (schema.BalanceKey, bool) {
		if h, ok := canon[k.Bucket()]; !ok || h != k.BlockHash() {
			return schema.BalanceKey{}, false // an orphaned block's delta
		}
		return schema.BucketSumKey(chainID, k.Holder(), k.Parent(), k.Pair()), true
	})
	if err != nil {
		return fmt.Errorf("sum buckets %d..%d of chain %d: %w", first, last, chainID, err)
	}
	r.m.buckets.WithLabelValues("1").Add(float64(last - first + 1))
	r.m.duration.WithLabelValues("1").Observe(time.Since(start).Seconds())
	return nil
}

// rollEpoch sums the level-1 rows of level-2 bucket e.
func (r *Roller) rollEpoch(ctx context.Context, chainID, e uint64) error {
	start := time.Now()
	from, to := schema.BalancePrefixRange(schema.BalanceParentPrefix(chainID, schema.BalanceLevelBucket, e))
	err := r.sumRange(ctx, from, to, func(k *schema.BalanceKey) (schema.BalanceKey, bool) {
		return schema.EpochSumKey(chainID, k.Holder(), e, k.Pair()), true
	})
	if err != nil {
		return fmt.Errorf("sum epoch %d of chain %d: %w", e, chainID, err)
	}
	r.m.buckets.WithLabelValues("2").Inc()
	r.m.duration.WithLabelValues("2").Observe(time.Since(start).Seconds())
	return nil
}

// qRangeRows reads every row of one key range, once each.
const qRangeRows = `SELECT bal_key, amount
FROM balances
WHERE bal_key >= unhex(?) AND bal_key <= unhex(?)
LIMIT 1 BY bal_key`

// sumRange sums the rows of [from, to] into the keys sumKey gives (rows it
// refuses are skipped) and writes the non-zero sums. A range of more than
// ScanRows rows is cut in two at the middle of its parents (level-1 or
// level-2 buckets) while it spans several, then into 16 by the next
// half-byte of the holder, recursively: a sum's rows are never in two
// parts (they share parent and holder), and the roller's memory stays
// bounded by ScanRows rows.
func (r *Roller) sumRange(ctx context.Context, from, to schema.BalanceKey, sumKey func(*schema.BalanceKey) (schema.BalanceKey, bool)) error {
	err := r.sumOnce(ctx, from, to, r.cfg.ScanRows, sumKey)
	if !chclient.TooManyRows(err) {
		return err
	}
	if lo, hi := from.Parent(), to.Parent(); lo < hi {
		mid := lo + (hi-lo)/2
		_, midTo := schema.BalancePrefixRange(schema.BalanceParentPrefix(from.ChainID(), from.Level(), mid))
		midFrom, _ := schema.BalancePrefixRange(schema.BalanceParentPrefix(from.ChainID(), from.Level(), mid+1))
		if err := r.sumRange(ctx, from, midTo, sumKey); err != nil {
			return err
		}
		return r.sumRange(ctx, midFrom, to, sumKey)
	}
	// One parent: split by the first byte where from and to differ (the
	// holder's, at first), by its high half-byte while the range spans
	// several, then by its value.
	i := 0
	for i < schema.BalanceKeyLen && from[i] == to[i] {
		i++
	}
	if i >= schema.BalanceHolderPrefixLen {
		// One holder's rows of one bucket: a sum's rows cannot be split,
		// so they are read whatever their number.
		return r.sumOnce(ctx, from, to, 0, sumKey)
	}
	parts := [][2]byte{}
	if from[i]>>4 != to[i]>>4 {
		for n := from[i] >> 4; ; n++ {
			parts = append(parts, [2]byte{max(from[i], n<<4), min(to[i], n<<4|0x0f)})
			if n == to[i]>>4 {
				break
			}
		}
	} else {
		for v := from[i]; ; v++ {
			parts = append(parts, [2]byte{v, v})
			if v == to[i] {
				break
			}
		}
	}
	for _, part := range parts {
		pf, pt := from, to
		pf[i], pt[i] = part[0], part[1]
		if part[0] != from[i] {
			clear(pf[i+1:])
		}
		if part[1] != to[i] {
			for j := i + 1; j < schema.BalanceKeyLen; j++ {
				pt[j] = 0xff
			}
		}
		if err := r.sumRange(ctx, pf, pt, sumKey); err != nil {
			return err
		}
	}
	return nil
}

// sumOnce reads [from, to] within a budget of rows (0: none) and writes
// its sums.
func (r *Roller) sumOnce(ctx context.Context, from, to schema.BalanceKey, budget int, sumKey func(*schema.BalanceKey) (schema.BalanceKey, bool)) error {
	const name = "balance_rollup_rows"
	var settings clickhouse.Settings
	if budget > 0 {
		settings = rowBudget(budget)
	}
	rows, done, err := r.db.Query(ctx, name, settings, qRangeRows, hex.EncodeToString(from[:]), hex.EncodeToString(to[:]))
	if err != nil {
		return err
	}
	sums := map[schema.BalanceKey]*big.Int{}
	err = each(name, rows, func() error {
		var key, amount string
		if err := rows.Scan(&key, &amount); err != nil {
			return scanErr(name, err)
		}
		k, err := schema.ParseBalanceKey(key)
		if err != nil {
			return err
		}
		sk, ok := sumKey(&k)
		if !ok {
			return nil
		}
		v, ok := new(big.Int).SetString(amount, 10)
		if !ok {
			return fmt.Errorf("balances: amount %q of row %x is not a decimal", amount, key)
		}
		if s, ok := sums[sk]; ok {
			s.Add(s, v)
		} else {
			sums[sk] = v
		}
		return nil
	})
	done()
	if err != nil {
		return err
	}
	return r.writeSums(ctx, sums)
}

// writeSums inserts the non-zero sums, version 0: a sum of settled rows is
// always the same.
func (r *Roller) writeSums(ctx context.Context, sums map[schema.BalanceKey]*big.Int) error {
	b, err := r.db.Insert(ctx, "INSERT INTO balances ("+BalanceColumns+")")
	if err != nil {
		return err
	}
	n := 0
	for k, v := range sums {
		if v.Sign() == 0 {
			continue
		}
		if err := b.Append(string(k[:]), v.String(), uint64(0)); err != nil {
			_ = b.Abort()
			return err
		}
		n++
	}
	if n == 0 {
		_ = b.Abort()
		return nil
	}
	if err := b.Send(); err != nil {
		return classify(err, "insert sums")
	}
	return nil
}
