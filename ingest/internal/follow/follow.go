package follow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/ingest/internal/convert"
	"github.com/moraine-data/moraine/ingest/internal/lease"
	"github.com/moraine-data/moraine/ingest/internal/verify"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/rpc"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// Config configures the follower of one chain.
type Config struct {
	// Chain is the chain's entry of the chain file: StartBlock,
	// StartCumulativeTransactions, Traces and Replay matter here.
	Chain chains.Chain
	// Topic is the full name of the blocks topic (prefix applied).
	Topic string
	// Concurrency is how many block batches are fetched at once (default 4).
	Concurrency int
	// BatchBlocks is how many blocks one JSON-RPC batch carries (default 10).
	BatchBlocks int
	// Window is how many recent block hashes are kept, and read back from
	// Kafka at start, for reorg detection (default 256, at least 128).
	Window int
	// ReadyLag is how many blocks behind the head the follower may be and
	// still report ready (default 2).
	ReadyLag uint64
	// ShutdownTimeout bounds how long produced records may take to be
	// acknowledged once ctx ends (default 10s).
	ShutdownTimeout time.Duration
	// ProgressInterval is the period of the progress log line (default
	// 30s): head, ingested block, lag, rate and ETA.
	ProgressInterval time.Duration
	// HaltRetry is how long a chain stopped at a block that no node
	// answers completely waits before asking again (default 30s).
	HaltRetry time.Duration
	// LeadGroup and MaxLead bound a backfill's lead over the consumer group
	// that writes the chain (lead.go): no new span is fetched below the
	// head while more than MaxLead records of the chain's partition are not
	// committed by LeadGroup (full name). Empty or 0: no bound.
	LeadGroup string
	MaxLead   int64
}

func (c *Config) defaults() {
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.BatchBlocks <= 0 {
		c.BatchBlocks = 10
	}
	if c.Window <= 0 {
		c.Window = 256
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = 30 * time.Second
	}
	if c.HaltRetry <= 0 {
		c.HaltRetry = 30 * time.Second
	}
}

// Deps are the follower's collaborators.
type Deps struct {
	Logger *slog.Logger
	// Kafka is the chain's transactional producer client (ProducerOpts),
	// used by this follower only.
	Kafka *kgo.Client
	// KafkaOpts are the base client options (seed brokers, logger) from
	// which the follower builds the reader of its checkpoint (committed
	// records only).
	KafkaOpts []kgo.Opt
	// RPC is the pool of the chain's nodes; the follower runs it (Run
	// tracks each node's head).
	RPC     *rpc.Pool
	Metrics *Metrics
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Follower ingests one chain: backfill from the checkpoint, then the head.
type Follower struct {
	cfg     Config
	deps    Deps
	logger  *slog.Logger
	chain   string // decimal chain id, the metrics label
	chainID uint64
	key     []byte // record key: the decimal chain id
	checks  verify.Checks
	nodes   []string // the pool's node names
	// haltedAt is 1 + the block the chain is stopped at (0: running).
	haltedAt atomic.Uint64

	recovered atomic.Bool
	// noListing is set once the replay source answers that it has no
	// moraine_recordedBlockNumbers: sparse spans are then probed.
	noListing atomic.Bool
	// ackedNext is the number after the last block Kafka acknowledged.
	ackedNext atomic.Uint64
	// ackedBlocks and ackedTxs count what Kafka acknowledged since the
	// start, ackedTime is the last acknowledged block's timestamp (Unix
	// seconds): the progress line's rates and lag.
	ackedBlocks, ackedTxs atomic.Uint64
	ackedTime             atomic.Int64
	// lead bounds the backfill's lead over the sink (nil: no bound);
	// dispatchedNext is the number after the last block handed to a fetch.
	lead           *lead
	dispatchedNext atomic.Uint64
}

var (
	// errProduceFailed ends a pipeline after a produce failure: the state is
	// then recovered from Kafka again.
	errProduceFailed = errors.New("produce failed")
	// ErrReorgTooDeep is returned when no common ancestor is found in the
	// window of recent blocks.
	ErrReorgTooDeep = errors.New("reorg deeper than the window of recent blocks")
)

// New validates cfg and deps; it does no I/O.
func New(cfg Config, deps Deps) (*Follower, error) {
	cfg.defaults()
	switch {
	case deps.Logger == nil:
		return nil, errors.New("follow: Deps.Logger is required")
	case deps.Kafka == nil:
		return nil, errors.New("follow: Deps.Kafka is required")
	case deps.RPC == nil:
		return nil, errors.New("follow: Deps.RPC is required")
	case cfg.Topic == "":
		return nil, errors.New("follow: Config.Topic is required")
	case cfg.Window < 128:
		return nil, fmt.Errorf("follow: Config.Window %d is below 128", cfg.Window)
	case cfg.Chain.ID() == 0:
		return nil, fmt.Errorf("follow: chain id %q is not a number", cfg.Chain.EVMChainID)
	}
	if deps.Metrics == nil {
		deps.Metrics = NewMetrics(nil)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	f := &Follower{
		cfg:     cfg,
		deps:    deps,
		chainID: cfg.Chain.ID(),
		chain:   strconv.FormatUint(cfg.Chain.ID(), 10),
		checks:  verify.ForChain(cfg.Chain),
		nodes:   deps.RPC.NodeNames(),
	}
	f.key = []byte(f.chain)
	f.logger = deps.Logger.With("component", "follow", "chain_id", f.chain)
	deps.Metrics.init(f.chain)
	for _, n := range f.nodes {
		for _, c := range chains.Checks {
			deps.Metrics.verifyFailures.WithLabelValues(f.chain, n, c)
		}
	}
	return f, nil
}

// Chain is the decimal chain id.
func (f *Follower) Chain() string { return f.chain }

// Ready reports nil once the node answered, the checkpoint is recovered and
// the acknowledged blocks are within ReadyLag of the head.
func (f *Follower) Ready(context.Context) error {
	if !f.recovered.Load() {
		return errors.New("checkpoint not recovered from Kafka yet")
	}
	if h := f.haltedAt.Load(); h != 0 {
		return fmt.Errorf("stopped at block %d: no node's answer passes verification", h-1)
	}
	head, ok := f.deps.RPC.Head()
	if !ok {
		return errors.New("no head from the node yet")
	}
	if next := f.ackedNext.Load(); head+1 > next && head+1-next > f.cfg.ReadyLag {
		return fmt.Errorf("%d blocks behind the head %d", head+1-next, head)
	}
	return nil
}

// Run ingests until ctx ends, then finishes producing what was fetched and
// waits up to ShutdownTimeout for Kafka's acknowledgements. It returns nil
// on a clean stop.
func (f *Follower) Run(ctx context.Context) error {
	hctx, hcancel := context.WithCancel(ctx)
	var hwg sync.WaitGroup
	hwg.Add(2)
	go func() {
		defer hwg.Done()
		_ = f.deps.RPC.Run(hctx)
	}()
	go func() {
		defer hwg.Done()
		f.reportProgress(hctx, f.cfg.ProgressInterval)
	}()
	if f.lead = newLead(f); f.lead != nil {
		f.lead.refresh(ctx)
		hwg.Add(1)
		go func() {
			defer hwg.Done()
			f.lead.run(hctx)
		}()
	}
	defer func() { hcancel(); hwg.Wait() }()

	// Records are produced under a context that outlives ctx by the
	// shutdown timeout, so that a stop finishes what was fetched.
	pctx, pcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer pcancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(f.cfg.ShutdownTimeout, pcancel) })
	defer stop()

	if err := f.fence(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	restart := obs.Retry{Initial: 500 * time.Millisecond, Max: 10 * time.Second, Log: f.logger, Msg: "producing failed; recovering the checkpoint from Kafka"}
	err := restart.Do(ctx, func() error {
		st, err := f.start(ctx)
		if err != nil {
			return obs.Permanent(err)
		}
		err = f.follow(ctx, pctx, st)
		if errors.Is(err, errProduceFailed) && !errors.Is(err, lease.ErrFenced) {
			return err
		}
		return obs.Permanent(err)
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// fence registers the chain's transactional id before anything is read:
// the broker aborts a former writer's open transaction and refuses that
// writer's every later produce and commit, so the checkpoint read next is
// final (package lease).
func (f *Follower) fence(ctx context.Context) error {
	err := f.retry(200*time.Millisecond, 5*time.Second, "registering the chain's transactional producer failed, retrying", 0).Do(ctx, func() error {
		id, epoch, err := f.deps.Kafka.ProducerID(ctx)
		if err == nil {
			f.logger.Info("registered as the chain's writer", "producer_id", id, "producer_epoch", epoch)
		}
		return err
	})
	if err != nil {
		return ctx.Err()
	}
	return nil
}

// state is the sequencer's position.
type state struct {
	next uint64  // next block number to produce
	cum  uint64  // cumulative transactions up to next-1
	win  *window // recently produced blocks
}

// start recovers the checkpoint (retrying until ctx ends) and returns the
// state to resume from.
func (f *Follower) start(ctx context.Context) (*state, error) {
	var cp *checkpoint
	checkpoint := obs.Retry{Initial: 200 * time.Millisecond, Max: 5 * time.Second, Log: f.logger, Msg: "recovering the checkpoint from Kafka failed, retrying"}
	if err := checkpoint.Do(ctx, func() (err error) {
		cp, err = f.recoverCheckpoint(ctx)
		return err
	}); err != nil {
		return nil, ctx.Err()
	}
	f.deps.Metrics.recoveries.WithLabelValues(f.chain).Inc()
	st := &state{win: cp.win}
	if last, ok := cp.win.last(); ok {
		st.next, st.cum = last.Number+1, last.Cumulative
		f.logger.Info("resuming after the last produced block", "block", last.Number, "block_hash", fmt.Sprintf("0x%x", last.Hash),
			"cumulative_transactions", last.Cumulative, "recent_blocks", cp.win.len(), "partition", cp.partition)
	} else {
		st.next, st.cum = f.cfg.Chain.StartBlock, f.cfg.Chain.StartCumulativeTransactions
		if f.cfg.Chain.Replay {
			// A recording may start far above block 0: begin at its first
			// block rather than probe every number below it.
			first, err := f.earliest(ctx)
			if err != nil {
				return nil, err
			}
			st.next = max(st.next, first)
		}
		f.logger.Info("nothing produced for this chain yet; starting", "block", st.next, "cumulative_transactions", st.cum)
	}
	f.ackedNext.Store(st.next)
	f.deps.Metrics.lastProduced.WithLabelValues(f.chain).Set(float64(st.next) - 1)
	f.recovered.Store(true)
	return st, nil
}

func (f *Follower) earliest(ctx context.Context) (uint64, error) {
	var h convert.Header
	err := f.retry(100*time.Millisecond, 5*time.Second, "asking the replay source for its first block failed, retrying", 0).Do(ctx, func() error {
		raw, err := f.deps.RPC.Call(ctx, "eth_getBlockByNumber", "earliest", false)
		if err == nil {
			h, err = convert.ParseHeader(raw)
		}
		return err
	})
	if err != nil {
		return 0, ctx.Err()
	}
	return h.Number, nil
}

// follow runs pipelines until ctx ends or an error; a reorg restarts the
// pipeline from the common ancestor. One producer serves them all, so that
// a Reorg event and the new branch stay in order behind the old one.
func (f *Follower) follow(ctx, pctx context.Context, st *state) error {
	p := newProducer(f, pctx)
	defer func() {
		// Let what was queued land (it is in order); bounded by the
		// shutdown timeout through pctx.
		p.close()
		if err := p.wait(pctx); err != nil && ctx.Err() != nil {
			f.logger.Warn("stopped before Kafka acknowledged every record; the next start resumes from what it did", "err", err)
		}
	}()
	for {
		next, err := f.pipeline(ctx, p, st)
		if err != nil || next == nil {
			return err
		}
		st = next
	}
}

// pipeline fetches spans of blocks with Concurrency workers, puts them back
// in block order and produces them. It returns a new state when a reorg
// requires starting over from the common ancestor.
func (f *Follower) pipeline(ctx context.Context, p *producer, st *state) (*state, error) {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	maxInflight := 2 * f.cfg.Concurrency
	work := make(chan span, maxInflight)
	// Room for every span in flight: workers never block on sending.
	results := make(chan fetched, maxInflight)
	var wg sync.WaitGroup
	for range f.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sp := range work {
				blocks, err := f.fetchSpan(fctx, sp)
				results <- fetched{span: sp, blocks: blocks, err: err}
			}
		}()
	}
	stopped := false
	stopWorkers := func() {
		if !stopped {
			stopped = true
			cancel()
			close(work)
			wg.Wait()
		}
	}
	defer stopWorkers()

	s := &sequencer{f: f, p: p, st: st, pending: map[uint64]fetched{}, expect: st.next, density: 1}
	dispatchNext := st.next
	inflight := 0
	for {
		headCh := f.deps.RPC.Changed()
		head, known := f.deps.RPC.Head()
		if known {
			f.deps.Metrics.head.WithLabelValues(f.chain).Set(float64(head))
		}
		// A backfill waits while the sink is far behind (lead.go); near
		// the head nothing waits.
		var leadCh <-chan struct{}
		for known && inflight < maxInflight && dispatchNext <= head {
			if dispatchNext+uint64(f.cfg.Concurrency*f.cfg.BatchBlocks) < head {
				var holding bool
				if holding, leadCh = f.lead.hold(); holding {
					break
				}
			}
			end := min(dispatchNext+s.spanSize(), head+1)
			work <- span{start: dispatchNext, end: end}
			// A span carries about BatchBlocks blocks (spanSize), fewer
			// numbers only at the head.
			f.lead.dispatched(min(end-dispatchNext, uint64(f.cfg.BatchBlocks)))
			inflight++
			dispatchNext = end
			f.dispatchedNext.Store(dispatchNext)
		}
		select {
		case <-ctx.Done():
			// Stop fetching, produce what was fetched in order, wait for
			// the acknowledgements.
			stopWorkers()
			for len(results) > 0 {
				r := <-results
				if r.err == nil {
					s.pending[r.start] = r
				}
			}
			// ctx is done, so accept handles no reorg on the way.
			_, _, _ = s.drain(ctx)
			return nil, ctx.Err() // follow waits for the producer
		case <-p.failed:
			stopWorkers()
			return nil, fmt.Errorf("%w: %w", errProduceFailed, p.wait(context.Background()))
		case r := <-results:
			if r.err != nil {
				continue // only when fctx ended, which ends this pipeline
			}
			s.pending[r.start] = r
			consumed, restart, err := s.drain(ctx)
			inflight -= consumed
			if err != nil || restart != nil {
				stopWorkers()
				return restart, err
			}
		case <-headCh:
		case <-leadCh: // closed when a wait for the sink ends
		}
	}
}

// sequencer consumes fetched spans in block order.
type sequencer struct {
	f       *Follower
	p       *producer
	st      *state
	pending map[uint64]fetched
	expect  uint64
	// density is the share of numbers the replay recording holds, learnt
	// from the spans so far: it sizes the next spans so that each carries
	// about BatchBlocks blocks.
	density float64
}

func (s *sequencer) spanSize() uint64 {
	b := uint64(s.f.cfg.BatchBlocks)
	if !s.f.cfg.Chain.Replay {
		return b
	}
	n := uint64(float64(b) / s.density)
	return min(max(n, b), maxProbeSpan)
}

// maxProbeSpan bounds the numbers probed by one request in replay mode:
// 1,000 calls is also go-ethereum's default batch limit.
const maxProbeSpan = 1000

// drain produces every span that is next in order. ctx nil means shutting
// down: a reorg then stops the drain instead of being handled.
func (s *sequencer) drain(ctx context.Context) (consumed int, restart *state, err error) {
	for {
		r, ok := s.pending[s.expect]
		if !ok {
			return consumed, nil, nil
		}
		delete(s.pending, s.expect)
		consumed++
		s.expect = r.end
		if s.f.cfg.Chain.Replay {
			found := max(float64(len(r.blocks)), 0.5)
			s.density = (s.density + found/float64(r.len())) / 2
		}
		for _, b := range r.blocks {
			restart, err := s.accept(ctx, b)
			if err != nil || restart != nil {
				return consumed, restart, err
			}
		}
	}
}

// accept checks that b extends the produced chain and produces it.
func (s *sequencer) accept(ctx context.Context, b *record.Block) (*state, error) {
	f, st := s.f, s.st
	if last, ok := st.win.last(); ok {
		switch {
		case b.Number <= last.Number:
			return nil, fmt.Errorf("internal error: block %d after block %d", b.Number, last.Number)
		case f.cfg.Chain.Replay:
			// Recordings may skip numbers and their parents need not link.
		case b.Number != last.Number+1:
			return nil, fmt.Errorf("internal error: block %d after block %d in a contiguous chain", b.Number, last.Number)
		case !bytes.Equal(b.ParentHash, last.Hash):
			if ctx.Err() != nil {
				// A reorg needs the node; after shutdown only what was
				// already fetched in order is produced.
				return nil, errShuttingDown
			}
			return f.reorg(ctx, s.p, st, b)
		}
	}
	b.CumulativeTransactions = st.cum + uint64(len(b.Transactions))
	if err := f.produceBlock(s.p, b); err != nil {
		return nil, err
	}
	st.win.push(produced{Number: b.Number, Hash: b.Hash, Cumulative: b.CumulativeTransactions})
	st.cum = b.CumulativeTransactions
	st.next = b.Number + 1
	return nil, nil
}

var errShuttingDown = errors.New("shutting down")

// reorg handles a block whose parent is not the last produced block: it
// walks back over the node's canonical blocks to the newest one that
// matches what was produced (the common ancestor), produces a Reorg event
// listing the produced blocks above it, and returns the state to resume
// from: the ancestor, with its cumulative count.
func (f *Follower) reorg(ctx context.Context, p *producer, st *state, b *record.Block) (*state, error) {
	last, _ := st.win.last()
	first, _ := st.win.first()
	f.logger.Info("parent hash mismatch; looking for the common ancestor",
		"block", b.Number, "parent_hash", fmt.Sprintf("0x%x", b.ParentHash), "produced_hash", fmt.Sprintf("0x%x", last.Hash))
	const step = 16
	ancestor, found := uint64(0), false
	for hi := last.Number; !found; {
		lo := first.Number
		if hi >= first.Number+step {
			lo = hi - step + 1
		}
		hashes, err := f.canonicalHashes(ctx, lo, hi)
		if err != nil {
			return nil, err
		}
		for n := hi; ; n-- {
			if mine, ok := st.win.get(n); ok && bytes.Equal(mine.Hash, hashes[n-lo]) {
				ancestor, found = n, true
				break
			}
			if n == lo {
				break
			}
		}
		if found {
			break
		}
		if lo == first.Number {
			return nil, fmt.Errorf("%w (%d blocks, %d..%d): block %d", ErrReorgTooDeep, st.win.len(), first.Number, last.Number, b.Number)
		}
		hi = lo - 1
	}
	orphans := st.win.truncateAbove(ancestor)
	anc, _ := st.win.last()
	next := &state{next: ancestor + 1, cum: anc.Cumulative, win: st.win}
	if len(orphans) == 0 {
		// The node still has our last block: the new block came from a
		// branch that is not (or no longer) canonical. Fetch again, after a
		// pause in case the node keeps contradicting itself.
		f.logger.Info("the produced chain is still canonical; fetching again", "block", ancestor+1)
		if !obs.Sleep(ctx, 200*time.Millisecond) {
			return nil, ctx.Err()
		}
		return next, nil
	}
	ev := &record.Reorg{ChainId: f.chainID, ForkNumber: ancestor + 1}
	for _, o := range orphans {
		ev.Orphaned = append(ev.Orphaned, &record.OrphanedBlock{Number: o.Number, Hash: o.Hash})
	}
	v, err := codec.EncodeChainEvent(&record.ChainEvent{Event: &record.ChainEvent_Reorg{Reorg: ev}})
	if err != nil {
		return nil, err
	}
	f.logger.Info("reorg: producing the orphaned blocks, then the new branch",
		"fork_number", ev.ForkNumber, "orphaned", len(orphans), "common_ancestor", ancestor,
		"ancestor_hash", fmt.Sprintf("0x%x", anc.Hash), "cumulative_transactions", anc.Cumulative)
	if err := p.send(v, time.Time{}, func() {
		f.deps.Metrics.reorgs.WithLabelValues(f.chain).Inc()
		f.deps.Metrics.orphaned.WithLabelValues(f.chain).Add(float64(len(orphans)))
		f.setAcked(ancestor)
	}); err != nil {
		return nil, fmt.Errorf("%w: %w", errProduceFailed, err)
	}
	return next, nil
}

// canonicalHashes returns the node's block hashes for lo..hi, asking again
// while it answers null (a lagging node).
func (f *Follower) canonicalHashes(ctx context.Context, lo, hi uint64) ([][]byte, error) {
	var out [][]byte
	err := f.retry(50*time.Millisecond, 2*time.Second, "fetching canonical blocks for the reorg walk-back failed, retrying", lo).Do(ctx, func() error {
		reqs := make([]*rpc.Request, 0, hi-lo+1)
		for n := lo; n <= hi; n++ {
			reqs = append(reqs, &rpc.Request{Method: "eth_getBlockByNumber", Params: []any{hexNumber(n), false}})
		}
		err := f.deps.RPC.Batch(ctx, reqs, rpc.AtBlock(hi))
		out = make([][]byte, 0, len(reqs))
		for i, r := range reqs {
			if err != nil {
				break
			}
			if r.Err != nil {
				err = r.Err
				break
			}
			h, perr := convert.ParseHeader(r.Result)
			if perr == nil && h.Number != lo+uint64(i) {
				perr = fmt.Errorf("asked for block %d, node answered block %d", lo+uint64(i), h.Number)
			}
			if perr != nil {
				err = perr
				break
			}
			out = append(out, h.Hash)
		}
		if err == nil {
			f.deps.RPC.Release(reqs) // the hashes are copies (ParseHeader)
		}
		return err
	})
	if err != nil {
		return nil, ctx.Err()
	}
	return out, nil
}

// produceBlock encodes b and hands it to the producer.
func (f *Follower) produceBlock(p *producer, b *record.Block) error {
	start := time.Now()
	v, err := codec.EncodeChainEvent(&record.ChainEvent{Event: &record.ChainEvent_Block{Block: b}})
	if err != nil {
		// Not a Kafka failure: retrying would fail the same way.
		return fmt.Errorf("block %d: %w", b.Number, err)
	}
	f.deps.Metrics.stage.WithLabelValues(f.chain, stageEncode).Observe(time.Since(start).Seconds())
	n, txs, ts := b.Number, len(b.Transactions), b.Timestamp
	seen, _ := f.deps.RPC.SeenAt(n)
	err = p.send(v, seen, func() {
		f.deps.Metrics.blocks.WithLabelValues(f.chain).Inc()
		f.deps.Metrics.txs.WithLabelValues(f.chain).Add(float64(txs))
		f.deps.Metrics.lastProducedTime.WithLabelValues(f.chain).Set(float64(ts))
		f.ackedBlocks.Add(1)
		f.ackedTxs.Add(uint64(txs))
		f.ackedTime.Store(int64(ts))
		f.setAcked(n)
	})
	if err != nil {
		return fmt.Errorf("%w: %w", errProduceFailed, err)
	}
	return nil
}

func (f *Follower) setAcked(n uint64) {
	f.ackedNext.Store(n + 1)
	f.deps.Metrics.lastProduced.WithLabelValues(f.chain).Set(float64(n))
}
