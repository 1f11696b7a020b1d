package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Store is what the reconciler reads; *accountdb.DB implements it.
type Store interface {
	Accounts(ctx context.Context) ([]accountdb.Account, error)
	Account(ctx context.Context, id string) (accountdb.Account, error)
	AllSecrets(ctx context.Context) ([]accountdb.Secret, error)
	Secret(ctx context.Context, accountID string) (accountdb.Secret, error)
	AllWebhooks(ctx context.Context) ([]accountdb.Webhook, error)
	Webhook(ctx context.Context, accountID, id string) (accountdb.Webhook, error)
	AddressChangesSince(ctx context.Context, since uint64, fn func(accountdb.Address) error) error
	AllAddresses(ctx context.Context, fn func(accountdb.Address) error) error
	AddressStates(ctx context.Context, webhookID string, addrs []string) (map[string]accountdb.Address, error)
}

// Deps are the component's collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Kafka      kafkautil.Config
	Store      Store
	// Locks are shared with the request path (webhookapi).
	Locks *Locks
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Watch publishes webhook, address and account changes to the address-watch
// topic and reconciles the topic with ClickHouse. See the package doc.
type Watch struct {
	cfg     Config
	logger  *slog.Logger
	store   Store
	locks   *Locks
	now     func() time.Time
	topic   string
	metrics *metrics

	pub      *Publisher
	consumer *kgo.Client
	adm      *kadm.Client

	table *table
	gen   uint32
	ready atomic.Bool

	mu      sync.Mutex
	pending map[uint64]int // versions this process failed to deliver
}

// New validates and allocates its Kafka clients; it does no I/O (the
// clients connect lazily).
func New(cfg Config, d Deps) (*Watch, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch {
	case d.Logger == nil:
		return nil, errors.New("watch: Deps.Logger is required")
	case d.Registerer == nil:
		return nil, errors.New("watch: Deps.Registerer is required")
	case d.Store == nil:
		return nil, errors.New("watch: Deps.Store is required")
	case d.Locks == nil:
		return nil, errors.New("watch: Deps.Locks is required")
	}
	if err := d.Kafka.Validate(); err != nil {
		return nil, err
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	logger := d.Logger.With("component", "watch")
	w := &Watch{
		cfg: cfg, logger: logger, store: d.Store, locks: d.Locks, now: d.Now,
		topic: d.Kafka.Topic(topics.AddressWatch), metrics: newMetrics(d.Registerer),
		table: newTable(), pending: map[uint64]int{},
	}
	var err error
	w.pub, err = NewPublisher(cfg, PublisherDeps{
		Logger: d.Logger, Registerer: d.Registerer, Kafka: d.Kafka, Subsystem: "query", ClientID: "moraine-query-watch",
	})
	if err != nil {
		return nil, err
	}
	w.pub.onFail = w.markPending
	w.consumer, err = kgo.NewClient(append(d.Kafka.BaseOpts(logger, "moraine-query-watch-reconciler"),
		kgo.ConsumeTopics(w.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.FetchMaxPartitionBytes(32<<20),
	)...)
	if err != nil {
		w.pub.Close()
		return nil, fmt.Errorf("watch: consumer: %w", err)
	}
	w.adm = kadm.NewClient(w.consumer)
	return w, nil
}

// Close releases the Kafka clients (Run does it when it returns).
func (w *Watch) Close() {
	w.pub.Close()
	w.consumer.Close()
}

// Ready reports whether the first full reconciliation has finished.
func (w *Watch) Ready(context.Context) error {
	if !w.ready.Load() {
		return errors.New("watch: first reconciliation of the address-watch topic not finished")
	}
	return nil
}

// Publish produces recs and waits for the broker's acknowledgement (at
// most ProduceTimeout). The caller holds the keys' Locks. On failure the
// versions are remembered so the next incremental reconciliation looks back
// far enough to publish them; the caller acknowledges its request anyway,
// since ClickHouse already holds the change.
func (w *Watch) Publish(ctx context.Context, recs []*kgo.Record) error {
	return w.pub.Publish(ctx, recs)
}

func (w *Watch) markPending(v uint64) {
	if v == 0 {
		return
	}
	w.mu.Lock()
	w.pending[v]++
	n := len(w.pending)
	w.mu.Unlock()
	w.metrics.pending.Set(float64(n))
}

func (w *Watch) oldestPending() (uint64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var lo uint64
	found := false
	for v := range w.pending {
		if !found || v < lo {
			lo, found = v, true
		}
	}
	return lo, found
}

// settle forgets failed versions below v, which a successful pass covered.
func (w *Watch) settle(below uint64) {
	w.mu.Lock()
	for v := range w.pending {
		if v < below {
			delete(w.pending, v)
		}
	}
	n := len(w.pending)
	w.mu.Unlock()
	w.metrics.pending.Set(float64(n))
}

// Run tails the topic, reconciles it with ClickHouse at once (retrying
// until it succeeds; Ready turns true), then incrementally every
// ReconcileInterval and fully every FullReconcileInterval, until ctx ends.
// It closes the Kafka clients when it returns.
func (w *Watch) Run(ctx context.Context) error {
	defer w.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tailDone := make(chan struct{})
	go func() {
		defer close(tailDone)
		w.tail(ctx)
	}()
	defer func() { cancel(); <-tailDone }()

	first := obs.Retry{Initial: 500 * time.Millisecond, Max: 10 * time.Second, Log: w.logger, Msg: "first reconciliation failed, retrying"}
	if first.Do(ctx, func() error { return w.Reconcile(ctx, true) }) != nil {
		return nil // ctx ended
	}
	w.ready.Store(true)
	w.metrics.ready.Set(1)
	w.logger.Info("address-watch topic reconciled with clickhouse", "topic", w.topic, "keys", w.table.size())

	tick := time.NewTicker(w.cfg.ReconcileInterval)
	defer tick.Stop()
	lastFull := time.Now()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		full := time.Since(lastFull) >= w.cfg.FullReconcileInterval
		err := w.Reconcile(ctx, full)
		switch {
		case err == nil:
			if full {
				lastFull = time.Now()
			}
			lastErr = ""
		case ctx.Err() != nil:
			return nil
		case err.Error() != lastErr:
			// Log when the error changes, not every tick.
			w.logger.Warn("reconciliation failed, retrying next interval", "full", full, "err", err)
			lastErr = err.Error()
		}
	}
}

// tail reads the topic from the start into the table until ctx ends.
func (w *Watch) tail(ctx context.Context) {
	for {
		fs := w.consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fs.EachError(func(t string, p int32, err error) {
			w.logger.Warn("address-watch fetch failed", "topic", t, "partition", p, "err", err)
		})
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			for _, r := range p.Records {
				w.table.apply(string(r.Key), topicEntry{
					version: recordVersion(r), offset: r.Offset, partition: r.Partition, live: r.Value != nil,
				})
			}
		})
		w.metrics.topicKeys.Set(float64(w.table.size()))
	}
}

// catchUp returns the topic's end offsets and waits until the table has
// read up to them. (Compaction never removes a partition's last record, so
// the last offset below the end is always read.)
func (w *Watch) catchUp(ctx context.Context) (map[int32]int64, error) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	offs, err := w.adm.ListEndOffsets(lctx, w.topic)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("watch: end offsets of %s: %w", w.topic, err)
	}
	if err := offs.Error(); err != nil {
		return nil, fmt.Errorf("watch: end offsets of %s: %w", w.topic, err)
	}
	ends := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	if len(ends) == 0 {
		return nil, fmt.Errorf("watch: topic %s has no partitions (not created?)", w.topic)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !w.table.caughtUp(ends) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("watch: reading %s did not reach the end offsets in 30 s", w.topic)
		}
		if !obs.Sleep(ctx, 5*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
	return ends, nil
}
