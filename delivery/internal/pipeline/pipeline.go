package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moraine-data/moraine/delivery/internal/sender"
	"github.com/moraine-data/moraine/delivery/internal/settings"
	"github.com/moraine-data/moraine/delivery/internal/sign"
	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Deactivator applies the plans' deactivation rules; *deactivate.Deactivator
// implements it.
type Deactivator interface {
	DoubleFailure(ctx context.Context, wh settings.Webhook, plan, messageID string, attemptedAt time.Time) (retry bool, err error)
	Exhausted(ctx context.Context, wh settings.Webhook, messageID string) error
}

// DeliveryLog records attempts; *dlog.Log implements it.
type DeliveryLog interface {
	Add(accountdb.Delivery)
}

// Deps are the pipeline's collaborators.
type Deps struct {
	Logger      *slog.Logger
	Registerer  prometheus.Registerer
	Kafka       kafkautil.Config
	Table       *settings.Table
	Deactivator Deactivator
	Log         DeliveryLog
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// replayLevel is the level of the replay topic's partitions: their
// messages are retried in place (processReplay), not on the retry levels.
const replayLevel = -1

// Headers of retry records.
const (
	// HeaderAttempt is the attempt to make next (decimal).
	HeaderAttempt = "attempt"
	// HeaderDue is when to make it, Unix ms (decimal).
	HeaderDue = "due-unix-ms"
)

type tp struct {
	topic string
	part  int32
}

// Pipeline consumes activity and the retry levels and delivers.
type Pipeline struct {
	cfg    Config
	d      Deps
	logger *slog.Logger
	enc    sign.Encoding
	sender *sender.Sender
	lim    *limiter
	// replayLim bounds the replayed messages' attempts, apart from lim.
	replayLim *limiter
	m         *metrics

	levels      map[string]int // topic -> level (0: activity, replayLevel: the replay topic)
	retryTopics []string       // [l-1] is level l

	cl atomic.Pointer[kgo.Client]

	mu    sync.Mutex
	parts map[tp]*partition

	warnMu       sync.Mutex
	unsignedWarn map[string]time.Time
}

// New validates and allocates; it does no I/O.
func New(cfg Config, d Deps) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case d.Logger == nil, d.Registerer == nil, d.Table == nil, d.Deactivator == nil, d.Log == nil:
		return nil, errors.New("pipeline: Deps.Logger, Registerer, Table, Deactivator and Log are required")
	}
	if err := d.Kafka.Validate(); err != nil {
		return nil, err
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	enc, _ := sign.ParseEncoding(cfg.KeyEncoding)
	p := &Pipeline{
		cfg: cfg, d: d, logger: d.Logger.With("component", "pipeline"), enc: enc,
		sender:    sender.New(sender.Config{Timeout: cfg.AttemptTimeout, AllowPrivateTargets: cfg.AllowPrivateTargets, MaxIdlePerHost: cfg.MaxPerHost}),
		lim:       newLimiter(cfg.MaxInFlight, cfg.MaxPerHost, cfg.MaxHostQueue, min(time.Second, cfg.AttemptTimeout/2)),
		replayLim: newLimiter(cfg.ReplayMaxInFlight, cfg.ReplayMaxPerHost, math.MaxInt, time.Hour), // replays wait, never deferred
		m:         newMetrics(d.Registerer),
		levels:    map[string]int{d.Kafka.Topic(topics.Activity): 0, d.Kafka.Topic(topics.Replay): replayLevel},
		parts:     map[tp]*partition{}, unsignedWarn: map[string]time.Time{},
	}
	for l := 1; l <= topics.DeliveryRetryLevels; l++ {
		t := d.Kafka.Topic(topics.DeliveryRetry(l))
		p.levels[t] = l
		p.retryTopics = append(p.retryTopics, t)
	}
	return p, nil
}

// Run consumes and delivers until ctx ends, then stops taking records,
// lets attempts in flight finish (at most DrainTimeout), commits what
// finished and leaves the group.
func (p *Pipeline) Run(ctx context.Context) error {
	k := p.d.Kafka
	opts := append(k.ConsumerOpts(p.d.Logger, "moraine-delivery", p.group(),
		append([]string{k.Topic(topics.Activity), k.Topic(topics.Replay)}, p.retryTopics...)...),
		kgo.OnPartitionsAssigned(p.assigned),
		kgo.OnPartitionsRevoked(p.revoked),
		kgo.OnPartitionsLost(p.lost),
		kgo.SessionTimeout(p.cfg.SessionTimeout),
		kgo.HeartbeatInterval(min(time.Second, p.cfg.SessionTimeout/5)),
		// Retry records: small, keyed by webhook id; idempotent, acks=all.
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.ProducerBatchMaxBytes(16<<20),
		kgo.RecordDeliveryTimeout(30*time.Second),
	)
	cl, err := kafkautil.NewClient(ctx, p.logger, opts...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	p.cl.Store(cl)
	defer p.sender.Close()

	commitDone := make(chan struct{})
	cctx, stopCommits := context.WithCancel(context.Background())
	go func() { defer close(commitDone); p.commitLoop(cctx) }()
	lagDone := make(chan struct{})
	go func() { defer close(lagDone); p.lagLoop(ctx) }()

	p.logger.Info("delivering", "group", p.group(), "attempts", p.cfg.Schedule.Attempts(), "schedule", p.cfg.Schedule.String(),
		"key_encoding", p.enc, "allow_private_targets", p.cfg.AllowPrivateTargets)
	for {
		fs := cl.PollRecords(ctx, 4*p.cfg.PartitionWindow)
		if fs.IsClientClosed() || ctx.Err() != nil {
			// A poll blocks rebalances until allowed; leaving the group
			// (Close) is one.
			cl.AllowRebalance()
			break
		}
		fs.EachError(func(t string, part int32, err error) {
			if !errors.Is(err, context.Canceled) {
				p.logger.Warn("fetch failed, retrying", "topic", t, "partition", part, "err", err)
			}
		})
		var pause map[string][]int32
		fs.EachPartition(func(f kgo.FetchTopicPartition) {
			if len(f.Records) == 0 {
				return
			}
			p.mu.Lock()
			w := p.parts[tp{f.Topic, f.Partition}]
			p.mu.Unlock()
			if w == nil {
				return // not ours (any more): the owner reads it
			}
			if w.add(f.Records) {
				if pause == nil {
					pause = map[string][]int32{}
				}
				pause[f.Topic] = append(pause[f.Topic], f.Partition)
			}
		})
		if pause != nil {
			cl.PauseFetchPartitions(pause)
		}
		cl.AllowRebalance()
	}
	<-lagDone
	// Shutdown: finish what is in flight, commit, leave.
	p.mu.Lock()
	all := p.parts
	p.parts = map[tp]*partition{}
	p.mu.Unlock()
	p.stopAll(all, p.cfg.DrainTimeout)
	stopCommits()
	<-commitDone
	p.commit(all)
	cl.Close()
	return nil
}

func (p *Pipeline) resume(topic string, part int32) {
	if cl := p.cl.Load(); cl != nil {
		cl.ResumeFetchPartitions(map[string][]int32{topic: {part}})
	}
}

func (p *Pipeline) assigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for t, parts := range assigned {
		for _, part := range parts {
			key := tp{t, part}
			if _, ok := p.parts[key]; !ok {
				p.parts[key] = newPartition(p, t, part, p.levels[t])
			}
		}
		// A partition paused by an earlier owner session starts fetching.
		cl.ResumeFetchPartitions(map[string][]int32{t: parts})
	}
	p.logger.Info("partitions assigned", "partitions", count(assigned))
}

func (p *Pipeline) take(m map[string][]int32) map[tp]*partition {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[tp]*partition{}
	for t, parts := range m {
		for _, part := range parts {
			key := tp{t, part}
			if w, ok := p.parts[key]; ok {
				out[key] = w
				delete(p.parts, key)
			}
		}
	}
	return out
}

// revoked finishes the revoked partitions' attempts in flight (at most
// DrainTimeout) and commits what finished before the partitions move.
func (p *Pipeline) revoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	ws := p.take(revoked)
	if len(ws) == 0 {
		return
	}
	p.stopAll(ws, p.cfg.DrainTimeout)
	p.commit(ws)
	p.logger.Info("partitions revoked", "partitions", len(ws))
}

// lost drops the partitions at once: another member may own them already,
// so their unfinished records are its to deliver.
func (p *Pipeline) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	ws := p.take(lost)
	p.stopAll(ws, 0)
	if len(ws) > 0 {
		p.logger.Warn("partitions lost", "partitions", len(ws))
	}
}

func (p *Pipeline) stopAll(ws map[tp]*partition, drain time.Duration) {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); w.stop(drain) }()
	}
	wg.Wait()
}

func count(m map[string][]int32) int {
	n := 0
	for _, ps := range m {
		n += len(ps)
	}
	return n
}

// commitLoop commits finished offsets every CommitInterval.
func (p *Pipeline) commitLoop(ctx context.Context) {
	t := time.NewTicker(p.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		ws := make(map[tp]*partition, len(p.parts))
		for k, w := range p.parts {
			ws[k] = w
		}
		p.mu.Unlock()
		p.commit(ws)
	}
}

// commit synchronously commits the finished offsets of ws.
func (p *Pipeline) commit(ws map[tp]*partition) {
	offs := map[string]map[int32]kgo.EpochOffset{}
	for k, w := range ws {
		if eo, ok := w.toCommit(); ok {
			if offs[k.topic] == nil {
				offs[k.topic] = map[int32]kgo.EpochOffset{}
			}
			offs[k.topic][k.part] = eo
		}
	}
	cl := p.cl.Load()
	if len(offs) == 0 || cl == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl.CommitOffsetsSync(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			p.logger.Warn("offset commit failed; it is retried with the next one", "err", err)
			return
		}
		for _, t := range resp.Topics {
			for _, part := range t.Partitions {
				if part.ErrorCode != 0 {
					continue
				}
				if w, ok := ws[tp{t.Topic, part.Partition}]; ok {
					w.markCommitted(offs[t.Topic][part.Partition].Offset)
				}
			}
		}
	})
}

// lagLoop exports the number of retries waiting (the group's lag on the
// retry levels, across every instance) every 10 s.
func (p *Pipeline) lagLoop(ctx context.Context) {
	adm := kadm.NewClient(p.cl.Load())
	retry := map[string]bool{}
	for _, t := range p.retryTopics {
		retry[t] = true
	}
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lags, err := adm.Lag(lctx, p.group())
		cancel()
		if err == nil {
			if g, ok := lags[p.group()]; ok && g.Error() == nil {
				var n int64
				for topic, parts := range g.Lag {
					if !retry[topic] {
						continue
					}
					for _, l := range parts {
						if l.Lag > 0 {
							n += l.Lag
						}
					}
				}
				p.m.retriesPending.Set(float64(n))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// dueOf reads a retry record's due time (zero: now).
func dueOf(r *kgo.Record) time.Time {
	for _, h := range r.Headers {
		if h.Key == HeaderDue {
			if ms, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
				return time.UnixMilli(ms)
			}
		}
	}
	return time.Time{}
}

// attemptOf reads the attempt a record is for: 1 on the activity topic,
// the header on a retry level (level+1 when missing).
func attemptOf(r *kgo.Record, level int) int {
	if level == 0 {
		return 1
	}
	for _, h := range r.Headers {
		if h.Key == HeaderAttempt {
			if n, err := strconv.Atoi(string(h.Value)); err == nil && n >= 1 {
				return n
			}
		}
	}
	return level + 1
}

// retryRecord is the record that schedules attempt at due on level.
func (p *Pipeline) retryRecord(level int, src *kgo.Record, attempt int, due time.Time) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, len(src.Headers)+2)
	for _, h := range src.Headers {
		if h.Key != HeaderAttempt && h.Key != HeaderDue {
			hs = append(hs, h)
		}
	}
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderAttempt, Value: strconv.AppendInt(nil, int64(attempt), 10)},
		kgo.RecordHeader{Key: HeaderDue, Value: strconv.AppendInt(nil, due.UnixMilli(), 10)},
	)
	return &kgo.Record{Topic: p.retryTopics[level-1], Key: src.Key, Value: src.Value, Headers: hs}
}

// produce writes r and waits for the broker's acknowledgement.
func (p *Pipeline) produce(ctx context.Context, r *kgo.Record) error {
	if err := p.cl.Load().ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("produce to %s: %w", r.Topic, err)
	}
	return nil
}

// group is the consumer group: the topic prefix keeps deployments (and
// tests) sharing a broker apart, as it does for the processor's groups.
func (p *Pipeline) group() string { return p.d.Kafka.TopicPrefix + p.cfg.Group }
