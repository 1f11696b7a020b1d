// Package budget is the processor's write budget: while a chain backfills,
// the sink's inserts give way to the reads that ClickHouse serves (the Data
// API, the webhooks' state).
//
// Two signals, each with the operator's target (either may be off):
//
//   - reads: a probe times a small read of moraine's database every
//     ProbeInterval, the kind of read the query service makes;
//   - the head's webhooks: the matcher of the same processor reports, for
//     each block at its chain's head whose activity it commits, the time
//     from ingest's first word of the block (the newHeads announcement or
//     head poll that reached it; the block record's timestamp) to that
//     commit (ObserveHead). Delivery's POST follows at once; the reads'
//     probe does not see this path, whose CPU (ingest's fetch and checks,
//     Kafka, the matcher) the backfill shares.
//
// While the slowest probe of the last second is over the read target, or
// the slowest head block of the last headWindow over the head target, the
// share of time the backfill may spend inserting shrinks (multiplied by 0.7
// per probe, down to MinShare); while both are under half their targets,
// the share grows back (by 0.02 per probe, about 12 s from the floor to 1).
// After each backfill batch, the sink waits for Pause(the batch's insert
// time): at share s, the backfill inserts for s of the time and waits for
// the rest, so ClickHouse's CPU (and, through fewer parts, its merges' CPU)
// goes to the reads and the head. A pause is at most maxPause, so the
// sink's batches shrink with the share (about s of --processor.batch-rows)
// to keep the pause each one asks for within it. A batch that holds a block
// at the head of its chain (younger than BackfillLag) is never paused: the
// head of every chain goes before any backfill.
//
// Throttling changes when rows are written, never which or in what order:
// the sink's batches, their offsets and their commits are the same, only
// later.
//
// # Metrics
//
//	moraine_processor_write_budget_share               share of time the backfill may insert (1: unthrottled)
//	moraine_processor_write_budget_probe_seconds       the probe read's latency (histogram)
//	moraine_processor_write_budget_target_seconds      the operator's read latency target (0: off)
//	moraine_processor_write_budget_head_seconds        a head block's time from ingest's first word of it to its activity (histogram)
//	moraine_processor_write_budget_head_target_seconds the operator's head latency target (0: off)
//	moraine_processor_write_budget_min_share           the share's floor (--processor.backfill-min-share)
//	moraine_processor_write_budget_paused_seconds_total time backfill batches waited
package budget

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/obs"
)

// Config is the operator's budget (the --processor.* flags below).
type Config struct {
	// ReadLatencyTarget is the probe latency the backfill keeps reads
	// under; 0 turns this signal off.
	ReadLatencyTarget time.Duration
	// HeadLatencyTarget is the time from ingest's first word of a block at
	// the head to its activity committed that the backfill keeps head
	// blocks under; 0 turns this signal off. The budget is off when
	// both are.
	HeadLatencyTarget time.Duration
	// MinShare is the least share of time the backfill keeps, however slow
	// the reads: the backfill always progresses.
	MinShare float64
	// BackfillLag is how old a chain's newest block in a batch must be for
	// the batch to count as backfill. Younger blocks are the chain's head,
	// never paused.
	BackfillLag time.Duration
}

// RegisterFlags adds the budget's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.ReadLatencyTarget, "processor.read-latency-target", 0,
		"write budget: while a probe read of ClickHouse takes longer than this, backfill inserts give way to reads (0: off; e.g. 50ms). Batches at a chain's head are never held back")
	fs.DurationVar(&c.HeadLatencyTarget, "processor.head-latency-target", 0,
		"write budget: while a block at a chain's head takes longer than this from ingest hearing of it (newHeads or a head poll) to its webhook activity committed by this processor's matcher, backfill inserts give way (0: off; e.g. 200ms)")
	fs.Float64Var(&c.MinShare, "processor.backfill-min-share", 0.1,
		"write budget: the least share of time (0 to 1) backfill inserts keep however slow the reads, so a backfill always progresses")
	fs.DurationVar(&c.BackfillLag, "processor.backfill-lag", time.Minute,
		"write budget: a batch whose newest block of every chain is older than this is backfill; younger blocks are a chain's head and are never held back")
}

// The bounds Validate enforces, with the reason for each.
const (
	// minTarget: an idle ClickHouse answers the probe in about 1 ms on the
	// development machine; a target below a few ms would hold the backfill
	// at its floor while nothing is served.
	minTarget = 5 * time.Millisecond
	// minHeadTarget: ingest's fetch of the block, the matcher's poll,
	// match, produce and Kafka transaction take tens of milliseconds at
	// rest; a target below that would hold the backfill at its floor with
	// nothing to deliver.
	minHeadTarget = 50 * time.Millisecond
	// minBackfillLag: blocks of a chain at its head are seconds old (a
	// block every 0.5-12 s, plus ingest's fetch). A smaller lag would count
	// the head as backfill and hold it back.
	minBackfillLag = 30 * time.Second
	// minShare: below a hundredth, a throttled backfill of hundreds of
	// millions of transactions would take months.
	minShare = 0.01
)

// Validate refuses settings that would starve the head or the API.
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	var errs []error
	if c.ReadLatencyTarget < 0 || c.HeadLatencyTarget < 0 {
		errs = append(errs, errors.New("budget: --processor.read-latency-target and --processor.head-latency-target cannot be negative"))
	}
	if c.ReadLatencyTarget > 0 && c.ReadLatencyTarget < minTarget {
		errs = append(errs, fmt.Errorf("budget: --processor.read-latency-target %s is below %s, about what an idle ClickHouse takes to answer: the backfill would be held at its floor with nothing to serve", c.ReadLatencyTarget, minTarget))
	}
	if c.HeadLatencyTarget > 0 && c.HeadLatencyTarget < minHeadTarget {
		errs = append(errs, fmt.Errorf("budget: --processor.head-latency-target %s is below %s, about what a head block takes from ingest to its activity at rest: the backfill would be held at its floor with nothing to deliver", c.HeadLatencyTarget, minHeadTarget))
	}
	if c.BackfillLag < minBackfillLag {
		errs = append(errs, fmt.Errorf("budget: --processor.backfill-lag %s is below %s: blocks at a chain's head would count as backfill and be held back", c.BackfillLag, minBackfillLag))
	}
	if !(c.MinShare >= minShare && c.MinShare < 1) {
		errs = append(errs, fmt.Errorf("budget: --processor.backfill-min-share %g must be at least %g (a backfill that never finishes) and below 1 (a backfill that never gives way to the API)", c.MinShare, minShare))
	}
	return errors.Join(errs...)
}

// Enabled reports whether the budget throttles anything.
func (c Config) Enabled() bool { return c.ReadLatencyTarget != 0 || c.HeadLatencyTarget != 0 }

// Controller constants (see the package doc).
const (
	// ProbeInterval is the period of the probe read.
	ProbeInterval = 250 * time.Millisecond
	// probeWindow is how many probes the decision looks at: the slowest of
	// the last second.
	probeWindow = 4
	decrease    = 0.7
	increase    = 0.02
	// maxPause bounds one wait, so the consumer polls (and meets a head
	// block) at least this often.
	maxPause = 5 * time.Second
	// headWindow is how long a head block's time counts in the decision:
	// blocks come every 0.5-12 s, so a window of the probes' second would
	// forget a slow one before the share had fallen.
	headWindow = 5 * time.Second
)

// Probe is one small read of moraine's database.
type Probe func(ctx context.Context) error

// Budget decides how long backfill batches wait.
type Budget struct {
	cfg    Config
	logger *slog.Logger
	m      *metrics

	mu     sync.Mutex
	share  float64
	recent [probeWindow]time.Duration
	n      int // probes so far
	// heads are the head blocks' times of the last headWindow.
	heads []headTime
	// now is time.Now, but for tests.
	now func() time.Time
}

type headTime struct {
	at   time.Time
	took time.Duration
}

type metrics struct {
	share      prometheus.Gauge
	probe      prometheus.Histogram
	target     prometheus.Gauge
	head       prometheus.Histogram
	headTarget prometheus.Gauge
	minShare   prometheus.Gauge
	paused     prometheus.Counter
}

// New returns the budget at share 1 (unthrottled).
func New(cfg Config, reg prometheus.Registerer, logger *slog.Logger) *Budget {
	f := obs.NewMetrics(reg, "processor")
	b := &Budget{cfg: cfg, logger: logger, share: 1, now: time.Now, m: &metrics{
		share:  f.Gauge("write_budget_share", "Share of time backfill inserts may take (1: not throttled; below 1: reads or head blocks were slower than their targets)."),
		probe:  f.Histogram("write_budget_probe_seconds", "Latency of the write budget's probe read of ClickHouse.", prometheus.ExponentialBuckets(0.0005, 2, 16)),
		target: f.Gauge("write_budget_target_seconds", "The write budget's read latency target (--processor.read-latency-target; 0: off)."),
		head: f.Histogram("write_budget_head_seconds", "Time from ingest's first word of a block at its chain's head (newHeads or a head poll) to its webhook activity committed by the matcher.",
			prometheus.ExponentialBuckets(0.0005, 2, 16)),
		headTarget: f.Gauge("write_budget_head_target_seconds", "The write budget's head latency target (--processor.head-latency-target; 0: off)."),
		minShare:   f.Gauge("write_budget_min_share", "The least share of time backfill inserts keep (--processor.backfill-min-share)."),
		paused:     f.Counter("write_budget_paused_seconds_total", "Time backfill batches waited for reads and head blocks (the write budget)."),
	}}
	b.m.share.Set(1)
	b.m.target.Set(cfg.ReadLatencyTarget.Seconds())
	b.m.headTarget.Set(cfg.HeadLatencyTarget.Seconds())
	b.m.minShare.Set(cfg.MinShare)
	return b
}

// Run probes every ProbeInterval until ctx ends, adjusting the share (with
// the read target off, it only adjusts). It returns at once when the budget
// is off.
func (b *Budget) Run(ctx context.Context, probe Probe) {
	if !b.cfg.Enabled() {
		return
	}
	t := time.NewTicker(ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if b.cfg.ReadLatencyTarget == 0 {
			b.adjust()
			continue
		}
		// A probe slower than the window is as bad as any: cut it there so
		// a stuck server does not stall the loop.
		pctx, cancel := context.WithTimeout(ctx, max(time.Second, 4*b.cfg.ReadLatencyTarget))
		start := time.Now()
		err := probe(pctx)
		took := time.Since(start)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil && pctx.Err() == nil {
			// ClickHouse down or refusing: the sink's retries deal with
			// that; the budget keeps its share.
			b.logger.Debug("write budget probe failed", "err", err)
			continue
		}
		b.Observe(took)
	}
}

// Observe records one probe's latency and adjusts the share.
func (b *Budget) Observe(took time.Duration) {
	b.m.probe.Observe(took.Seconds())
	b.mu.Lock()
	b.recent[b.n%probeWindow] = took
	b.n++
	b.mu.Unlock()
	b.adjust()
}

// ObserveHead records the time from ingest's first word of a block (seen:
// its record's timestamp) to its activity committed now; a block older
// than BackfillLag (by its timestamp, Unix seconds) is backfill and not
// counted. The next probe's adjustment weighs it.
func (b *Budget) ObserveHead(timestamp uint64, seen time.Time) {
	if b.cfg.HeadLatencyTarget == 0 {
		return
	}
	now := b.now()
	if b.Backfill(timestamp, now) {
		return
	}
	took := now.Sub(seen)
	b.m.head.Observe(took.Seconds())
	b.mu.Lock()
	defer b.mu.Unlock()
	b.heads = append(b.heads, headTime{at: now, took: took})
}

// adjust moves the share by the slowest probe of the last second and the
// slowest head block of the last headWindow.
func (b *Budget) adjust() {
	b.mu.Lock()
	defer b.mu.Unlock()
	var probe, head time.Duration
	for _, d := range b.recent[:min(b.n, probeWindow)] {
		probe = max(probe, d)
	}
	now := b.now()
	kept := b.heads[:0]
	for _, h := range b.heads {
		if now.Sub(h.at) <= headWindow {
			kept = append(kept, h)
			head = max(head, h.took)
		}
	}
	b.heads = kept
	readTarget, headTarget := b.cfg.ReadLatencyTarget, b.cfg.HeadLatencyTarget
	readsSlow := readTarget > 0 && probe > readTarget
	headSlow := headTarget > 0 && head > headTarget
	before := b.share
	switch {
	case readsSlow || headSlow:
		b.share = max(b.cfg.MinShare, b.share*decrease)
	case (readTarget == 0 || probe < readTarget/2) && (headTarget == 0 || head < headTarget/2):
		b.share = min(1, b.share+increase)
	}
	b.m.share.Set(b.share)
	// Log the changes an operator asks about: throttling starting (and
	// for what) and ending.
	if before == 1 && b.share < 1 {
		var why string
		switch {
		case readsSlow && headSlow:
			why = "reads and head blocks"
		case readsSlow:
			why = "reads"
		default:
			why = "head blocks"
		}
		b.logger.Info("write budget: backfill gives way to "+why, "probe", probe.Round(time.Millisecond).String(),
			"target", readTarget.String(), "head", head.Round(time.Millisecond).String(), "head_target", headTarget.String(),
			"share", math.Round(b.share*100)/100)
	} else if before < 1 && b.share == 1 {
		b.logger.Info("write budget: backfill at full speed again", "probe", probe.Round(time.Millisecond).String(),
			"target", readTarget.String(), "head", head.Round(time.Millisecond).String(), "head_target", headTarget.String())
	}
}

// Share is the share of time backfill inserts may take now (1: no
// throttling).
func (b *Budget) Share() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.share
}

// Pause is how long to wait after a backfill batch whose inserts took
// worked: at share s, worked × (1/s − 1), at most maxPause. Zero when the
// budget is off or not throttling.
func (b *Budget) Pause(worked time.Duration) time.Duration {
	if !b.cfg.Enabled() {
		return 0
	}
	s := b.Share()
	if s >= 1 {
		return 0
	}
	return min(maxPause, time.Duration(float64(worked)*(1/s-1)))
}

// Paused counts time a backfill batch waited.
func (b *Budget) Paused(d time.Duration) { b.m.paused.Add(d.Seconds()) }

// Backfill reports whether a block with this timestamp (Unix seconds) is
// backfill at now: older than BackfillLag.
func (b *Budget) Backfill(timestamp uint64, now time.Time) bool {
	return int64(timestamp) < now.Add(-b.cfg.BackfillLag).Unix()
}
