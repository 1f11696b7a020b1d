package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/watch"
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
	Locks *watch.Locks
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Reconciler publishes webhook, address and account changes to the
// address-watch topic and reconciles the topic with ClickHouse. See the
// package doc.
type Reconciler struct {
	cfg     Config
	logger  *slog.Logger
	store   Store
	locks   *watch.Locks
	now     func() time.Time
	topic   string
	metrics *metrics

	pub    *watch.Publisher
	reader *kafkautil.TableReader

	table *table
	gen   uint32
	ready atomic.Bool

	mu      sync.Mutex
	pending map[uint64]int // versions this process failed to deliver
}

// New validates and allocates the producer; it does no I/O (the producer
// connects lazily, the topic reader when Run starts).
func New(cfg Config, d Deps) (*Reconciler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Logger == nil || d.Registerer == nil || d.Store == nil || d.Locks == nil {
		return nil, errors.New("reconcile: Deps.Logger, Registerer, Store and Locks are required")
	}
	if err := d.Kafka.Validate(); err != nil {
		return nil, err
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	logger := d.Logger.With("component", "watch")
	w := &Reconciler{
		cfg: cfg, logger: logger, store: d.Store, locks: d.Locks, now: d.Now,
		topic: d.Kafka.Topic(topics.AddressWatch), metrics: newMetrics(d.Registerer),
		table: newTable(), pending: map[uint64]int{},
	}
	var err error
	w.pub, err = watch.NewPublisher(cfg.Config, watch.PublisherDeps{
		Logger: d.Logger, Registerer: d.Registerer, Kafka: d.Kafka, Subsystem: "query", ClientID: "moraine-query-watch",
		OnFail: w.markPending,
	})
	if err != nil {
		return nil, err
	}
	w.reader = kafkautil.NewTableReader(d.Kafka, w.topic, w.apply, logger)
	return w, nil
}

// Close releases the producer (Run does it when it returns).
func (w *Reconciler) Close() { w.pub.Close() }

// Ready reports whether the first full reconciliation has finished.
func (w *Reconciler) Ready(context.Context) error {
	if !w.ready.Load() {
		return errors.New("reconcile: first reconciliation of the address-watch topic not finished")
	}
	return nil
}

// Publish produces recs and waits for the broker's acknowledgement (at
// most ProduceTimeout). The caller holds the keys' Locks. On failure the
// versions are remembered so the next incremental reconciliation looks back
// far enough to publish them; the caller acknowledges its request anyway,
// since ClickHouse already holds the change.
func (w *Reconciler) Publish(ctx context.Context, recs []*kgo.Record) error {
	return w.pub.Publish(ctx, recs)
}

func (w *Reconciler) markPending(v uint64) {
	if v == 0 {
		return
	}
	w.mu.Lock()
	w.pending[v]++
	n := len(w.pending)
	w.mu.Unlock()
	w.metrics.pending.Set(float64(n))
}

func (w *Reconciler) oldestPending() (uint64, bool) {
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
func (w *Reconciler) settle(below uint64) {
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

// Run reads the topic into the table and keeps tailing it, reconciles the
// topic with ClickHouse once the table holds what the topic held at start
// (retrying until it succeeds; Ready turns true), then incrementally every
// ReconcileInterval and fully every FullReconcileInterval, until ctx ends.
// It closes the producer when it returns.
func (w *Reconciler) Run(ctx context.Context) error {
	defer w.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		w.read(ctx)
	}()
	defer func() { cancel(); <-readDone }()

	if err := w.reader.WaitReady(ctx); err != nil {
		return nil
	}
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

// read runs the table reader until ctx ends. The reader fails only before
// it has applied anything (Kafka not answering at start), so it is run
// again: the query service keeps serving while Kafka is away, and Ready
// stays false.
func (w *Reconciler) read(ctx context.Context) {
	again := obs.Retry{Initial: 500 * time.Millisecond, Max: 10 * time.Second, Log: w.logger, Msg: "reading the address-watch topic failed, retrying",
		Attrs: []any{"topic", w.topic}}
	_ = again.Do(ctx, func() error {
		if err := w.reader.Run(ctx); err != nil || ctx.Err() != nil {
			return err
		}
		return errors.New("reconcile: the address-watch reader stopped") // run it again
	})
}

// apply records the last record of a key (the reader's callback).
func (w *Reconciler) apply(r *kgo.Record) {
	n := w.table.apply(string(r.Key), topicEntry{
		version: watch.RecordVersion(r), offset: r.Offset, partition: r.Partition, live: r.Value != nil,
	})
	w.metrics.topicKeys.Set(float64(n))
}

// catchUp returns the topic's end offsets and waits (at most 30 s) until
// the table has read up to them.
func (w *Reconciler) catchUp(ctx context.Context) (map[int32]int64, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ends, err := w.reader.CatchUpOffsets(cctx)
	if err != nil {
		return nil, fmt.Errorf("reconcile: reading %s up to its end: %w", w.topic, err)
	}
	if len(ends) == 0 {
		return nil, fmt.Errorf("reconcile: topic %s has no partitions (not created?)", w.topic)
	}
	return ends, nil
}
