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
// none is (a backfill batch), how long the next batch waits: the write
// budget's pause for the time this one took.
func (c *consumer) pace(w *written, now time.Time) {
	backfill := len(w.last) > 0
	for chain, b := range w.last {
		head := !c.budget.Backfill(b.timestamp, now)
		c.atHead[strconv.FormatUint(chain, 10)] = head
		backfill = backfill && !head
	}
	if !backfill {
		return
	}
	if p := c.budget.Pause(now.Sub(w.start)); p > 0 {
		c.pauseUntil = now.Add(p)
	}
}

// pausedPoll waits out a backfill batch's pause, polling meanwhile: the
// records it gathers (up to a batch) are the next batch. A record of a chain
// at its head ends the pause at once, so no chain's head waits behind
// another's backfill for more than a poll. It returns nothing when no pause
// is due.
func (c *consumer) pausedPoll(ctx context.Context) []*kgo.Record {
	until := c.pauseUntil
	if !time.Now().Before(until) {
		return nil
	}
	start := time.Now()
	defer func() { c.budget.Paused(time.Since(start)) }()
	c.pauseUntil = time.Time{}
	var records []*kgo.Record
	for time.Now().Before(until) && rowsEstimate(records) < c.cfg.BatchRows {
		pctx, cancel := context.WithDeadline(ctx, until)
		fetches := c.cl.PollRecords(pctx, pollChunk)
		cancel()
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return records
		}
		// Errors (the deadline's among them) are the main poll's to report.
		for _, r := range fetches.Records() {
			records = append(records, r)
			if c.atHead[string(r.Key)] {
				return records
			}
		}
	}
	// A batch's worth arrived before the pause ended: wait out the rest.
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(until)):
	}
	return records
}
