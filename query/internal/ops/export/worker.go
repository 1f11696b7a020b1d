package export

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/schemas/codec"
)

const (
	// heartbeat is how often a running job refreshes its updated time.
	heartbeat = time.Minute
	// staleAfter is how long a RUNNING job may go without an update before
	// the republisher hands it to the workers again.
	staleAfter = 10 * time.Minute
	// maintainEvery is the republisher's period; retention runs every
	// hour.
	maintainEvery = time.Minute
)

// Run runs this instance's workers (--export.workers), the republisher and
// the retention until ctx ends.
func (e *Export) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	for i := range e.cfg.Workers {
		g.Go(func() error { return e.work(gctx, i) })
	}
	g.Go(func() error { e.maintain(gctx); return nil })
	return g.Wait()
}

// work is one worker: a member of the consumer group that takes one task
// at a time and commits it once the job's final state is written.
func (e *Export) work(ctx context.Context, n int) error {
	opts := append(e.d.Kafka.BaseOpts(e.logger, fmt.Sprintf("moraine-query-export-%d", n)),
		kgo.ConsumerGroup(e.d.Kafka.TopicPrefix+e.cfg.Group),
		kgo.ConsumeTopics(e.topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.HeartbeatInterval(time.Second),
		kgo.SessionTimeout(15*time.Second),
	)
	cl, err := kafkautil.NewClient(ctx, e.logger, opts...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		cl.LeaveGroupContext(lctx)
		cl.Close()
	}()
	for {
		fs := cl.PollRecords(ctx, 1)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				e.logger.Warn("export tasks: fetch error, retrying", "topic", t, "partition", p, "err", err)
			}
		})
		for _, r := range fs.Records() {
			if !e.handle(ctx, r) {
				return nil // shutdown mid-job: the task stays uncommitted
			}
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if err := cl.CommitRecords(cctx, r); err != nil {
				e.logger.Warn("export task commit failed; the task may run again (and find its job done)", "err", err)
			}
			cancel()
		}
	}
}

// handle runs the job a task names until its final state is written; false
// when ctx ended first.
func (e *Export) handle(ctx context.Context, r *kgo.Record) bool {
	t, err := codec.DecodeOperationTask(r.Value)
	if err != nil {
		e.logger.Error("skipping undecodable export task", "partition", r.Partition, "offset", r.Offset, "err", err)
		return true
	}
	logger := e.logger.With("operation", t.OperationId)
	var o operation
	// ClickHouse may be away: wait for it (the task is not committed).
	again := obs.Retry{Initial: time.Second, Max: 30 * time.Second, Log: logger, Msg: "export: reading the job failed, retrying"}
	if err := again.Do(ctx, func() error {
		o, err = e.db.operation(ctx, t.OperationId)
		if errors.Is(err, errNotFound) {
			return nil
		}
		return err
	}); err != nil {
		return false
	}
	if o.ID == "" || o.Status != statusRunning {
		return true // expired, or done: a repeated or republished task
	}
	for {
		if o.Attempt >= uint32(e.cfg.MaxAttempts) {
			e.m.jobs.WithLabelValues("abandoned").Inc()
			return e.finish(ctx, o, func(o *operation) {
				o.Status, o.Code = statusFailed, codeInternal
				o.Message = fmt.Sprintf("the export failed %d times; ask for a new one", o.Attempt)
			})
		}
		o.Attempt++
		o.UpdatedAt, o.Version = uint64(e.d.Now().UnixMilli()), e.clock.Next(o.Version)
		if err := again.Do(ctx, func() error { return e.db.put(ctx, o) }); err != nil {
			return false
		}
		res, err := e.attempt(ctx, o)
		switch {
		case err == nil:
			return e.finish(ctx, o, func(o *operation) {
				o.Parts, o.Rows, o.Bytes = res.parts, res.rows, res.bytes
				switch {
				case res.nextDate == "":
					o.Status = statusCompleted
					e.m.jobs.WithLabelValues("completed").Inc()
				case res.firstDayTooBig:
					o.Status, o.Code, o.Parts = statusFailed, codeInvalid, 0
					o.Message = fmt.Sprintf("the transactions of %s alone exceed this plan's export limit; export fewer addresses at a time", res.nextDate)
					e.m.jobs.WithLabelValues("failed").Inc()
				default:
					o.Status, o.Code, o.NextDate = statusWarning, codeTruncated, res.nextDate
					o.Message = fmt.Sprintf("the export stops before %s, at this plan's limit; ask again with firstDate %s for the rest", res.nextDate, res.nextDate)
					e.m.jobs.WithLabelValues("truncated").Inc()
				}
			})
		case ctx.Err() != nil:
			return false
		default:
			e.m.jobs.WithLabelValues("error").Inc()
			logger.Warn("export attempt failed", "attempt", o.Attempt, "err", err)
			if !obs.Sleep(ctx, obs.Backoff(int(o.Attempt)-1, e.cfg.RetryPause, time.Minute)) {
				return false
			}
		}
	}
}

// attempt exports o's spec into its attempt's parts.
func (e *Export) attempt(ctx context.Context, o operation) (outcome, error) {
	var s spec
	if err := json.Unmarshal([]byte(o.Request), &s); err != nil {
		return outcome{}, fmt.Errorf("export: the job's request: %w", err)
	}
	start := time.Now()
	e.m.running.Inc()
	defer e.m.running.Dec()
	last := time.Now()
	x := &exporter{h: e.d.History, s: s,
		put: func(ctx context.Context, part uint32, data []byte) error { return e.db.putPart(ctx, o, part, data) },
		tick: func(ctx context.Context) {
			if time.Since(last) < heartbeat {
				return
			}
			last = time.Now()
			// Only while this attempt is still the job's (another worker
			// may have taken it after a rebalance).
			if cur, err := e.db.operation(ctx, o.ID); err == nil && cur.Status == statusRunning && cur.Attempt == o.Attempt {
				cur.UpdatedAt, cur.Version = uint64(e.d.Now().UnixMilli()), e.clock.Next(cur.Version)
				_ = e.db.put(ctx, cur)
			}
		}}
	res, err := x.run(ctx)
	e.m.duration.Observe(time.Since(start).Seconds())
	if err == nil {
		e.m.rows.Add(float64(res.rows))
	}
	return res, err
}

// finish writes o's final state (set by final), retrying until ClickHouse
// takes it; false when ctx ended first.
func (e *Export) finish(ctx context.Context, o operation, final func(*operation)) bool {
	if cur, err := e.db.operation(ctx, o.ID); err == nil && cur.Version > o.Version {
		o.Version = cur.Version // a heartbeat was written meanwhile
	}
	final(&o)
	o.UpdatedAt, o.Version = uint64(e.d.Now().UnixMilli()), e.clock.Next(o.Version)
	again := obs.Retry{Initial: time.Second, Max: 30 * time.Second, Log: e.logger, Msg: "export: writing the job's result failed, retrying"}
	return again.Do(ctx, func() error { return e.db.put(ctx, o) }) == nil
}

// maintain republishes stale jobs every minute and drops expired ones every
// hour, until ctx ends.
func (e *Export) maintain(ctx context.Context) {
	var lastDrop time.Time
	for {
		if ids, err := e.db.stale(ctx, e.d.Now().Add(-staleAfter)); err == nil {
			for _, id := range ids {
				if err := e.enqueue(ctx, id); err == nil {
					e.logger.Info("export job republished (no progress for a while)", "operation", id)
				}
			}
		}
		if time.Since(lastDrop) >= time.Hour {
			lastDrop = time.Now()
			e.dropExpired(ctx)
		}
		if !obs.Sleep(ctx, maintainEvery) {
			return
		}
	}
}

// dropExpired drops the days of operations and files past the retention.
func (e *Export) dropExpired(ctx context.Context) {
	conn, err := e.db.get()
	if err != nil {
		return
	}
	for _, table := range []string{"operation_files", "operations"} {
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		dropped, err := chclient.DropPartitionsBefore(dctx, conn, table, e.d.Now().Add(-e.cfg.Retention))
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			e.logger.Warn("export retention failed; trying again later", "table", table, "err", err)
		case len(dropped) > 0:
			e.logger.Info("export retention: dropped old days", "table", table, "days", dropped)
		}
	}
}
