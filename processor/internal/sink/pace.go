package sink

import (
	"context"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kgo"
)

// probeRead is the write budget's probe: a small read with FINAL, as the
// query service's reads of the head are.
func probeRead(conn driver.Conn) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var n uint64
		return conn.QueryRow(ctx, "SELECT count() FROM chain_heads FINAL").Scan(&n)
	}
}

// pace notes which chains of a written batch are at their head and, when
// any is not (the batch holds backfill), when the next batch may go: the
// write budget's pause for the time this one took. A pause already running
// (this batch was a head record's, written during it) is not extended.
func (c *consumer) pace(w *written, now time.Time) {
	backfill := false
	for chain, b := range w.last {
		head := !c.budget.Backfill(b.timestamp, now)
		c.atHead[strconv.FormatUint(chain, 10)] = head
		backfill = backfill || !head
	}
	if !backfill || now.Before(c.pauseUntil) {
		return
	}
	if p := c.budget.Pause(now.Sub(w.start)); p > 0 {
		c.pauseUntil = now.Add(p)
	}
}

// pausedPoll waits out a backfill batch's pause, polling meanwhile; it
// returns the records to write now. The records it gathers (up to a batch)
// are held for the next batch, which goes when the pause ends. A record of
// a chain at its head is written at once, with the held records of its
// partition before it, while the other partitions' records stay held: no
// chain's head waits behind another's backfill for more than a poll, and
// each partition's records are still written, and committed, in order (a
// partition's committed offset never passes a held record). When the held
// records fill a batch before the pause ends, the rest of the pause is
// waited out without polling, so memory stays bounded by a batch.
//
// With no pause due it returns the held records, if any.
func (c *consumer) pausedPoll(ctx context.Context) []*kgo.Record {
	until := c.pauseUntil
	if time.Now().Before(until) {
		start := time.Now()
		defer func() { c.budget.Paused(time.Since(start)) }()
	}
	for time.Now().Before(until) {
		if rowsEstimate(c.held) >= c.batchRows() {
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(until)):
			}
			break
		}
		pctx, cancel := context.WithDeadline(ctx, until)
		fetches := c.cl.PollRecords(pctx, c.pollSize())
		cancel()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil // the held records are not committed: redelivered
		}
		// Errors (the deadline's among them) are the main poll's to report.
		c.held = append(c.held, fetches.Records()...)
		if now := c.headPartitions(fetches.Records()); len(now) > 0 {
			return c.release(now)
		}
	}
	c.pauseUntil = time.Time{}
	out := c.held
	c.held = nil
	return out
}

// The least a batch holds, and the fewest records a poll takes, while the
// budget holds the backfill back: below them a batch is more parts to merge
// and round trips than rows.
const (
	minThrottledBatchRows = 10000
	minThrottledPoll      = 8
)

// batchRows is the most rows a batch takes: --processor.batch-rows, scaled
// by the write budget's share while it holds the backfill back. A pause is
// at most maxPause (so the consumer meets head records at least that
// often), and after a full batch, whose insert takes seconds while the
// reads are busy, the pause the share asks for is longer than that: the
// backfill would then go at the rate of a full batch every maxPause,
// whatever the share. A batch the share's fraction of a full one keeps the
// pause within maxPause, so the share is the backfill's share down to the
// floor (--processor.backfill-min-share).
func (c *consumer) batchRows() int { return c.byShare(c.cfg.BatchRows, minThrottledBatchRows) }

// pollSize is how many records a poll takes: pollChunk, scaled by the share
// as batchRows is (a poll of pollChunk large blocks alone is far more than a
// batch at a small share).
func (c *consumer) pollSize() int { return c.byShare(pollChunk, minThrottledPoll) }

// byShare is full scaled by the write budget's share, but not below least
// (nor above full): full itself while the budget does not throttle.
func (c *consumer) byShare(full, least int) int {
	s := c.budget.Share()
	if s >= 1 {
		return full
	}
	return min(full, max(least, int(float64(full)*s)))
}

// partition names one partition of the blocks topic.
type partition struct {
	topic string
	n     int32
}

// headPartitions are the partitions of records of chains at their head.
func (c *consumer) headPartitions(records []*kgo.Record) map[partition]bool {
	var out map[partition]bool
	for _, r := range records {
		if c.atHead[string(r.Key)] {
			if out == nil {
				out = map[partition]bool{}
			}
			out[partition{r.Topic, r.Partition}] = true
		}
	}
	return out
}

// release takes the held records of the given partitions, in order, out of
// the held ones.
func (c *consumer) release(parts map[partition]bool) []*kgo.Record {
	var out, keep []*kgo.Record
	for _, r := range c.held {
		if parts[partition{r.Topic, r.Partition}] {
			out = append(out, r)
		} else {
			keep = append(keep, r)
		}
	}
	c.held = keep
	return out
}
