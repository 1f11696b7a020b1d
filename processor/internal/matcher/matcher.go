package matcher

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/rpc"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/processor/internal/match"
	"github.com/moraine-data/moraine/processor/internal/payload"
	"github.com/moraine-data/moraine/processor/internal/stream"
	"github.com/moraine-data/moraine/processor/internal/watchlist"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Config configures the address-activity matcher.
type Config struct {
	Enabled bool
	Group   string
	// TransactionalID identifies this instance's transactional producer and
	// its static group membership. It must be unique per running instance
	// and should stay the same across restarts of one instance (see the
	// package doc).
	TransactionalID    string
	TransactionTimeout time.Duration
	SessionTimeout     time.Duration
	CatchUpTimeout     time.Duration
	MaxPollRecords     int
	// IdleCommitInterval bounds how long batches that produced no activity
	// wait for their offsets to be committed (session).
	IdleCommitInterval time.Duration
	// StartOffset is where a group without committed offsets starts:
	// "start" (every retained block) or "end" (new blocks only).
	StartOffset    string
	TokenCacheSize int
	EthCallTimeout time.Duration
	// RetractionWindow is how many blocks a delivered message stays
	// retractable (package stream).
	RetractionWindow uint64
	// StreamCatchUpTimeout bounds the wait for the webhook-stream state
	// before a batch; past it the batch is aborted and read again.
	StreamCatchUpTimeout time.Duration
	// ShutdownTimeout (the processor's --shutdown.timeout, not a --matcher
	// flag) is how long past the transaction timeout a batch already polled
	// may take to finish on shutdown.
	ShutdownTimeout time.Duration
}

// defaultTransactionalID derives the id from the host name, stable across
// restarts of one pod of a StatefulSet or one machine.
func defaultTransactionalID() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "localhost"
	}
	return "moraine-matcher-" + h
}

// RegisterFlags adds the --matcher.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Enabled, "matcher.enabled", true, "run the address-activity matcher (webhook messages to the activity topic)")
	fs.StringVar(&c.Group, "matcher.group", "moraine-matcher", "Kafka consumer group of the matcher (separate from the sink's; --kafka.topic-prefix is prepended)")
	fs.StringVar(&c.TransactionalID, "matcher.transactional-id", defaultTransactionalID(),
		"Kafka transactional id (and static group instance id) of this matcher: unique per running instance, stable across its restarts (--kafka.topic-prefix is prepended)")
	fs.DurationVar(&c.TransactionTimeout, "matcher.transaction-timeout", 20*time.Second,
		"Kafka transaction timeout: an instance that dies mid-batch and does not come back under the same id holds back read_committed consumers of the activity topic this long")
	fs.DurationVar(&c.SessionTimeout, "matcher.session-timeout", 15*time.Second, "consumer group session timeout (static membership: how long a dead instance keeps its partitions)")
	fs.DurationVar(&c.CatchUpTimeout, "matcher.catchup-timeout", 2*time.Second,
		"how long a batch waits for the watch table to apply address changes acknowledged before it (then it goes on, logged)")
	fs.IntVar(&c.MaxPollRecords, "matcher.max-poll-records", 1000, "block records per matcher batch")
	fs.DurationVar(&c.IdleCommitInterval, "matcher.idle-commit-interval", time.Second,
		"how long batches that matched nothing may keep their offsets uncommitted: their transaction stays open (nothing is sent for it) until a batch produces activity or this passes; a restart reads at most this much again")
	fs.StringVar(&c.StartOffset, "matcher.start-offset", "start", "where a matcher group without committed offsets starts: start (all retained blocks) or end (new blocks only)")
	fs.IntVar(&c.TokenCacheSize, "matcher.token-cache-size", 100000, "token metadata (name, symbol, decimals) cache entries, per (chain, token)")
	fs.DurationVar(&c.EthCallTimeout, "matcher.eth-call-timeout", 2*time.Second, "deadline of the eth_call lookups of token metadata for one batch")
	fs.Uint64Var(&c.RetractionWindow, "matcher.retraction-window", 256,
		"blocks during which a delivered message can still be retracted after a reorg (keep at least ingest's --ingest.reorg-window)")
	fs.DurationVar(&c.StreamCatchUpTimeout, "matcher.stream-catchup-timeout", 10*time.Second,
		"how long a batch waits for the webhook-stream state (sequences, pending and emitted messages) to be read up to date; past it the batch is aborted and read again")
}

// Validate checks the matcher configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Group == "" {
		errs = append(errs, errors.New("matcher: --matcher.group is required"))
	}
	if c.TransactionalID == "" {
		errs = append(errs, errors.New("matcher: --matcher.transactional-id is required"))
	}
	if c.TransactionTimeout < time.Second {
		errs = append(errs, errors.New("matcher: --matcher.transaction-timeout must be at least 1s"))
	}
	if c.MaxPollRecords <= 0 {
		errs = append(errs, errors.New("matcher: --matcher.max-poll-records must be positive"))
	}
	if c.CatchUpTimeout <= 0 || c.EthCallTimeout <= 0 || c.SessionTimeout <= 0 {
		errs = append(errs, errors.New("matcher: --matcher.catchup-timeout, --matcher.eth-call-timeout and --matcher.session-timeout must be positive"))
	}
	if c.IdleCommitInterval <= 0 || c.IdleCommitInterval >= c.TransactionTimeout {
		errs = append(errs, errors.New("matcher: --matcher.idle-commit-interval must be positive and shorter than --matcher.transaction-timeout"))
	}
	if c.RetractionWindow == 0 || c.StreamCatchUpTimeout <= 0 {
		errs = append(errs, errors.New("matcher: --matcher.retraction-window and --matcher.stream-catchup-timeout must be positive"))
	}
	if c.TokenCacheSize <= 0 {
		errs = append(errs, errors.New("matcher: --matcher.token-cache-size must be positive"))
	}
	if c.StartOffset != "start" && c.StartOffset != "end" {
		errs = append(errs, errors.New("matcher: --matcher.start-offset must be start or end"))
	}
	return errors.Join(errs...)
}

type metrics struct {
	emitted      *prometheus.CounterVec
	stage        *prometheus.HistogramVec
	transactions *prometheus.CounterVec
	records      *prometheus.CounterVec
	catchUpSlow  prometheus.Counter
	payloadErrs  prometheus.Counter
	retractions  *prometheus.CounterVec
	streamSlow   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, reader tableReader, streams *stream.State) *metrics {
	f := obs.NewMetrics(reg, "processor")
	m := &metrics{
		emitted: f.CounterVec("activities_emitted_total", "Activity messages committed to the activity topic.", "chain"),
		stage: f.HistogramVec("match_batch_duration_seconds", "Time per matcher batch stage.",
			prometheus.ExponentialBuckets(0.0005, 2, 16), "stage"),
		transactions: f.CounterVec("match_transactions_total",
			"Matcher Kafka transactions by result (aborted: the batch is reprocessed).", "result"),
		records: f.CounterVec("match_records_total", "Blocks-topic records in committed matcher batches, by kind.", "kind"),
		catchUpSlow: f.Counter("watchlist_catchup_timeouts_total",
			"Batches matched before the watch table caught up (catch-up timed out or failed)."),
		payloadErrs: f.Counter("payload_errors_total", "Matches whose payload could not be built (skipped, logged)."),
		retractions: f.CounterVec("retractions_emitted_total",
			"Retraction messages committed to the activity topic (delivered messages of blocks a reorg orphaned).", "chain"),
		streamSlow: f.Counter("stream_catchup_failures_total",
			"Batches aborted because the webhook-stream state could not be read up to date in time (read again)."),
	}
	f.GaugeFunc("stream_emitted_blocks", "Recent blocks whose delivered messages the matcher can still retract.",
		func() float64 { e, _ := streams.Sizes(); return float64(e) })
	f.GaugeFunc("stream_pending_blocks", "(block, webhook) pairs whose messages wait for the webhook's confirmations.",
		func() float64 { _, p := streams.Sizes(); return float64(p) })
	for _, s := range []string{"catchup", "match", "tokens", "payload", "transaction", "total"} {
		m.stage.WithLabelValues(s)
	}
	for _, r := range []string{"committed", "aborted"} {
		m.transactions.WithLabelValues(r)
	}
	for _, k := range []string{"block", "reorg", "unwatched", "undecodable"} {
		m.records.WithLabelValues(k)
	}
	f.GaugeFunc("watchlist_ready", "1 once the watch table has read the address-watch topic up to its start-up end.",
		func() float64 {
			if reader.Ready() {
				return 1
			}
			return 0
		})
	return m
}

// tableReader is what the matcher needs of kafkautil.TableReader.
type tableReader interface {
	Run(ctx context.Context) error
	Ready() bool
	WaitReady(ctx context.Context) error
	CatchUp(ctx context.Context) error
}

// Deps are the matcher's dependencies.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Kafka is the processor's Kafka configuration (brokers, topic prefix).
	Kafka kafkautil.Config
	// Chains gives payloads their native token and token metadata lookups
	// their RPC URLs; nil matches all the same, with neither.
	Chains *chains.Config
	// Health gets the "watchlist" readiness check.
	Health *obs.Health
	// Decompressor, when set, is shared with the sink, which reads the same
	// block batches.
	Decompressor kgo.Decompressor
	// Partitions, when set (package replay), is told which blocks-topic
	// partitions the matcher owns.
	Partitions Partitions
	// BeforeEnd, when set (by tests only), runs between producing a batch's
	// records and ending its transaction, and aborts the transaction when
	// it returns true: the crash test widens that window so its kills land
	// inside transactions, the matcher test aborts a batch as a rebalance
	// would.
	BeforeEnd func() (abort bool)
	// ActivityCommitted, when set, is called for each block whose activity
	// a transaction committed, with the block's timestamp (Unix seconds)
	// and its record's timestamp (when ingest first heard of a head block,
	// ingest/internal/follow): the processor's write budget (package
	// budget) times the head's way to its webhooks with it.
	ActivityCommitted func(timestamp uint64, seen time.Time)
}

// Partitions is told which partitions of the blocks topic the matcher
// owns: the replays of a chain run in the instance that matches it (package
// replay).
type Partitions interface {
	// Assigned is called when the session gets partitions, before any of
	// their records is matched: it fences the replays that the partitions'
	// previous owner may still be running, so that it returns only once
	// none of them can commit.
	Assigned(ctx context.Context, partitions []int32)
	// Revoked is called when partitions are revoked or lost.
	Revoked(partitions []int32)
}

// Consumer is the address-activity matcher: the watch table, its reader,
// and the transactional consume-match-produce loop.
type Consumer struct {
	cfg     Config
	kafka   kafkautil.Config
	logger  *slog.Logger
	table   *watchlist.Table
	reader  tableReader
	streams *stream.State
	// streamReader reads the webhook-stream topic into streams.
	streamReader tableReader
	streamTopic  string
	match        *match.Matcher
	tokens       *tokenmeta.Resolver
	natives      map[uint64]*chains.Token
	m            *metrics
	activity     string
	blocks       string
	now          func() time.Time
	// decompressor, when set, is shared with the sink.
	decompressor kgo.Decompressor
	beforeEnd    func() (abort bool)
	// activityCommitted is Deps.ActivityCommitted.
	activityCommitted func(timestamp uint64, seen time.Time)
	partitions        Partitions
	// sessionClient is the client of the running group session (nil between
	// sessions): GroupMember reads the membership from it.
	sessionClient atomic.Pointer[kgo.Client]
}

// New builds the matcher and registers its readiness check and metrics; it
// does no network I/O.
func New(cfg Config, deps Deps) (*Consumer, error) {
	if deps.Logger == nil || deps.Registerer == nil || deps.Health == nil {
		return nil, errors.New("matcher: Deps.Logger, Deps.Registerer and Deps.Health are required")
	}
	logger := deps.Logger.With("component", "matcher")
	reg := deps.Registerer
	table := watchlist.New(watchlist.Deps{Logger: logger, Registerer: reg})
	reader := kafkautil.NewTableReader(deps.Kafka, deps.Kafka.Topic(topics.AddressWatch), table.ApplyRecord, logger)
	streams := stream.New(cfg.RetractionWindow, logger)
	streamReader := kafkautil.NewTableReader(deps.Kafka, deps.Kafka.Topic(topics.WebhookStreams), streams.ApplyRecord, logger)
	pools := map[uint64]*rpc.Pool{}
	natives := map[uint64]*chains.Token{}
	if deps.Chains != nil {
		for _, ch := range deps.Chains.Chains {
			pc := rpc.ForChain(ch)
			pc.Logger = logger
			pool, err := rpc.NewPool(pc, rpc.NewMetrics(reg))
			if err != nil {
				return nil, err
			}
			pools[ch.ID()] = pool
			tok := ch.NativeToken
			natives[ch.ID()] = &tok
		}
	}
	tokens := tokenmeta.NewWithPools(tokenmeta.Config{CacheSize: cfg.TokenCacheSize, CallTimeout: cfg.EthCallTimeout}, pools,
		tokenmeta.Deps{Logger: logger, Registerer: reg})
	deps.Health.Add("watchlist", reader.ReadyCheck)
	deps.Health.Add("webhook-streams", streamReader.ReadyCheck)
	m := newMetrics(reg, reader, streams)
	for id := range natives {
		// Every configured chain's series from start-up: a rate over a
		// series created by its first increment misses that increment.
		m.emitted.WithLabelValues(strconv.FormatUint(id, 10))
		m.retractions.WithLabelValues(strconv.FormatUint(id, 10))
	}
	return &Consumer{
		cfg: cfg, kafka: deps.Kafka, logger: logger, table: table, reader: reader, match: match.New(table), tokens: tokens, natives: natives,
		streams: streams, streamReader: streamReader, streamTopic: deps.Kafka.Topic(topics.WebhookStreams),
		m: m, activity: deps.Kafka.Topic(topics.Activity), blocks: deps.Kafka.Topic(topics.Blocks),
		now: time.Now, decompressor: deps.Decompressor, beforeEnd: deps.BeforeEnd, partitions: deps.Partitions,
		activityCommitted: deps.ActivityCommitted,
	}, nil
}

// Streams is the webhook-stream state (shared with the replays).
func (m *Consumer) Streams() *stream.State { return m.streams }

// GroupMember is the matcher's membership in its consumer group now; ok is
// false between sessions or before the session joined. A replay's
// transaction commits only with it (package replay): the group's
// coordinator accepts it only while the generation in which this instance
// owns the chain's partition lasts.
func (m *Consumer) GroupMember() (member kafkautil.GroupMember, ok bool) {
	cl := m.sessionClient.Load()
	if cl == nil {
		return kafkautil.GroupMember{}, false
	}
	id, gen := cl.GroupMetadata()
	if id == "" || gen < 0 {
		return kafkautil.GroupMember{}, false
	}
	return kafkautil.GroupMember{Group: m.group(), MemberID: id, InstanceID: m.txnID(), Generation: gen}, true
}

// CatchUpStreams reads the webhook-stream topic up to its current end into
// the state: a replay calls it before it numbers, as every batch does.
func (m *Consumer) CatchUpStreams(ctx context.Context) error { return m.streamReader.CatchUp(ctx) }

// Native is a chain's native token (nil when the chains file has none).
func (m *Consumer) Native(chain uint64) *chains.Token { return m.natives[chain] }

// Tokens resolves token metadata for payloads, with the matcher's cache.
func (m *Consumer) Tokens() *tokenmeta.Resolver { return m.tokens }

// Webhook is a webhook's settings in the watch table (nil: unknown).
func (m *Consumer) Webhook(id string) *watchlist.Webhook { return m.table.Webhook(id) }

// Run reads the watch table and, once it caught up, matches blocks until
// ctx ends. A failed transactional session (Kafka unreachable, fenced) is
// rebuilt with backoff; what it had not committed is reprocessed.
func (m *Consumer) Run(ctx context.Context) error {
	// Both tables are read from the start and then tailed for as long as
	// the matcher runs; it matches nothing before both caught up.
	rctx, stopReaders := context.WithCancel(ctx)
	defer stopReaders()
	var readers sync.WaitGroup
	defer func() { stopReaders(); readers.Wait() }()
	failed := make(chan error, 2)
	for name, r := range map[string]tableReader{"watch table": m.reader, "webhook-stream state": m.streamReader} {
		readers.Go(func() {
			// A reader fails only before it applied any record (no broker,
			// no end offsets).
			if err := r.Run(rctx); err != nil && rctx.Err() == nil {
				failed <- fmt.Errorf("matcher: %s reader: %w", name, err)
			}
		})
	}
	ready := make(chan error, 1)
	go func() {
		err := m.reader.WaitReady(rctx)
		if err == nil {
			err = m.streamReader.WaitReady(rctx)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			return nil // ctx ended
		}
	case err := <-failed:
		stopReaders()
		<-ready
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	m.logger.Info("watch table ready", "webhooks", m.table.Webhooks(), "addresses", m.table.Addresses())
	rebuild := obs.Retry{Initial: 200 * time.Millisecond, Max: 10 * time.Second, Log: m.logger, Msg: "matcher session failed; starting a new one"}
	_ = rebuild.Do(ctx, func() error {
		if err := m.session(ctx); err != nil || ctx.Err() != nil {
			return err
		}
		return errors.New("matcher: session ended") // its client closed: start a new one
	})
	return nil
}

// txnID and group are the configured transactional id and group behind
// --kafka.topic-prefix: deployments (and tests) sharing a broker and a host
// must not fence each other's producers or share a group.
func (m *Consumer) txnID() string { return m.kafka.TopicPrefix + m.cfg.TransactionalID }

func (m *Consumer) group() string { return m.kafka.TopicPrefix + m.cfg.Group }

func (m *Consumer) sessionOpts() []kgo.Opt {
	mc := m.cfg
	reset := kgo.NewOffset().AtStart()
	if mc.StartOffset == "end" {
		reset = kgo.NewOffset().AtEnd()
	}
	opts := append(m.kafka.ProducerOpts(m.logger, "moraine-matcher"),
		// No linger: a batch's records are flushed at the end of its
		// transaction anyway, and every millisecond here is webhook latency.
		kgo.ProducerLinger(0),
		kgo.TransactionalID(m.txnID()),
		kgo.TransactionTimeout(mc.TransactionTimeout),
		kgo.ConsumerGroup(m.group()),
		kgo.ConsumeTopics(m.blocks),
		// Static membership: a restarted instance (same id) takes its
		// partitions back at once instead of waiting for its old member's
		// session to expire, and fences the old member.
		kgo.InstanceID(m.txnID()),
		kgo.SessionTimeout(mc.SessionTimeout),
		kgo.HeartbeatInterval(time.Second),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// KIP-447 needs no option: franz-go's group consumers always require
		// stable offsets, so a member does not read offsets a pending
		// transaction may still commit, and a rebalance never resumes behind
		// a batch in flight.
		kgo.FetchMaxBytes(64<<20),
		kgo.FetchMaxPartitionBytes(32<<20),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.ConsumeResetOffset(reset),
	)
	if m.decompressor != nil {
		opts = append(opts, kgo.WithDecompressor(m.decompressor))
	}
	if p := m.partitions; p != nil {
		blocks := m.blocks
		ofBlocks := func(ps map[string][]int32) []int32 { return ps[blocks] }
		opts = append(opts,
			kgo.OnPartitionsAssigned(func(ctx context.Context, _ *kgo.Client, ps map[string][]int32) {
				if len(ofBlocks(ps)) > 0 {
					m.logger.Info("blocks partitions assigned", "partitions", ofBlocks(ps))
					p.Assigned(ctx, ofBlocks(ps))
				}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
				if len(ofBlocks(ps)) > 0 {
					m.logger.Info("blocks partitions revoked", "partitions", ofBlocks(ps))
					p.Revoked(ofBlocks(ps))
				}
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
				if len(ofBlocks(ps)) > 0 {
					m.logger.Info("blocks partitions lost", "partitions", ofBlocks(ps))
					p.Revoked(ofBlocks(ps))
				}
			}),
		)
	}
	return opts
}

// session runs one GroupTransactSession until ctx ends (nil) or it fails.
func (m *Consumer) session(ctx context.Context) error {
	sess, err := kgo.NewGroupTransactSession(m.sessionOpts()...)
	if err != nil {
		return fmt.Errorf("matcher: new session: %w", err)
	}
	defer sess.Close()
	m.sessionClient.Store(sess.Client())
	// Cleared before Close revokes the partitions: a replay that reads no
	// membership does not commit.
	defer m.sessionClient.Store(nil)
	// Initialize the producer id now rather than at the first produce: that
	// fences a previous incarnation under the same transactional id and
	// aborts the transaction it left open, which the group's offset fetch
	// (RequireStable) would otherwise wait out for the whole transaction
	// timeout.
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, _, err = sess.Client().ProducerID(ictx)
	cancel()
	if err != nil {
		return fmt.Errorf("matcher: init producer id: %w", err)
	}
	m.logger.Info("matcher consuming", "topic", m.blocks, "group", m.group(), "transactional_id", m.txnID())
	var txn *openTxn
	// A transaction still open is finished even when shutdown begins, so it
	// ends cleanly instead of timing out.
	defer func() {
		if txn != nil {
			_ = m.end(ctx, sess, txn)
		}
	}()
	for {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if txn != nil {
			// Wake up to commit the open transaction in time.
			pctx, cancel = context.WithDeadline(ctx, txn.started.Add(m.cfg.IdleCommitInterval))
		}
		fetches := sess.PollRecords(pctx, m.cfg.MaxPollRecords)
		cancel()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil
		}
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				m.logger.Warn("fetch error, retrying", "topic", t, "partition", p, "err", err)
			}
		})
		if records := fetches.Records(); len(records) > 0 {
			if txn == nil {
				if err := sess.Begin(); err != nil {
					return fmt.Errorf("matcher: begin transaction: %w", err)
				}
				txn = &openTxn{started: time.Now(), counts: newBatchCounts(), stream: m.streams.Begin(m.now().UnixMilli())}
			}
			m.batch(ctx, sess, txn, records)
		}
		if txn != nil && (txn.produced > 0 || txn.produceErr != nil || time.Since(txn.started) >= m.cfg.IdleCommitInterval) {
			err := m.end(ctx, sess, txn)
			txn = nil
			if err != nil {
				return err
			}
		}
	}
}

// openTxn is the transaction the batches polled since it began belong to.
// Its offsets go to Kafka only when it ends: until a batch produces
// activity, nothing at all is sent for it, so batches that match nothing
// (blocks of chains nobody watches, during a backfill: one batch per
// produce of ingest) share one transaction instead of costing the broker
// an offset commit, two transaction-log writes and a marker each. A batch
// that produced activity ends it at once: its messages become visible to
// delivery only then.
type openTxn struct {
	started    time.Time
	records    int
	produced   int
	produceErr error
	counts     batchCounts
	// stream holds the transaction's changes to the webhook streams,
	// applied to the state only if it commits.
	stream *stream.Batch
}

// batch matches records and produces their activity into txn.
func (m *Consumer) batch(ctx context.Context, sess *kgo.GroupTransactSession, txn *openTxn, records []*kgo.Record) {
	defer func(start time.Time) { m.m.stage.WithLabelValues("total").Observe(time.Since(start).Seconds()) }(time.Now())
	// A batch already polled is finished even when shutdown begins.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.TransactionTimeout+m.cfg.ShutdownTimeout)
	defer cancel()
	out, counts, err := m.prepare(bctx, records, txn.stream)
	txn.records += len(records)
	txn.counts.merge(counts)
	if err != nil {
		// The batch cannot be numbered right: abort the transaction, so
		// its records are read again.
		m.logger.Warn("matcher batch failed; aborting the transaction", "err", err)
		txn.produceErr = err
		return
	}
	if len(out) == 0 {
		return
	}
	promise := kgo.AbortingFirstErrPromise(sess.Client())
	for _, r := range out {
		sess.Produce(bctx, r, promise.Promise())
	}
	if err := promise.Err(); err != nil {
		m.logger.Warn("producing activity failed; aborting the transaction", "err", err)
		txn.produceErr = err
	}
	txn.produced += len(out)
}

// end commits txn, or aborts it after a failed produce or a rebalance.
func (m *Consumer) end(ctx context.Context, sess *kgo.GroupTransactSession, txn *openTxn) error {
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.TransactionTimeout+m.cfg.ShutdownTimeout)
	defer cancel()
	tStart := time.Now()
	tryCommit := txn.produceErr == nil
	if m.beforeEnd != nil && m.beforeEnd() {
		tryCommit = false
	}
	// Numbered from a state that may lack a transaction whose end was in
	// doubt when the batch took the numbering lock: its numbers may repeat
	// that transaction's, so it is read and numbered again once settled.
	doubted := txn.stream.Doubted()
	if doubted {
		tryCommit = false
	}
	committed, err := sess.End(ectx, kgo.TransactionEndTry(tryCommit))
	m.m.stage.WithLabelValues("transaction").Observe(time.Since(tStart).Seconds())
	if err != nil {
		// Committed or not, nobody knows until the transaction is settled
		// (the next session's producer initialization does it, or its
		// timeout).
		m.streams.AbortInDoubt(txn.stream)
		return fmt.Errorf("matcher: end transaction: %w", err)
	}
	if !committed {
		// A rebalance, a produce failure or a doubted batch: nothing of the
		// transaction is visible and the session rewound to the committed
		// offsets, so its batches are read and matched again.
		if doubted {
			m.settle(ectx, txn.stream)
		}
		m.streams.Abort(txn.stream)
		m.m.transactions.WithLabelValues("aborted").Inc()
		m.logger.Info("matcher transaction aborted; its batches will be reprocessed", "records", txn.records, "state_in_doubt", doubted)
		return nil
	}
	m.m.transactions.WithLabelValues("committed").Inc()
	m.streams.Commit(txn.stream)
	txn.counts.add(m.m)
	for _, b := range txn.counts.blocks {
		m.activityCommitted(b.timestamp, b.seen)
	}
	m.logger.Debug("matcher transaction committed", "records", txn.records, "activities", txn.produced, "open_for", time.Since(txn.started))
	return nil
}

// settle catches the webhook-stream state up while sb holds the numbering
// lock, so that the state holds how the transaction in doubt ended; if the
// catch-up fails, the next batch finds the state still in doubt.
func (m *Consumer) settle(ctx context.Context, sb *stream.Batch) {
	sctx, cancel := context.WithTimeout(ctx, m.cfg.StreamCatchUpTimeout)
	defer cancel()
	if err := m.streamReader.CatchUp(sctx); err != nil {
		m.m.streamSlow.Inc()
		m.logger.Warn("webhook-stream state not settled; the next batch tries again", "err", err)
		return
	}
	m.streams.Settled(sb)
}

// batchCounts are a batch's record kinds and activity per chain. They reach
// the counters only once the batch's transaction commits: an aborted batch
// is read again, and counting it twice would make the counters disagree
// with what consumers of the activity topic see.
type batchCounts struct {
	records     map[string]int // block|reorg|unwatched|undecodable
	perChain    map[uint64]int // activity messages (retractions included)
	retractions map[uint64]int
	// blocks are the blocks with activity, collected only for
	// Deps.ActivityCommitted.
	blocks []blockWithActivity
}

type blockWithActivity struct {
	timestamp uint64
	seen      time.Time
}

func newBatchCounts() batchCounts {
	return batchCounts{records: map[string]int{}, perChain: map[uint64]int{}, retractions: map[uint64]int{}}
}

func (c *batchCounts) merge(o batchCounts) {
	c.blocks = append(c.blocks, o.blocks...)
	for kind, n := range o.records {
		c.records[kind] += n
	}
	for chain, n := range o.perChain {
		c.perChain[chain] += n
	}
	for chain, n := range o.retractions {
		c.retractions[chain] += n
	}
}

func (c batchCounts) add(m *metrics) {
	for kind, n := range c.records {
		m.records.WithLabelValues(kind).Add(float64(n))
	}
	for chain, n := range c.perChain {
		m.emitted.WithLabelValues(strconv.FormatUint(chain, 10)).Add(float64(n))
	}
	for chain, n := range c.retractions {
		m.retractions.WithLabelValues(strconv.FormatUint(chain, 10)).Add(float64(n))
	}
}

// prepare catches the watch table and the webhook-stream state up, then
// matches records and builds their activity and stream records into sb.
func (m *Consumer) prepare(ctx context.Context, records []*kgo.Record, sb *stream.Batch) ([]*kgo.Record, batchCounts, error) {
	start := time.Now()
	// Both tables are caught up at once: each costs a round trip to the
	// brokers (their end offsets), and every millisecond here is webhook
	// latency.
	//
	// The stream state must include every committed transaction, the
	// previous owner's of a partition included, or numbers would repeat.
	// While a transaction's end is in doubt, the batch takes the numbering
	// lock first, so that nobody numbers between the catch-up and it.
	settling := m.streams.InDoubt()
	if settling {
		sb.Hold()
	}
	streamErr := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, m.cfg.StreamCatchUpTimeout)
		defer cancel()
		streamErr <- m.streamReader.CatchUp(sctx)
	}()
	// Address changes acknowledged before this moment must be matched:
	// wait (briefly) until the table has applied everything the topic holds.
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CatchUpTimeout)
	if err := m.reader.CatchUp(cctx); err != nil {
		m.m.catchUpSlow.Inc()
		m.logger.Warn("watch table catch-up incomplete; matching with the table as it is", "err", err)
	}
	cancel()
	err := <-streamErr
	m.m.stage.WithLabelValues("catchup").Observe(time.Since(start).Seconds())
	if err != nil {
		m.m.streamSlow.Inc()
		return nil, newBatchCounts(), fmt.Errorf("matcher: webhook-stream state not read up to date: %w", err)
	}
	if settling {
		m.streams.Settled(sb)
	}
	return m.build(ctx, records, sb)
}

// matched is one match with its block, before its payload is built.
type matched struct {
	block *record.Block
	match match.Match
}

// event is one decoded blocks-topic record of a batch: a block with the
// range of its matches in the batch's list, or a reorg marker.
type event struct {
	offset       int64
	block        *record.Block
	reorg        *record.Reorg
	first, count int
}

// build decodes the records, matches their blocks, builds the activity
// messages and hands them, in blocks-topic order, to the webhook streams
// (sb), which number them, hold them for confirmations or add retractions.
// It returns the records to produce, with their counts.
func (m *Consumer) build(ctx context.Context, records []*kgo.Record, sb *stream.Batch) ([]*kgo.Record, batchCounts, error) {
	mStart := time.Now()
	counts := newBatchCounts()
	var all []matched
	var events []event
	var ms []match.Match
	skip := map[string]bool{} // by record key (the chain id), decided once a batch
	for _, r := range records {
		skipped, known := skip[string(r.Key)]
		if !known {
			chain, err := strconv.ParseUint(string(r.Key), 10, 64)
			skipped = err == nil && !m.table.Watches(chain) && !m.streams.HasChain(chain)
			skip[string(r.Key)] = skipped
		}
		if skipped {
			// The key is the chain id: a chain nobody watches (and with
			// nothing left to release or retract) has nothing to match, so
			// its blocks are not even decoded.
			counts.records["unwatched"]++
			continue
		}
		ev, err := codec.DecodeChainEvent(r.Value)
		if err != nil {
			// The sink counts and logs it too; a record nobody can read must
			// not stall the partition.
			counts.records["undecodable"]++
			m.logger.Error("skipping undecodable block record", "partition", r.Partition, "offset", r.Offset, "err", err)
			continue
		}
		switch e := ev.GetEvent().(type) {
		case *record.ChainEvent_Block:
			counts.records["block"]++
			ms = m.match.Block(e.Block, ms[:0])
			events = append(events, event{offset: r.Offset, block: e.Block, first: len(all), count: len(ms)})
			if len(ms) > 0 && m.activityCommitted != nil {
				counts.blocks = append(counts.blocks, blockWithActivity{timestamp: e.Block.Timestamp, seen: r.Timestamp})
			}
			for _, x := range ms {
				all = append(all, matched{block: e.Block, match: x})
			}
		case *record.ChainEvent_Reorg:
			// Messages already delivered for the orphaned blocks are
			// retracted, those waiting for confirmations dropped (package
			// stream); the replacing blocks follow and are matched like any
			// other.
			counts.records["reorg"]++
			events = append(events, event{offset: r.Offset, reorg: e.Reorg})
			m.logger.Info("reorg", "chain_id", e.Reorg.GetChainId(),
				"fork_number", e.Reorg.GetForkNumber(), "orphaned", len(e.Reorg.GetOrphaned()))
		}
	}
	m.m.stage.WithLabelValues("match").Observe(time.Since(mStart).Seconds())
	if len(events) == 0 {
		return nil, counts, nil
	}

	tStart := time.Now()
	wanted := map[uint64][]evm.Address{}
	for _, x := range all {
		tx := x.block.GetTransactions()[x.match.Tx]
		wanted[x.block.GetChainId()] = payload.TokenAddresses(tx, wanted[x.block.GetChainId()])
	}
	tokens := map[uint64]map[evm.Address]*tokenmeta.Token{}
	for chain, addrs := range wanted {
		if len(addrs) > 0 {
			tokens[chain] = m.tokens.Resolve(ctx, chain, addrs)
		}
	}
	m.m.stage.WithLabelValues("tokens").Observe(time.Since(tStart).Seconds())

	pStart := time.Now()
	acts := make([]*record.Activity, len(all))
	now := m.now().UnixMilli()
	for i, x := range all {
		b, w := x.block, x.match.Webhook
		tx := b.GetTransactions()[x.match.Tx]
		body, id, err := payload.Build(payload.Input{Webhook: w, Block: b, Tx: tx, Native: m.natives[b.GetChainId()], Tokens: tokens[b.GetChainId()]})
		if err != nil {
			m.m.payloadErrs.Inc()
			m.logger.Error("skipping a match whose message cannot be built", "webhook_id", w.ID, "chain_id", b.GetChainId(),
				"block", b.GetNumber(), "tx_hash", evm.HexBytes(tx.GetHash()), "err", err)
			continue
		}
		acts[i] = &record.Activity{
			WebhookId: w.ID, MessageId: id, AccountId: w.AccountID, ChainId: b.GetChainId(),
			BlockNumber: b.GetNumber(), BlockHash: b.GetHash(), TxHash: tx.GetHash(), Payload: body,
			BlockFetchedAtUnixMs: b.GetFetchedAtUnixMs(), MatchedAtUnixMs: now,
			IncludeLogs: w.IncludeLogs, IncludeInternalTxs: w.IncludeInternalTxs, ReceiptsRoot: b.GetReceiptsRoot(),
		}
	}
	confirmations := func(id string) uint32 {
		if w := m.table.Webhook(id); w != nil {
			return w.Confirmations
		}
		return 0
	}
	before := len(sb.Out())
	for _, e := range events {
		if e.reorg != nil {
			if err := sb.Reorg(uint64(e.offset), e.reorg); err != nil {
				return nil, counts, err
			}
			continue
		}
		b := e.block
		var msgs []*record.Activity
		for _, a := range acts[e.first : e.first+e.count] {
			if a != nil {
				msgs = append(msgs, a)
			}
		}
		sb.Block(uint64(e.offset), b.GetChainId(), b.GetNumber(), b.GetHash(), msgs, confirmations)
	}
	for _, a := range sb.Out()[before:] {
		counts.perChain[a.GetChainId()]++
		if a.GetKind() == record.ActivityKind_ACTIVITY_KIND_RETRACTION {
			counts.retractions[a.GetChainId()]++
		}
	}
	out, err := sb.Records(m.activity, m.streamTopic)
	m.m.stage.WithLabelValues("payload").Observe(time.Since(pStart).Seconds())
	return out, counts, err
}
