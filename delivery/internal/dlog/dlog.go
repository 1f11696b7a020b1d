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
// Retention (RunRetention): ClickHouse 18.16 has no TTL, so every
// RetentionInterval the log's months that ended more than Retention ago are
// dropped as whole partitions (the deliveries table is partitioned by month
// of attempted_at): the table holds between Retention and Retention plus a
// month. Every delivery instance runs it; dropping a month twice is harmless.
//
// Metrics:
//
//	moraine_delivery_log_rows_total{result}   written, dropped
//	moraine_delivery_log_flush_duration_seconds
//	moraine_delivery_log_partitions_dropped_total
package dlog

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/obs"
)

// Store writes rows; *accountdb.DB implements it.
type Store interface {
	PutDeliveries(ctx context.Context, rows []accountdb.Delivery) error
}

// Config tunes batching and retention.
type Config struct {
	FlushInterval time.Duration
	Batch         int
	Buffer        int
	// Retention is how long rows are kept at least (0: forever);
	// RetentionInterval how often old months are looked for.
	Retention         time.Duration
	RetentionInterval time.Duration
}

// Validate checks the values.
func (c Config) Validate() error {
	if c.FlushInterval <= 0 || c.Batch < 1 || c.Buffer < c.Batch {
		return errors.New("dlog: flush interval and batch must be positive, buffer at least one batch")
	}
	if c.Retention < 0 || (c.Retention > 0 && c.RetentionInterval <= 0) {
		return errors.New("dlog: retention must not be negative, and its interval must be positive")
	}
	return nil
}

// Log is the buffered delivery log.
type Log struct {
	cfg    Config
	store  Store
	logger *slog.Logger
	ch     chan accountdb.Delivery

	rows    *prometheus.CounterVec
	flush   prometheus.Histogram
	dropped prometheus.Counter
}

// New returns a log; Run flushes it.
func New(cfg Config, store Store, logger *slog.Logger, reg prometheus.Registerer) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f := obs.NewMetrics(reg, "delivery")
	l := &Log{
		cfg: cfg, store: store, logger: logger.With("component", "dlog"), ch: make(chan accountdb.Delivery, cfg.Buffer),
		rows: f.CounterVec("log_rows_total",
			"Delivery-log rows by result: written to ClickHouse, or dropped (buffer full or ClickHouse unavailable).", "result"),
		flush: f.Histogram("log_flush_duration_seconds", "Time of one batch insert into the deliveries table.",
			prometheus.ExponentialBuckets(0.002, 2.5, 10)),
		dropped: f.Counter("log_partitions_dropped_total",
			"Months of the deliveries table dropped by the retention (--delivery.log-retention)."),
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
		// Not logged per attempt: the rows dropped after the last are.
		err := obs.Retry{Initial: 100 * time.Millisecond, Max: time.Second, Attempts: 3}.Do(ctx, func() error {
			t := time.Now()
			if err := l.store.PutDeliveries(ctx, part); err != nil {
				return err
			}
			l.flush.Observe(time.Since(t).Seconds())
			l.rows.WithLabelValues("written").Add(float64(len(part)))
			return nil
		})
		if err != nil {
			l.rows.WithLabelValues("dropped").Add(float64(len(part)))
			l.logger.Warn("delivery-log rows dropped: clickhouse insert failed", "rows", len(part), "err", err)
		}
	}
}

// Dropper removes the months of the log that ended before a time;
// *accountdb.DB implements it.
type Dropper interface {
	DropDeliveriesBefore(ctx context.Context, cutoff time.Time) ([]string, error)
}

// RunRetention drops the months older than Config.Retention at once and
// then every RetentionInterval, until ctx ends. A failed pass is logged and
// tried again at the next interval. With no retention it returns at once.
func (l *Log) RunRetention(ctx context.Context, d Dropper, now func() time.Time) error {
	if l.cfg.Retention <= 0 {
		return nil
	}
	for {
		cutoff := now().Add(-l.cfg.Retention)
		dropped, err := d.DropDeliveriesBefore(ctx, cutoff)
		l.dropped.Add(float64(len(dropped)))
		switch {
		case err != nil && ctx.Err() == nil:
			l.logger.Warn("delivery-log retention failed; trying again later", "err", err, "dropped", dropped)
		case len(dropped) > 0:
			l.logger.Info("delivery log: dropped old months", "months", dropped, "retention", l.cfg.Retention.String())
		}
		if !obs.Sleep(ctx, l.cfg.RetentionInterval) {
			return nil
		}
	}
}
