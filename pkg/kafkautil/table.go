package kafkautil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TableReader reads a compacted topic as a table: every partition from the
// start, without a consumer group, then keeps tailing. It hands each record
// to Apply in partition order (a nil Value is a tombstone); what the table
// holds and how it is indexed stays with the caller.
//
// Ready reports whether the reader has consumed everything the topic held
// when Run started: a service whose decisions depend on the table (the
// matcher, delivery) must not act before. CatchUp waits until everything
// the topic holds now is applied: a caller that must see every change
// acknowledged before a moment calls it at that moment.
//
// Known limit: readiness compares offsets, so a partition whose newest
// records were all removed by compaction (a trailing tombstone past
// delete.retention.ms, without a later write) would hold readiness back
// until the next write to that partition; /readyz names the topic.
type TableReader struct {
	cfg    Config
	topic  string
	apply  func(*kgo.Record)
	logger *slog.Logger

	mu       sync.Mutex
	cond     *sync.Cond
	consumed map[int32]int64 // next offset to read, per partition
	ready    bool
	adm      *kadm.Client
}

// NewTableReader returns a reader of topic (a full name, prefix applied)
// that calls apply for every record. apply runs on one goroutine.
func NewTableReader(cfg Config, topic string, apply func(*kgo.Record), logger *slog.Logger) *TableReader {
	t := &TableReader{cfg: cfg, topic: topic, apply: apply, logger: logger, consumed: map[int32]int64{}}
	t.cond = sync.NewCond(&t.mu)
	return t
}

// Run consumes until ctx ends. It fails only before it applied any record
// (no broker answered before ctx ended, or listing the end offsets
// failed), so a caller may run it again.
func (t *TableReader) Run(ctx context.Context) error {
	cl, err := NewClient(ctx, t.logger, append(t.cfg.BaseOpts(t.logger, "moraine-table-"+t.topic),
		kgo.ConsumeTopics(t.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers occupy offsets; seeing them lets the reader
		// reach the end offset when a transactional write ends a partition.
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.FetchMaxPartitionBytes(maxRecordBytes*2),
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	t.mu.Lock()
	t.adm = kadm.NewClient(cl)
	t.mu.Unlock()

	target, err := t.endOffsets(ctx)
	if err != nil {
		return err
	}
	t.markReadyIfReached(target)
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.mu.Lock()
			t.cond.Broadcast()
			t.mu.Unlock()
			return nil
		}
		fetches.EachError(func(topic string, p int32, err error) {
			t.logger.Warn("table fetch error, retrying", "topic", topic, "partition", p, "err", err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				t.apply(r)
			}
		})
		t.mu.Lock()
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if n := len(p.Records); n > 0 {
				t.consumed[p.Partition] = p.Records[n-1].Offset + 1
			}
		})
		t.cond.Broadcast()
		t.mu.Unlock()
		if !t.Ready() {
			t.markReadyIfReached(target)
		}
	}
}

// endOffsets lists the partitions' high watermarks: the end of what is
// written, open transactions included, so reaching it (a read_committed
// reader passes a transaction only once it ended) waits for their outcome.
func (t *TableReader) endOffsets(ctx context.Context) (map[int32]int64, error) {
	t.mu.Lock()
	adm := t.adm
	t.mu.Unlock()
	if adm == nil {
		return nil, errors.New("table reader not started")
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	offs, err := adm.ListEndOffsets(lctx, t.topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", t.topic, err)
	}
	if err := offs.Error(); err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", t.topic, err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

func (t *TableReader) reached(target map[int32]int64) bool {
	for p, end := range target {
		if end > 0 && t.consumed[p] < end {
			return false
		}
	}
	return true
}

func (t *TableReader) markReadyIfReached(target map[int32]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ready && t.reached(target) {
		t.ready = true
		t.cond.Broadcast()
		t.logger.Info("table caught up", "topic", t.topic)
	}
}

// Ready reports whether the start-up contents have been applied.
func (t *TableReader) Ready() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ready
}

// ReadyCheck is Ready as a readiness check.
func (t *TableReader) ReadyCheck(context.Context) error {
	if !t.Ready() {
		return fmt.Errorf("%s: still reading the table", t.topic)
	}
	return nil
}

// WaitReady waits until Ready, or ctx ends.
func (t *TableReader) WaitReady(ctx context.Context) error {
	return t.wait(ctx, func() bool { return t.ready })
}

// CatchUp waits until every record the topic holds now has been applied,
// or ctx ends.
func (t *TableReader) CatchUp(ctx context.Context) error {
	_, err := t.CatchUpOffsets(ctx)
	return err
}

// CatchUpOffsets is CatchUp that also returns the end offsets it waited
// for, by partition: a record at or past them was written after the call
// began.
func (t *TableReader) CatchUpOffsets(ctx context.Context) (map[int32]int64, error) {
	target, err := t.endOffsets(ctx)
	if err != nil {
		return nil, err
	}
	if err := t.wait(ctx, func() bool { return t.reached(target) }); err != nil {
		return nil, err
	}
	return target, nil
}

// wait blocks until done (called under t.mu) holds, or ctx ends.
func (t *TableReader) wait(ctx context.Context, done func() bool) error {
	stop := context.AfterFunc(ctx, func() {
		t.mu.Lock()
		t.cond.Broadcast()
		t.mu.Unlock()
	})
	defer stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	for !done() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t.cond.Wait()
	}
	return nil
}
