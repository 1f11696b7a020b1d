package sink

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/balances"
	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/processor/internal/budget"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Config configures the sink's consumer group (the --processor.* flags).
type Config struct {
	// Enabled runs the sink (--processor.sink-enabled).
	Enabled bool
	// AddressIndex writes the transaction-history tables
	// (--processor.address-index).
	AddressIndex bool
	// Balances writes the balance tables and sums their settled buckets
	// (--processor.balances); BalancesSettle is how far below the head a
	// bucket must end to be summed (--processor.balances-settle-blocks).
	Balances       bool
	BalancesSettle uint64
	// InternalInputOutput stores each internal transaction's input and
	// output (--processor.internal-input-output).
	InternalInputOutput bool
	Group               string
	BatchRows           int
	FlushInterval       time.Duration
	InsertTimeout       time.Duration
	// ShutdownTimeout (the processor's --shutdown.timeout, not a sink flag)
	// is how long past the insert timeout a batch already polled may take
	// to finish on shutdown.
	ShutdownTimeout time.Duration
	// Budget holds backfill batches back while reads are slow (package
	// budget).
	Budget budget.Config
}

// RegisterFlags adds the sink's --processor.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Enabled, "processor.sink-enabled", true, "run the ClickHouse sink (blocks, transactions, logs, internal transactions)")
	fs.BoolVar(&c.AddressIndex, "processor.address-index", true, "write the transaction-history tables (transactions_by_hash, address_lists) that the Data API's transaction and address endpoints read; false saves their cost where only blocks are served")
	fs.BoolVar(&c.Balances, "processor.balances", true, "write the balance tables (balances, nft_transfers, balance_progress) that the Data API's balance and NFT routes read, and sum their settled buckets; false saves their cost where balances are not served")
	fs.Uint64Var(&c.BalancesSettle, "processor.balances-settle-blocks", balances.DefaultRollerConfig().Settle, "sum a bucket of balance deltas once the indexed head is this many blocks past its end; at least ingest's --ingest.reorg-window, so no reorg reaches a summed bucket")
	// No route or webhook payload reads these two columns (the internal
	// transaction lists, details and payloads show type, parties, value and
	// gas); they are the largest share of the bytes ClickHouse inserts and
	// merges (bench/history.md, "Where ClickHouse's work goes").
	fs.BoolVar(&c.InternalInputOutput, "processor.internal-input-output", true, "store each internal transaction's input and output in internal_transactions; no route or webhook payload reads them, and false stores them empty, saving about a seventh of what ClickHouse inserts and merges")
	fs.StringVar(&c.Group, "processor.group", "moraine-processor", "Kafka consumer group of the ClickHouse sink (--kafka.topic-prefix is prepended)")
	// 200,000 rather than less: over a 5M-transaction backfill, ClickHouse
	// merged 2.8 rows per row inserted instead of 3.5 (50,000), for the same
	// CPU in all: some moves from ClickHouse, which every reader shares, to
	// the processor, which scales by instances (bench/history.md, "Larger
	// inserts"). At the head batches end by --processor.flush-interval.
	fs.IntVar(&c.BatchRows, "processor.batch-rows", 200000, "flush a batch once it holds this many rows (all tables); smaller batches overlap ClickHouse inserts with consuming, larger ones leave ClickHouse fewer merges. While the write budget holds a backfill back, its batches shrink with its share")
	fs.DurationVar(&c.FlushInterval, "processor.flush-interval", 100*time.Millisecond, "flush a batch at most this long after its first record (bounds latency at the head)")
	fs.DurationVar(&c.InsertTimeout, "processor.insert-timeout", 2*time.Minute, "deadline of one batch insert")
	c.Budget.RegisterFlags(fs)
}

// Validate checks the configuration of an enabled sink.
func (c Config) Validate() error {
	var errs []error
	if c.BatchRows <= 0 {
		errs = append(errs, errors.New("sink: --processor.batch-rows must be positive"))
	}
	if c.FlushInterval <= 0 {
		errs = append(errs, errors.New("sink: --processor.flush-interval must be positive"))
	}
	if c.Balances && c.BalancesSettle == 0 {
		errs = append(errs, errors.New("sink: --processor.balances-settle-blocks must be positive"))
	}
	errs = append(errs, c.Budget.Validate())
	return errors.Join(errs...)
}

// Deps are the sink consumer's dependencies.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Kafka and ClickHouse are the processor's connection settings.
	Kafka      kafkautil.Config
	ClickHouse chclient.Config
	// Health gets the "kafka" and "clickhouse" readiness checks once
	// connected.
	Health *obs.Health
	// Decompressor, when set, is shared with the matcher, which reads the
	// same block batches.
	Decompressor kgo.Decompressor
}

// Consumer is the sink's consumer group: it writes every block batch to
// ClickHouse and commits its offsets only once the batch is written.
type Consumer struct {
	cfg    Config
	deps   Deps
	m      *metrics
	budget *budget.Budget
	up     chan struct{}
}

// New registers the sink's metrics; it does no network I/O.
func New(cfg Config, deps Deps) (*Consumer, error) {
	if deps.Logger == nil || deps.Registerer == nil || deps.Health == nil {
		return nil, errors.New("sink: Deps.Logger, Deps.Registerer and Deps.Health are required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Consumer{cfg: cfg, deps: deps, m: newMetrics(deps.Registerer), budget: budget.New(cfg.Budget, deps.Registerer, deps.Logger),
		up: make(chan struct{})}, nil
}

// Budget is the sink's write budget, for the matcher of the same processor
// to report head blocks to (budget.Budget.ObserveHead).
func (s *Consumer) Budget() *budget.Budget { return s.budget }

// Connected is closed once the consumer has its ClickHouse connection and
// Kafka client.
func (s *Consumer) Connected() <-chan struct{} { return s.up }

// Run connects to ClickHouse (with backoff) and Kafka and writes batches
// until ctx ends or an insert fails for good. On the way out it leaves the
// group promptly so a replacement gets the partitions.
func (s *Consumer) Run(ctx context.Context) error {
	logger, cfg := s.deps.Logger, s.cfg
	conn, err := chclient.Open(ctx, s.deps.ClickHouse, logger)
	if err != nil {
		return err
	}
	defer conn.Close()
	blocksTopic := s.deps.Kafka.Topic(topics.Blocks)
	// The prefix keeps deployments (and tests) that share a broker apart.
	group := s.deps.Kafka.TopicPrefix + cfg.Group
	opts := s.deps.Kafka.ConsumerOpts(logger, "moraine-processor", group, blocksTopic)
	if s.deps.Decompressor != nil {
		opts = append(opts, kgo.WithDecompressor(s.deps.Decompressor))
	}
	cl, err := kafkautil.NewClient(ctx, logger, opts...)
	if err != nil {
		return err
	}
	s.deps.Health.Add("kafka", kafkautil.Ping(cl))
	s.deps.Health.Add("clickhouse", chclient.Ping(conn))
	close(s.up)
	logger.Info("processor consuming", "topic", blocksTopic, "group", group)
	bctx, stopBudget := context.WithCancel(ctx)
	defer stopBudget()
	go s.budget.Run(bctx, probeRead(conn))
	c := &consumer{cfg: cfg, cl: cl, writer: NewWriter(conn, cfg.InsertTimeout), m: s.m, logger: logger,
		budget: s.budget, atHead: map[string]bool{}}
	var rolled chan struct{}
	if cfg.Balances {
		rcfg := balances.DefaultRollerConfig()
		rcfg.Settle = cfg.BalancesSettle
		c.roller = balances.NewRoller(balances.Conn{Conn: conn, Timeout: cfg.InsertTimeout}, rcfg, logger, s.deps.Registerer, "processor")
		rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		rolled = make(chan struct{})
		go func() {
			defer close(rolled)
			_ = c.roller.Run(rctx)
		}()
		defer func() { stop(); <-rolled }()
	}
	err = c.run(ctx)
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	cl.LeaveGroupContext(closeCtx)
	cl.Close()
	return err
}

type metrics struct {
	consumed     *prometheus.CounterVec
	blocks       prometheus.Counter
	txs          prometheus.Counter
	stage        *prometheus.HistogramVec
	rows         prometheus.Histogram
	decodeErrors prometheus.Counter
	lastWritten  *prometheus.GaugeVec
	// lastWrittenTime is that block's timestamp: time() minus it is how far
	// the indexed chain lags the wall clock.
	lastWrittenTime *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := obs.NewMetrics(reg, "processor")
	return &metrics{
		consumed:     f.CounterVec("records_consumed_total", "Kafka records consumed.", "topic"),
		blocks:       f.Counter("blocks_written_total", "Blocks written to ClickHouse (redeliveries included)."),
		txs:          f.Counter("transactions_written_total", "Transactions written to ClickHouse (redeliveries included)."),
		stage:        f.HistogramVec("batch_duration_seconds", "Time per batch stage.", prometheus.ExponentialBuckets(0.001, 2, 16), "stage"),
		rows:         f.Histogram("batch_rows", "Rows per ClickHouse batch (all tables).", prometheus.ExponentialBuckets(1, 4, 12)),
		decodeErrors: f.Counter("decode_errors_total", "Records that could not be decoded and were skipped."),
		lastWritten:  f.GaugeVec("last_written_block", "Highest block number written, per chain.", "chain"),
		lastWrittenTime: f.GaugeVec("last_written_block_timestamp_seconds",
			"Timestamp (Unix seconds) of the highest block written, per chain.", "chain"),
	}
}

type consumer struct {
	cfg    Config
	cl     *kgo.Client
	writer *Writer
	m      *metrics
	logger *slog.Logger
	// roller sums settled balance buckets (nil without balances).
	roller *balances.Roller
	// budget holds backfill batches back while reads are slow: after such
	// a batch, the next is written no earlier than pauseUntil, unless a
	// record of a chain whose last batch was at its head (atHead, by
	// record key) arrives first.
	budget     *budget.Budget
	pauseUntil time.Time
	atHead     map[string]bool
	// held are records polled during a pause, not yet written.
	held []*kgo.Record
	// progress of the periodic "indexed" log line
	progress indexProgress
}

// A written batch has its child rows in ClickHouse; its blocks, hashes and
// heads, then its offsets, are still to go.
type written struct {
	records []*kgo.Record
	batch   *Batch
	// last is the highest block of each chain in the batch.
	last  map[uint64]lastBlock
	start time.Time
}

// lastBlock is a chain's highest block in a batch.
type lastBlock struct{ number, timestamp uint64 }

// run polls, decodes and writes each batch's child rows, and hands the
// batch to a second goroutine that writes its blocks, hashes and heads and
// commits its offsets, in batch order: the blocks of one batch go in while
// the children of the next do. Measured on the Gunzilla replay (make
// bench), the three small INSERTs of a batch took 30 to 130 ms while the
// machine was busy, time in which the children's INSERTs now proceed.
//
// The hand-over is unbuffered, so at most two batches are in memory: one
// being finished, and one whose children are written (or being written).
// A batch already polled is finished on a detached context, so shutdown
// does not waste it.
//
// Rebalances are allowed once a batch is handed over. Should the batch's
// partitions move before its offsets are committed, the commit fails (a
// warning) and the new owner writes the batch again: every row is versioned
// by its offset, so the repeat changes nothing.
func (c *consumer) run(ctx context.Context) error {
	toFinish := make(chan *written)
	finisherDone := make(chan struct{})
	var finishErr error
	go func() {
		defer close(finisherDone)
		for w := range toFinish {
			if finishErr = c.finish(ctx, w); finishErr != nil {
				return // the poll loop sees finisherDone and stops
			}
		}
	}()
	err := c.poll(ctx, toFinish, finisherDone)
	close(toFinish)
	<-finisherDone
	return errors.Join(err, finishErr)
}

// poll polls and writes child rows until ctx ends, an insert fails for
// good, or the finisher stops.
func (c *consumer) poll(ctx context.Context, toFinish chan<- *written, finisherDone <-chan struct{}) error {
	for {
		// A backfill batch's pause: what arrives meanwhile is the next
		// batch.
		records := c.pausedPoll(ctx)
		var fetches kgo.Fetches
		if len(records) == 0 {
			fetches = c.cl.PollRecords(ctx, c.pollSize())
		}
		if ctx.Err() != nil {
			c.cl.AllowRebalance()
			return nil
		}
		if fetches.IsClientClosed() {
			return nil
		}
		var fetchErr error
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				fetchErr = fmt.Errorf("fetch %s/%d: %w", t, p, err)
			}
		})
		if fetchErr != nil {
			c.logger.Warn("fetch error, retrying", "err", fetchErr)
		}
		records = append(records, fetches.Records()...)
		// Top up the batch while more records arrive quickly: large inserts
		// during backfill, one flush interval of latency at the head.
		// Not during a backfill's pause: only a head's records go then.
		deadline := time.Now().Add(c.cfg.FlushInterval)
		for len(records) > 0 && !time.Now().Before(c.pauseUntil) && rowsEstimate(records) < c.batchRows() && time.Now().Before(deadline) {
			pctx, cancel := context.WithDeadline(ctx, deadline)
			more := c.cl.PollRecords(pctx, c.pollSize())
			cancel()
			if len(more.Records()) == 0 {
				break
			}
			records = append(records, more.Records()...)
		}
		if len(records) > 0 {
			w, err := c.writeChildren(ctx, records)
			if err != nil {
				c.cl.AllowRebalance()
				return err
			}
			c.pace(w, time.Now())
			select {
			case toFinish <- w:
			case <-finisherDone:
				c.cl.AllowRebalance()
				return nil // the finisher's error is the one to report
			}
		}
		c.cl.AllowRebalance()
	}
}

// pollChunk is how many records a batch takes at a time until it holds
// BatchRows rows. Polling more at once let a backlog (a backfill of large
// blocks: 10,000 records of the corpus are about 200 MB decoded and 2
// million rows) into one batch far above BatchRows: the processor's memory
// went over 2 GB, and the one large INSERT held up both writing and reads.
const pollChunk = 256

// rowsEstimate is a cheap size guess: record bytes / 200 approximates rows.
func rowsEstimate(rs []*kgo.Record) int {
	n := 0
	for _, r := range rs {
		n += len(r.Value)/200 + 1
	}
	return n
}

// writeChildren decodes records into a batch and inserts its child rows.
func (c *consumer) writeChildren(ctx context.Context, records []*kgo.Record) (*written, error) {
	w := &written{records: records, last: map[uint64]lastBlock{}, start: time.Now()}
	events := make([]Event, 0, len(records))
	for _, r := range records {
		c.m.consumed.WithLabelValues(r.Topic).Inc()
		ev, err := codec.DecodeChainEvent(r.Value)
		if err != nil {
			// A record we cannot decode would block the partition forever;
			// count and log it, then move on.
			c.m.decodeErrors.Inc()
			c.logger.Error("skipping undecodable record", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
			continue
		}
		events = append(events, Event{Offset: r.Offset, Event: ev})
		if b, ok := ev.GetEvent().(*record.ChainEvent_Block); ok && b.Block.Number >= w.last[b.Block.ChainId].number {
			w.last[b.Block.ChainId] = lastBlock{number: b.Block.Number, timestamp: b.Block.Timestamp}
		}
	}
	batch, err := NewBatchOf(events, Tables{Index: c.cfg.AddressIndex, Balances: c.cfg.Balances,
		NoInternalInputOutput: !c.cfg.InternalInputOutput})
	if err != nil {
		return nil, err
	}
	w.batch = batch
	c.m.stage.WithLabelValues("decode").Observe(time.Since(w.start).Seconds())
	c.m.rows.Observe(float64(w.batch.Len()))
	return w, c.retry(ctx, "insert", func(ctx context.Context) error { return c.writer.WriteChildren(ctx, w.batch) })
}

// finish inserts w's blocks, hashes and heads, then commits its offsets.
func (c *consumer) finish(ctx context.Context, w *written) error {
	if err := c.retry(ctx, "insert_blocks", func(ctx context.Context) error { return c.writer.WriteBlocks(ctx, w.batch) }); err != nil {
		return err
	}
	commitStart := time.Now()
	wctx, cancel := c.detached(ctx)
	defer cancel()
	if err := c.cl.CommitRecords(wctx, w.records...); err != nil {
		// Not fatal: the batch is written; a redelivery is idempotent.
		c.logger.Warn("offset commit failed; records may be redelivered", "err", err)
	}
	c.m.stage.WithLabelValues("commit").Observe(time.Since(commitStart).Seconds())
	c.m.blocks.Add(float64(w.batch.Blocks))
	c.m.txs.Add(float64(w.batch.Txs))
	for chain, b := range w.last {
		c.m.lastWritten.WithLabelValues(strconv.FormatUint(chain, 10)).Set(float64(b.number))
		c.m.lastWrittenTime.WithLabelValues(strconv.FormatUint(chain, 10)).Set(float64(b.timestamp))
		if c.roller != nil {
			c.roller.Notify(chain, b.number)
		}
	}
	c.progress.add(w, time.Now(), c.logger)
	c.logger.Debug("batch written", "records", len(w.records), "blocks", w.batch.Blocks, "txs", w.batch.Txs, "rows", w.batch.Len(), "took", time.Since(w.start))
	return nil
}

// detached is ctx without its cancellation, bounded by the insert and
// shutdown timeouts: a polled batch is finished even when shutdown begins.
func (c *consumer) detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.cfg.InsertTimeout+c.cfg.ShutdownTimeout)
}

// retry runs write until it succeeds, observing its time as stage.
// ClickHouse restarts are survivable: the batch (and its uncommitted
// offsets) is kept and written again, with backoff, until ClickHouse is
// back or the detached deadline passes.
func (c *consumer) retry(ctx context.Context, stage string, write func(context.Context) error) error {
	start := time.Now()
	wctx, cancel := c.detached(ctx)
	defer cancel()
	again := obs.Retry{Initial: 200 * time.Millisecond, Max: 10 * time.Second, Log: c.logger, Msg: "clickhouse insert failed, retrying", Attrs: []any{"stage", stage}}
	if err := again.Do(wctx, func() error { return write(wctx) }); err != nil {
		return fmt.Errorf("sink: write batch: %w", err)
	}
	c.m.stage.WithLabelValues(stage).Observe(time.Since(start).Seconds())
	return nil
}

// indexProgressInterval is the period of the "indexed" log line.
const indexProgressInterval = 30 * time.Second

// indexProgress counts what was written since the last "indexed" line.
type indexProgress struct {
	since       time.Time
	blocks, txs int
	last        map[uint64]lastBlock
}

// add counts a written batch and, once per indexProgressInterval, logs per
// chain the highest block written, how old it is, and the sink's rate over
// the interval (all chains together).
func (p *indexProgress) add(w *written, now time.Time, logger *slog.Logger) {
	if p.last == nil {
		p.since, p.last = now, map[uint64]lastBlock{}
	}
	p.blocks += w.batch.Blocks
	p.txs += w.batch.Txs
	for chain, b := range w.last {
		p.last[chain] = b
	}
	secs := now.Sub(p.since).Seconds()
	if secs < indexProgressInterval.Seconds() {
		return
	}
	for chain, b := range p.last {
		logger.Info("indexed", "chain_id", chain, "block", b.number,
			"lag", now.Sub(time.Unix(int64(b.timestamp), 0)).Round(time.Second).String(),
			"blocks_per_s", math.Round(float64(p.blocks)/secs*10)/10, "txs_per_s", math.Round(float64(p.txs)/secs))
	}
	*p = indexProgress{since: now, last: map[uint64]lastBlock{}}
}
