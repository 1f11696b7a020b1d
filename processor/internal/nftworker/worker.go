package nftworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/guard"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/rpc"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/processor/internal/nftfetch"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Deps are the worker's dependencies.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Kafka      kafkautil.Config
	ClickHouse chclient.Config
	// Chains are the configured chains: their nodes answer the token URI
	// calls (nil: no chain has a node, every request waits for one).
	Chains *chains.Config
	// Health gets the "nft_metadata" readiness check once connected.
	Health *obs.Health
	// Resolver, when set, replaces the system's resolver for the SSRF
	// policy's checks of host names (tests).
	Resolver guard.Resolver
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Worker is the metadata worker: a consumer group on the request topic
// and its retry levels.
type Worker struct {
	cfg     Config
	d       Deps
	logger  *slog.Logger
	m       *metrics
	fetcher *nftfetch.Fetcher
	nodes   *tokenmeta.Resolver
	store   *nftmeta.Store
	clock   *versionClock

	requests string
	levels   map[string]int // retry topic -> level
	retries  []string       // [l-1] is level l

	mu     sync.Mutex
	paused map[topicPartition]time.Time // retry partitions waiting for their head's due time
}

type topicPartition struct {
	topic     string
	partition int32
}

// New validates and allocates; it does no network I/O.
func New(cfg Config, d Deps) (*Worker, error) {
	if d.Logger == nil || d.Registerer == nil || d.Health == nil {
		return nil, errors.New("nftworker: Deps.Logger, Deps.Registerer and Deps.Health are required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	fetcher, err := nftfetch.New(cfg.Fetch, d.Resolver)
	if err != nil {
		return nil, err
	}
	logger := d.Logger.With("component", "nftworker")
	pools := map[uint64]*rpc.Pool{}
	if d.Chains != nil {
		for _, ch := range d.Chains.Chains {
			pc := rpc.ForChain(ch)
			pc.Logger = logger
			pool, err := rpc.NewPool(pc, rpc.NewMetrics(d.Registerer))
			if err != nil {
				return nil, err
			}
			pools[ch.ID()] = pool
		}
	}
	w := &Worker{cfg: cfg, d: d, logger: logger, m: newMetrics(d.Registerer), fetcher: fetcher,
		// The worker's own resolver over the chains' nodes, for its batches
		// of URI calls (which it does not cache, nor count among the
		// matcher's lookups: no registry for those).
		nodes: tokenmeta.NewWithPools(tokenmeta.Config{CallTimeout: cfg.RPCTimeout}, pools, tokenmeta.Deps{Logger: logger}),
		store: nftmeta.NewStore(30 * time.Second), clock: &versionClock{now: d.Now},
		requests: d.Kafka.Topic(topics.NftMetadata), levels: map[string]int{}, paused: map[topicPartition]time.Time{}}
	for l := 1; l <= topics.NftMetadataRetryLevels; l++ {
		t := d.Kafka.Topic(topics.NftMetadataRetry(l))
		w.levels[t] = l
		w.retries = append(w.retries, t)
	}
	return w, nil
}

// Group is the consumer group, prefixed.
func (w *Worker) Group() string { return w.d.Kafka.TopicPrefix + w.cfg.Group }

// Run connects to ClickHouse (with backoff) and Kafka and fetches until ctx
// ends. A failed client is rebuilt with backoff; what it had not committed
// is read again.
func (w *Worker) Run(ctx context.Context) error {
	conn, err := chclient.Open(ctx, w.d.ClickHouse, w.logger)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer conn.Close()
	defer w.fetcher.Close()
	w.store.SetConn(conn)
	again := obs.Retry{Initial: 200 * time.Millisecond, Max: 10 * time.Second, Log: w.logger, Msg: "nft metadata worker failed; restarting it"}
	_ = again.Do(ctx, func() error {
		if err := w.session(ctx); err != nil || ctx.Err() != nil {
			return err
		}
		return errors.New("nftworker: session ended")
	})
	return nil
}

func (w *Worker) session(ctx context.Context) error {
	k := w.d.Kafka
	opts := append(k.ConsumerOpts(w.logger, "moraine-nft-metadata", w.Group(), append([]string{w.requests}, w.retries...)...),
		kgo.SessionTimeout(w.cfg.SessionTimeout),
		kgo.HeartbeatInterval(min(time.Second, w.cfg.SessionTimeout/5)),
		kgo.OnPartitionsRevoked(w.forget),
		kgo.OnPartitionsLost(w.forget),
		// Retry records: small, acks=all, idempotent.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	cl, err := kafkautil.NewClient(ctx, w.logger, opts...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		cl.LeaveGroupContext(closeCtx)
		cl.Close()
	}()
	w.d.Health.Add("nft_metadata", kafkautil.Ping(cl))
	w.logger.Info("nft metadata worker consuming", "topic", w.requests, "group", w.Group())
	for {
		pctx, cancel := w.pollContext(ctx, cl)
		fetches := cl.PollRecords(pctx, w.cfg.MaxPollRecords)
		cancel()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			cl.AllowRebalance()
			return nil
		}
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				w.logger.Warn("fetch error, retrying", "topic", t, "partition", p, "err", err)
			}
		})
		if ready := w.ready(cl, fetches.Records()); len(ready) > 0 {
			if err := w.batch(ctx, cl, ready); err != nil {
				cl.AllowRebalance()
				return err
			}
		}
		cl.AllowRebalance()
	}
}

// pollContext resumes the retry partitions whose head is due and bounds
// the poll by the next one that will be.
func (w *Worker) pollContext(ctx context.Context, cl *kgo.Client) (context.Context, context.CancelFunc) {
	now := w.d.Now()
	w.mu.Lock()
	resume := map[string][]int32{}
	var next time.Time
	for tp, at := range w.paused {
		if !now.Before(at) {
			resume[tp.topic] = append(resume[tp.topic], tp.partition)
			delete(w.paused, tp)
		} else if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	w.mu.Unlock()
	if len(resume) > 0 {
		cl.ResumeFetchPartitions(resume)
	}
	if next.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, next)
}

// ready returns the records to process now: every request, and the
// records of each retry partition up to the first that is not due yet.
// That partition is rewound to it and paused until it is due: a retry
// level's records all wait the same delay, so those behind it are due
// later still.
func (w *Worker) ready(cl *kgo.Client, records []*kgo.Record) []*kgo.Record {
	now := w.d.Now().UnixMilli()
	var out []*kgo.Record
	stopped := map[topicPartition]bool{}
	rewind := map[string]map[int32]kgo.EpochOffset{}
	pause := map[string][]int32{}
	for _, r := range records {
		tp := topicPartition{r.Topic, r.Partition}
		if stopped[tp] {
			continue
		}
		if _, isRetry := w.levels[r.Topic]; isRetry {
			req, err := codec.DecodeNftMetadataRequest(r.Value)
			if err == nil && req.DueUnixMs > now {
				stopped[tp] = true
				if rewind[r.Topic] == nil {
					rewind[r.Topic] = map[int32]kgo.EpochOffset{}
				}
				rewind[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset}
				pause[r.Topic] = append(pause[r.Topic], r.Partition)
				w.mu.Lock()
				w.paused[tp] = time.UnixMilli(req.DueUnixMs)
				w.mu.Unlock()
				continue
			}
		}
		out = append(out, r)
	}
	if len(pause) > 0 {
		cl.PauseFetchPartitions(pause)
		cl.SetOffsets(rewind)
	}
	return out
}

// forget drops the pause bookkeeping of partitions this instance lost, and
// resumes them, so that it fetches them normally should they come back.
func (w *Worker) forget(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	w.mu.Lock()
	for t, ps := range lost {
		for _, p := range ps {
			delete(w.paused, topicPartition{t, p})
		}
	}
	w.mu.Unlock()
	cl.ResumeFetchPartitions(lost)
}

// batch processes records and commits them. A batch already polled is
// finished even when shutdown begins (within the shutdown timeout).
func (w *Worker) batch(ctx context.Context, cl *kgo.Client, records []*kgo.Record) error {
	start := time.Now()
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.RPCTimeout+2*w.cfg.Fetch.Timeout+w.cfg.Fetch.HostQueueTimeout+w.cfg.ShutdownTimeout+time.Minute)
	defer cancel()
	reqs := w.decode(records)
	rows, err := w.rows(bctx, reqs)
	if err != nil {
		return err
	}
	var todo []request
	for _, r := range reqs {
		row, ok := rows[r.ref]
		var prev *nftmeta.Row
		if ok {
			prev = &row
		}
		if due(r, prev) {
			todo = append(todo, r)
		} else {
			w.m.requests.WithLabelValues("skipped").Inc()
		}
	}
	w.m.stage.WithLabelValues("state").Observe(time.Since(start).Seconds())
	outcomes := w.process(bctx, todo, rows)
	// Retries first: once a row says a retry is pending, the retry must
	// exist (a crash in between repeats the attempt instead).
	var next []*kgo.Record
	var stored []nftmeta.Row
	for _, o := range outcomes {
		if o.next != nil {
			rec, err := w.retryRecord(o)
			if err != nil {
				return err
			}
			next = append(next, rec)
			w.m.retries.WithLabelValues(o.result).Inc()
		}
		if o.row != nil {
			o.row.Version = w.clock.next()
			stored = append(stored, *o.row)
		}
		w.m.results.WithLabelValues(o.result).Inc()
	}
	if len(next) > 0 {
		if err := cl.ProduceSync(bctx, next...).FirstErr(); err != nil {
			return fmt.Errorf("nftworker: produce retries: %w", err)
		}
	}
	insert := obs.Retry{Initial: 200 * time.Millisecond, Max: 10 * time.Second, Log: w.logger, Msg: "clickhouse insert of nft metadata failed, retrying"}
	if err := insert.Do(bctx, func() error { return w.store.Insert(bctx, stored) }); err != nil {
		return fmt.Errorf("nftworker: store metadata: %w", err)
	}
	if err := cl.CommitRecords(bctx, records...); err != nil {
		// Not fatal: a redelivered request is skipped (or repeats an attempt).
		w.logger.Warn("offset commit failed; requests may be read again", "err", err)
	}
	w.m.stage.WithLabelValues("total").Observe(time.Since(start).Seconds())
	return nil
}

// decode reads the requests of records, one per NFT: of several requests
// for one NFT in a batch the first is processed (the others would be
// judged against what it stores: skipped, unless they are reindexes, which
// the next batch sees).
func (w *Worker) decode(records []*kgo.Record) []request {
	var out []request
	seen := map[nftmeta.Ref]bool{}
	for _, r := range records {
		req, err := codec.DecodeNftMetadataRequest(r.Value)
		if err != nil {
			w.logger.Error("skipping undecodable metadata request", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
			w.m.requests.WithLabelValues("undecodable").Inc()
			continue
		}
		if req.Attempt == 0 {
			req.Attempt = 1
		}
		var ref nftmeta.Ref
		ref.ChainID = req.ChainId
		copy(ref.Contract[:], req.Contract)
		id, _ := new(big.Int).SetString(req.TokenId, 10)
		ref.TokenID = id.String()
		if seen[ref] {
			w.m.requests.WithLabelValues("skipped").Inc()
			continue
		}
		seen[ref] = true
		out = append(out, request{NftMetadataRequest: req, ref: ref, id: id})
	}
	return out
}

// rows reads the stored rows of reqs' NFTs, retrying while ClickHouse is
// unavailable: a request is never judged without them.
func (w *Worker) rows(ctx context.Context, reqs []request) (map[nftmeta.Ref]nftmeta.Row, error) {
	refs := make([]nftmeta.Ref, len(reqs))
	for i, r := range reqs {
		refs[i] = r.ref
	}
	var rows map[nftmeta.Ref]nftmeta.Row
	read := obs.Retry{Initial: 200 * time.Millisecond, Max: 10 * time.Second, Log: w.logger, Msg: "clickhouse read of nft metadata failed, retrying"}
	err := read.Do(ctx, func() (err error) {
		rows, err = w.store.Rows(ctx, refs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nftworker: read metadata: %w", err)
	}
	return rows, nil
}

// process reads the URIs of todo from the nodes, fetches the documents
// concurrently (the fetcher bounds them per host and in all) and returns
// each request's outcome.
func (w *Worker) process(ctx context.Context, todo []request, rows map[nftmeta.Ref]nftmeta.Row) []outcome {
	start := time.Now()
	byChain := map[uint64][]int{}
	for i, r := range todo {
		byChain[r.ChainId] = append(byChain[r.ChainId], i)
	}
	uris := make([]tokenmeta.URIResult, len(todo))
	heads := make([]uint64, len(todo))
	maxLen := w.cfg.Fetch.MaxBytes/3*4 + 4096 // a base64 data: URI of a document at the limit
	for chain, idx := range byChain {
		qs := make([]tokenmeta.URIRequest, len(idx))
		for k, i := range idx {
			standard := uint16(todo[i].Standard)
			if standard == 0 {
				if row, ok := rows[todo[i].ref]; ok {
					standard = row.Standard
				}
			}
			qs[k] = tokenmeta.URIRequest{Contract: todo[i].ref.Contract, TokenID: todo[i].id, Standard: standard}
		}
		head, res, err := w.nodes.TokenURIs(ctx, chain, qs, maxLen)
		for k, i := range idx {
			if err != nil {
				uris[i] = tokenmeta.URIResult{Outcome: tokenmeta.URIUnavailable, Detail: err.Error()}
				continue
			}
			uris[i], heads[i] = res[k], head
		}
		if err != nil {
			w.logger.Warn("token URI calls failed; the tokens are retried later", "chain_id", chain, "tokens", len(idx), "err", err)
		}
	}
	w.m.stage.WithLabelValues("node").Observe(time.Since(start).Seconds())
	fetched := make([]*nftfetch.Result, len(todo))
	var wg sync.WaitGroup
	for i, r := range todo {
		if uris[i].Outcome != tokenmeta.URIAnswered {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			res := w.fetcher.Fetch(ctx, uris[i].URI, r.id, uris[i].Standard)
			if !res.Deferred {
				w.m.fetchDuration.WithLabelValues(res.Scheme).Observe(time.Since(t).Seconds())
			}
			fetched[i] = &res
		}()
	}
	wg.Wait()
	w.m.stage.WithLabelValues("fetch").Observe(time.Since(start).Seconds())
	now := w.d.Now()
	out := make([]outcome, len(todo))
	for i, r := range todo {
		var prev *nftmeta.Row
		if row, ok := rows[r.ref]; ok {
			prev = &row
		}
		out[i] = attempt(r, prev, heads[i], uris[i], fetched[i], now, w.cfg.RetrySchedule)
		label := "fetched"
		if out[i].result == "deferred" {
			label = "deferred"
		}
		w.m.requests.WithLabelValues(label).Inc()
		if out[i].row != nil && out[i].row.Error != "" {
			w.logger.Debug("nft metadata not indexed", "chain_id", r.ChainId, "contract", r.ref.Contract.Hex(), "token_id", r.TokenId,
				"status", out[i].row.IndexStatus, "attempt", r.Attempt, "retry", out[i].next != nil, "err", out[i].row.Error)
		}
	}
	return out
}

// retryRecord is the Kafka record of o's next attempt, on its level.
func (w *Worker) retryRecord(o outcome) (*kgo.Record, error) {
	val, err := codec.EncodeNftMetadataRequest(o.next)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: w.retries[o.retryLevel-1], Key: codec.NftMetadataKey(o.next.ChainId, o.next.Contract, o.next.TokenId), Value: val,
		Headers: []kgo.RecordHeader{{Key: codec.SchemaHeader, Value: []byte(codec.NftMetadataRequestSchema)}}}, nil
}

// versionClock hands out row versions: Unix nanoseconds, strictly
// increasing within the process. Instances share no clock; a row is only
// ever written by the instance that owns its NFT's partition at the time.
type versionClock struct {
	mu   sync.Mutex
	last uint64
	now  func() time.Time
}

func (c *versionClock) next() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := uint64(c.now().UnixNano())
	if v <= c.last {
		v = c.last + 1
	}
	c.last = v
	return v
}
