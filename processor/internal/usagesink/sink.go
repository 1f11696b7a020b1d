package usagesink

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Config is the usage sink's settings (the processor's --usage.* flags).
type Config struct {
	Enabled       bool
	Group         string
	BatchRows     int
	FlushInterval time.Duration
	InsertTimeout time.Duration
	// LogRetention keeps the request log (api_requests) and the minute
	// rollup; MetricsRetention the hour and day rollups.
	LogRetention     time.Duration
	MetricsRetention time.Duration
	// RetentionInterval is the period of the retention pass (not a flag).
	RetentionInterval time.Duration
	// TopInterval is the period of the top-accounts gauges (not a flag).
	TopInterval time.Duration
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	return Config{Enabled: true, Group: "moraine-usage", BatchRows: 50_000, FlushInterval: 30 * time.Second,
		InsertTimeout: 30 * time.Second, LogRetention: 30 * 24 * time.Hour, MetricsRetention: 400 * 24 * time.Hour,
		RetentionInterval: time.Hour, TopInterval: time.Minute}
}

// RegisterFlags adds the --usage.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	*c = d
	fs.BoolVar(&c.Enabled, "usage.enabled", d.Enabled, "write the query service's request records (API-requests topic) to ClickHouse's request log and usage rollups")
	fs.StringVar(&c.Group, "usage.group", d.Group, "Kafka consumer group of the usage sink (--kafka.topic-prefix is prepended)")
	fs.IntVar(&c.BatchRows, "usage.batch-rows", d.BatchRows, "write a batch of request records once it holds this many")
	// Every insert makes a part in the log and in each rollup (10 tables),
	// and ClickHouse writes them (and merges them later) on the cores that
	// answer the API's reads: each insert delays the reads that arrive
	// while it runs. Every 30 s instead of every 5 s, as many rows cost
	// fewer parts and fewer merges, and the delayed reads stay well under
	// 1% of them (bench/results.md, "The API as a product"); the log is
	// that much behind.
	fs.DurationVar(&c.FlushInterval, "usage.flush-interval", d.FlushInterval, "write a batch of request records at most this long after its first record")
	fs.DurationVar(&c.InsertTimeout, "usage.insert-timeout", d.InsertTimeout, "deadline of one insert of request records (a failed insert is retried until ClickHouse answers)")
	fs.DurationVar(&c.LogRetention, "usage.log-retention", d.LogRetention, "how long request logs (getApiLogs) and minute usage buckets are kept; whole months are dropped (0: forever)")
	fs.DurationVar(&c.MetricsRetention, "usage.metrics-retention", d.MetricsRetention, "how long hourly and daily usage metrics (getApiUsageMetrics) are kept; whole months are dropped (0: forever)")
}

// Validate checks an enabled sink's values.
func (c Config) Validate() error {
	var errs []error
	if c.Group == "" || c.BatchRows <= 0 || c.FlushInterval <= 0 || c.InsertTimeout <= 0 {
		errs = append(errs, errors.New("usagesink: --usage.group, --usage.batch-rows, --usage.flush-interval and --usage.insert-timeout must be set and positive"))
	}
	if c.LogRetention < 0 || c.MetricsRetention < 0 {
		errs = append(errs, errors.New("usagesink: --usage.log-retention and --usage.metrics-retention must not be negative"))
	}
	if c.LogRetention > 0 && c.MetricsRetention > 0 && c.MetricsRetention < c.LogRetention {
		errs = append(errs, errors.New("usagesink: --usage.metrics-retention must not be shorter than --usage.log-retention"))
	}
	return errors.Join(errs...)
}

// Deps are the sink's collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Kafka      kafkautil.Config
	ClickHouse chclient.Config
	// Health gets the "usage" readiness check once connected.
	Health *obs.Health
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Sink is the usage sink.
type Sink struct {
	cfg  Config
	deps Deps
	m    *metrics
	up   chan struct{}
}

// New validates and registers the metrics; no I/O.
func New(cfg Config, d Deps) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Logger == nil || d.Registerer == nil || d.Health == nil {
		return nil, errors.New("usagesink: Deps.Logger, Registerer and Health are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if cfg.RetentionInterval <= 0 {
		cfg.RetentionInterval = time.Hour
	}
	if cfg.TopInterval <= 0 {
		cfg.TopInterval = time.Minute
	}
	return &Sink{cfg: cfg, deps: d, m: newMetrics(d.Registerer), up: make(chan struct{})}, nil
}

// Connected is closed once the sink has its ClickHouse connection and
// Kafka client.
func (s *Sink) Connected() <-chan struct{} { return s.up }

// Group is the consumer group's full name.
func (s *Sink) Group() string { return s.deps.Kafka.TopicPrefix + s.cfg.Group }

// Run connects to ClickHouse and Kafka and writes records until ctx ends
// or a write fails for good; the retention pass and the top-accounts
// gauges run beside it.
func (s *Sink) Run(ctx context.Context) error {
	logger := s.deps.Logger.With("component", "usagesink")
	conn, err := chclient.Open(ctx, s.deps.ClickHouse, logger)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer conn.Close()
	c := &consumer{cfg: s.cfg, conn: conn, m: s.m, logger: logger, marks: map[int32]int64{}, now: s.deps.Now}
	topic := s.deps.Kafka.Topic(topics.APIRequests)
	opts := append(s.deps.Kafka.ConsumerOpts(logger, "moraine-processor-usage", s.Group(), topic),
		// A partition assigned anew may hold records another instance
		// wrote: read its mark from ClickHouse before writing it.
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { c.forget(m[topic]) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { c.forget(m[topic]) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { c.forget(m[topic]) }),
		// The sink writes every --usage.flush-interval: it need not hear of
		// each produce of the query instances (every 500 ms from each).
		// Fetches that wait for a megabyte or a second wake the broker and
		// this process about once a second, beside the API they share the
		// machine with.
		kgo.FetchMinBytes(1<<20),
		kgo.FetchMaxWait(time.Second),
	)
	cl, err := kafkautil.NewClient(ctx, logger, opts...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	c.cl = cl
	ping := chclient.Ping(conn)
	s.deps.Health.Add("usage", func(ctx context.Context) error {
		return errors.Join(ping(ctx), kafkautil.Ping(cl)(ctx))
	})
	close(s.up)
	logger.Info("usage sink consuming", "topic", topic, "group", s.Group())
	var wg sync.WaitGroup
	bg, stop := context.WithCancel(ctx)
	wg.Add(2)
	go func() { defer wg.Done(); s.runRetention(bg, conn, logger) }()
	go func() { defer wg.Done(); s.runTop(bg, conn, logger) }()
	err = c.run(ctx)
	stop()
	wg.Wait()
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	cl.LeaveGroupContext(closeCtx)
	cl.Close()
	return err
}

// consumer is the poll-write-commit loop.
type consumer struct {
	cfg    Config
	cl     *kgo.Client
	conn   driver.Conn
	m      *metrics
	logger *slog.Logger
	now    func() time.Time

	mu sync.Mutex
	// marks holds, per partition, the highest offset known to be in
	// api_requests (-1: none); a partition without an entry must be read
	// from ClickHouse first.
	marks map[int32]int64
}

// forget drops the marks of partitions that moved.
func (c *consumer) forget(parts []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range parts {
		delete(c.marks, p)
	}
}

func (c *consumer) run(ctx context.Context) error {
	for {
		fetches := c.cl.PollRecords(ctx, c.cfg.BatchRows)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			c.cl.AllowRebalance()
			return nil
		}
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.logger.Warn("fetch error, retrying", "topic", t, "partition", p, "err", err)
			}
		})
		records := fetches.Records()
		deadline := time.Now().Add(c.cfg.FlushInterval)
		for len(records) > 0 && len(records) < c.cfg.BatchRows && time.Now().Before(deadline) {
			pctx, cancel := context.WithDeadline(ctx, deadline)
			more := c.cl.PollRecords(pctx, c.cfg.BatchRows-len(records))
			cancel()
			if len(more.Records()) == 0 {
				break
			}
			records = append(records, more.Records()...)
		}
		if len(records) > 0 {
			if err := c.write(ctx, records); err != nil {
				c.cl.AllowRebalance()
				if ctx.Err() != nil {
					return nil // shutdown mid-outage: uncommitted, read again next time
				}
				return err
			}
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if err := c.cl.CommitRecords(wctx, records...); err != nil {
				// Written: a redelivery is skipped by the marks.
				c.logger.Warn("offset commit failed; records may be redelivered (and skipped)", "err", err)
			}
			cancel()
		}
		c.cl.AllowRebalance()
	}
}

// write writes records not yet in ClickHouse, retrying until it succeeds
// or ctx ends; a batch polled before shutdown still gets InsertTimeout.
func (c *consumer) write(ctx context.Context, records []*kgo.Record) error {
	start := time.Now()
	rows := make([]row, 0, len(records))
	for _, r := range records {
		a, err := codec.DecodeAPIRequest(r.Value)
		if err != nil {
			c.m.records.WithLabelValues("undecodable").Inc()
			c.logger.Error("skipping undecodable request record", "partition", r.Partition, "offset", r.Offset, "err", err)
			continue
		}
		rows = append(rows, row{rec: a, partition: r.Partition, offset: r.Offset})
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		// Shutdown: give the batch in hand one insert timeout to finish.
		time.AfterFunc(c.cfg.InsertTimeout, cancel)
	})
	defer stop()
	var written []row
	again := obs.Retry{Initial: 200 * time.Millisecond, Max: 10 * time.Second, Log: c.logger, Msg: "writing request records failed, retrying"}
	err := again.Do(wctx, func() error {
		todo, err := c.unwritten(wctx, rows)
		if err != nil {
			return err
		}
		if err := insert(wctx, c.conn, c.cfg.InsertTimeout, todo); err != nil {
			// ClickHouse may have written the block before the error
			// reached us: read the marks again before the retry.
			c.forget(partitionsOf(todo))
			return err
		}
		written = todo
		return nil
	})
	if err != nil {
		return fmt.Errorf("usagesink: write request records: %w", err)
	}
	c.mu.Lock()
	var newest uint64
	for _, r := range written {
		// A partition forgotten meanwhile (it moved) is read again when
		// it comes back.
		if m, ok := c.marks[r.partition]; ok && r.offset > m {
			c.marks[r.partition] = r.offset
		}
		newest = max(newest, r.rec.At)
	}
	c.mu.Unlock()
	c.m.records.WithLabelValues("written").Add(float64(len(written)))
	c.m.records.WithLabelValues("duplicate").Add(float64(len(rows) - len(written)))
	if newest > 0 {
		c.m.lastWritten.Set(float64(newest) / 1000)
	}
	c.m.batch.Observe(time.Since(start).Seconds())
	return nil
}

// unwritten returns the rows above their partition's mark, reading the
// marks it lacks from ClickHouse.
func (c *consumer) unwritten(ctx context.Context, rows []row) ([]row, error) {
	c.mu.Lock()
	var missing []int32
	seen := map[int32]bool{}
	for _, r := range rows {
		if _, ok := c.marks[r.partition]; !ok && !seen[r.partition] {
			missing = append(missing, r.partition)
			seen[r.partition] = true
		}
	}
	c.mu.Unlock()
	if len(missing) > 0 {
		found, err := readMarks(ctx, c.conn, c.cfg.InsertTimeout, missing)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		for _, p := range missing {
			m, ok := found[p]
			if !ok {
				m = -1
			}
			c.marks[p] = m
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]row, 0, len(rows))
	for _, r := range rows {
		if r.offset > c.marks[r.partition] {
			out = append(out, r)
		}
	}
	return out, nil
}

func partitionsOf(rows []row) []int32 {
	seen := map[int32]bool{}
	var out []int32
	for _, r := range rows {
		if !seen[r.partition] {
			seen[r.partition] = true
			out = append(out, r.partition)
		}
	}
	return out
}
