// Package dlog buffers delivery-log rows (one per attempt) and inserts
// them into ClickHouse's deliveries table in batches, off the delivery hot
// path: every FlushInterval or once Batch rows wait, whichever is first.
//
// The log is best-effort by design: Add never blocks (a full buffer drops
// the row and counts it), a batch that fails to insert is retried a few
// times and then dropped (counted), and a crash loses what was buffered
// (at most one flush interval's worth). Decisions that must survive a
// crash, the deactivation counts, do not rely on it (package deactivate
// writes its own rows synchronously).
//
// Metrics:
//
//	moraine_delivery_log_rows_total{result}   written, dropped
//	moraine_delivery_log_flush_duration_seconds
package dlog

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/obs"
)

// Store writes rows; *accountdb.DB implements it.
type Store interface {
	PutDeliveries(ctx context.Context, rows []accountdb.Delivery) error
}

// Config tunes batching.
type Config struct {
	FlushInterval time.Duration
	Batch         int
	Buffer        int
}

// Validate checks the values.
func (c Config) Validate() error {
	if c.FlushInterval <= 0 || c.Batch < 1 || c.Buffer < c.Batch {
		return errors.New("dlog: flush interval and batch must be positive, buffer at least one batch")
	}
	return nil
}

// Log is the buffered delivery log.
type Log struct {
	cfg    Config
	store  Store
	logger *slog.Logger
	ch     chan accountdb.Delivery

	rows  *prometheus.CounterVec
	flush prometheus.Histogram
}

// New returns a log; Run flushes it.
func New(cfg Config, store Store, logger *slog.Logger, reg prometheus.Registerer) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f := promauto.With(reg)
	l := &Log{
		cfg: cfg, store: store, logger: logger.With("component", "dlog"), ch: make(chan accountdb.Delivery, cfg.Buffer),
		rows: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: "moraine", Subsystem: "delivery", Name: "log_rows_total",
			Help: "Delivery-log rows by result: written to ClickHouse, or dropped (buffer full or ClickHouse unavailable).",
		}, []string{"result"}),
		flush: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: "moraine", Subsystem: "delivery", Name: "log_flush_duration_seconds",
			Help: "Time of one batch insert into the deliveries table.", Buckets: prometheus.ExponentialBuckets(0.002, 2.5, 10),
		}),
	}
	l.rows.WithLabelValues("written")
	l.rows.WithLabelValues("dropped")
	return l, nil
}

// Add queues a row; it never blocks.
func (l *Log) Add(d accountdb.Delivery) {
	select {
	case l.ch <- d:
	default:
		l.rows.WithLabelValues("dropped").Inc()
	}
}

// Run flushes until ctx ends, then flushes what is buffered (bounded by a
// few seconds) and returns.
func (l *Log) Run(ctx context.Context) error {
	tick := time.NewTicker(l.cfg.FlushInterval)
	defer tick.Stop()
	batch := make([]accountdb.Delivery, 0, l.cfg.Batch)
	for {
		select {
		case d := <-l.ch:
			batch = append(batch, d)
			if len(batch) < l.cfg.Batch {
				continue
			}
		case <-tick.C:
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			for {
				select {
				case d := <-l.ch:
					batch = append(batch, d)
					continue
				default:
				}
				break
			}
			l.write(fctx, batch)
			return nil
		}
		if len(batch) > 0 {
			l.write(ctx, batch)
			batch = batch[:0]
		}
	}
}

func (l *Log) write(ctx context.Context, batch []accountdb.Delivery) {
	for start := 0; start < len(batch); start += l.cfg.Batch {
		part := batch[start:min(len(batch), start+l.cfg.Batch)]
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			t := time.Now()
			if err = l.store.PutDeliveries(ctx, part); err == nil {
				l.flush.Observe(time.Since(t).Seconds())
				l.rows.WithLabelValues("written").Add(float64(len(part)))
				break
			}
			if !obs.Sleep(ctx, obs.Backoff(attempt, 100*time.Millisecond, time.Second)) {
				break
			}
		}
		if err != nil {
			l.rows.WithLabelValues("dropped").Add(float64(len(part)))
			l.logger.Warn("delivery-log rows dropped: clickhouse insert failed", "rows", len(part), "err", err)
		}
	}
}
