package pipeline

import (
	"context"
	"encoding/hex"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/delivery/internal/sender"
	"github.com/moraine-data/moraine/delivery/internal/settings"
	"github.com/moraine-data/moraine/delivery/internal/sign"
	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// process delivers one record. It finishes the item (lets the commit pass
// it) only once the record needs nothing more: delivered, dropped, its
// next attempt durably on a retry level, or its failure durably counted.
// When the partition's context ends first, it returns without finishing,
// and the record is redelivered.
func (p *Pipeline) process(w *partition, it *item) {
	ctx := w.itemCtx
	rec := it.rec
	a, err := codec.DecodeActivity(rec.Value)
	if err != nil {
		p.m.dropped.WithLabelValues("malformed").Inc()
		p.logger.Error("undecodable activity record dropped", "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "err", err)
		w.finish(it)
		return
	}
	attempt := attemptOf(rec, w.level)
	wh, ok := p.d.Table.Webhook(a.GetWebhookId())
	if !ok {
		// A webhook created a moment ago: read the table up to now.
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = p.d.Table.CatchUp(cctx)
		cancel()
		wh, ok = p.d.Table.Webhook(a.GetWebhookId())
	}
	if !ok {
		if ctx.Err() != nil {
			return
		}
		p.m.dropped.WithLabelValues("unknown_webhook").Inc()
		p.logger.Warn("message for an unknown webhook dropped", "webhook_id", a.GetWebhookId(), "message_id", a.GetMessageId())
		w.finish(it)
		return
	}
	if !wh.Active {
		// Inactive webhooks receive nothing; a pending retry is dropped
		// and recorded.
		p.m.dropped.WithLabelValues("inactive").Inc()
		p.d.Log.Add(p.row(a, wh, attempt, p.d.Now(), accountdb.ResultInactive, 0, 0, "webhook is inactive", 0))
		w.finish(it)
		return
	}
	if w.level == replayLevel {
		p.processReplay(w, it, a, wh)
		return
	}

	release, err := p.lim.acquire(ctx, wh.Host, p.cfg.HostQueueTimeout)
	if errors.Is(err, errDeferred) {
		// The host is saturated: park the message on the first level
		// without spending an attempt, so it does not hold the window.
		due := p.d.Now().Add(p.cfg.Schedule[0])
		if !p.durably(ctx, "park message for a busy host", func() error { return p.produce(ctx, p.retryRecord(1, rec, attempt, due)) }) {
			return
		}
		p.m.deferred.Inc()
		w.finish(it)
		return
	}
	if err != nil {
		return // ctx ended
	}
	p.m.inFlight.Inc()
	start := p.d.Now()
	res := p.sender.Send(ctx, sender.Request{URL: wh.URL, Body: a.GetPayload(), Headers: p.headers(a, wh, start)})
	end := p.d.Now()
	release(res.Latency)
	p.m.inFlight.Dec()
	if res.Outcome == sender.Canceled {
		return
	}
	p.m.attempts.WithLabelValues(res.Outcome).Inc()
	p.m.attemptDuration.Observe(res.Latency.Seconds())
	errText := ""
	if res.Err != nil {
		errText = res.Err.Error()
	}
	if res.OK() {
		if ms := a.GetBlockFetchedAtUnixMs(); ms > 0 {
			p.m.endToEnd.Observe(float64(end.UnixMilli()-ms) / 1000)
		}
		p.d.Log.Add(p.row(a, wh, attempt, start, res.Outcome, res.Status, res.Latency, "", 0))
		w.finish(it)
		return
	}
	next, ok := p.afterFailure(ctx, rec, a, wh, attempt, start, end)
	if !ok {
		// Not finished: redelivered later, the attempt repeated. Record
		// the attempt that happened anyway.
		p.d.Log.Add(p.row(a, wh, attempt, start, res.Outcome, res.Status, res.Latency, errText, 0))
		return
	}
	var nextMs uint64
	if !next.IsZero() {
		nextMs = uint64(next.UnixMilli())
	}
	p.d.Log.Add(p.row(a, wh, attempt, start, res.Outcome, res.Status, res.Latency, errText, nextMs))
	w.finish(it)
}

// processReplay delivers one replayed message: with the replays' own
// attempt slots (a replay never takes a live message's), retried in place
// after each wait of ReplaySchedule and then given up, recorded in the
// delivery log under its replay; its failures count toward no
// deactivation (a receiver being replayed to is not failing its live
// messages).
func (p *Pipeline) processReplay(w *partition, it *item, a *record.Activity, wh settings.Webhook) {
	ctx := w.itemCtx
	for attempt := 1; ; attempt++ {
		release, err := p.replayLim.acquire(ctx, wh.Host, 24*time.Hour)
		if err != nil {
			return // ctx ended: redelivered
		}
		p.m.replayInFlight.Inc()
		start := p.d.Now()
		res := p.sender.Send(ctx, sender.Request{URL: wh.URL, Body: a.GetPayload(), Headers: p.headers(a, wh, start)})
		release(res.Latency)
		p.m.replayInFlight.Dec()
		if res.Outcome == sender.Canceled {
			return
		}
		p.m.replayAttempts.WithLabelValues(res.Outcome).Inc()
		errText := ""
		if res.Err != nil {
			errText = res.Err.Error()
		}
		last := attempt > len(p.cfg.ReplaySchedule)
		var next time.Time
		if !res.OK() && !last {
			next = p.d.Now().Add(p.cfg.ReplaySchedule[attempt-1])
		}
		var nextMs uint64
		if !next.IsZero() {
			nextMs = uint64(next.UnixMilli())
		}
		p.d.Log.Add(p.row(a, wh, attempt, start, res.Outcome, res.Status, res.Latency, errText, nextMs))
		if res.OK() || last {
			if !res.OK() {
				p.m.replayGivenUp.Inc()
			}
			w.finish(it)
			return
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// afterFailure applies the plan's rules to a failed attempt and schedules
// the next one; it returns the next attempt's due time (zero: none) and
// false when ctx ended before the outcome was durable.
func (p *Pipeline) afterFailure(ctx context.Context, src *kgo.Record, a *record.Activity, wh settings.Webhook, attempt int, start, end time.Time) (time.Time, bool) {
	acct, _ := p.d.Table.Account(wh.AccountID)
	if attempt == 2 {
		retry := false
		ok := p.durably(ctx, "count double failure", func() error {
			var err error
			retry, err = p.d.Deactivator.DoubleFailure(ctx, wh, acct.Plan, a.GetMessageId(), start)
			return err
		})
		if !ok {
			return time.Time{}, false
		}
		if !retry {
			return time.Time{}, true
		}
	}
	if attempt >= p.cfg.Schedule.Attempts() {
		ok := p.durably(ctx, "deactivate after the last attempt", func() error {
			return p.d.Deactivator.Exhausted(ctx, wh, a.GetMessageId())
		})
		return time.Time{}, ok
	}
	due := end.Add(p.cfg.Schedule[attempt-1])
	rec := p.retryRecord(attempt, src, attempt+1, due)
	if !p.durably(ctx, "schedule retry", func() error { return p.produce(ctx, rec) }) {
		return time.Time{}, false
	}
	p.m.retriesQueued.Inc()
	return due, true
}

// durably runs a step that must succeed before the record may be
// committed, retrying with backoff until it does or ctx ends.
func (p *Pipeline) durably(ctx context.Context, what string, fn func() error) bool {
	again := obs.Retry{Initial: 100 * time.Millisecond, Max: 5 * time.Second, Log: p.logger, Msg: "delivery step failed, retrying", Attrs: []any{"step", what}}
	return again.Do(ctx, fn) == nil
}

// headers signs the attempt, or leaves it unsigned when the account has no
// secret (counted, and logged at most every 10 minutes per account).
func (p *Pipeline) headers(a *record.Activity, wh settings.Webhook, at time.Time) sign.Headers {
	acct, _ := p.d.Table.Account(wh.AccountID)
	st := sign.Stream{Sequence: a.GetSequence(), Kind: sign.KindActivity, ReplayID: a.GetReplayId()}
	if a.GetKind() == record.ActivityKind_ACTIVITY_KIND_RETRACTION {
		st.Kind = sign.KindRetraction
	}
	key, err := sign.Key(acct.Secret, p.enc)
	if err == nil {
		return sign.WithStream(sign.Sign(key, a.GetMessageId(), at.Unix(), a.GetPayload()), key, st, a.GetPayload())
	}
	p.m.unsigned.Inc()
	p.warnMu.Lock()
	if last, ok := p.unsignedWarn[wh.AccountID]; !ok || time.Since(last) > 10*time.Minute {
		p.unsignedWarn[wh.AccountID] = time.Now()
		p.logger.Warn("delivering unsigned: the account has no usable shared secret (POST /v1/webhooks:generateOrRotateSharedSecret makes one)",
			"account_id", wh.AccountID, "webhook_id", wh.ID, "err", err)
	}
	p.warnMu.Unlock()
	return sign.WithStream(sign.Unsigned(a.GetMessageId(), at.Unix()), nil, st, a.GetPayload())
}

func (p *Pipeline) row(a *record.Activity, wh settings.Webhook, attempt int, at time.Time, result string, status int, latency time.Duration, errText string, next uint64) accountdb.Delivery {
	tx := ""
	if h := a.GetTxHash(); len(h) > 0 {
		tx = "0x" + hex.EncodeToString(h)
	}
	return accountdb.Delivery{
		WebhookID: a.GetWebhookId(), MessageID: a.GetMessageId(), Attempt: uint8(min(attempt, 255)), AccountID: wh.AccountID,
		ChainID: a.GetChainId(), TxHash: tx, Status: uint16(status), Result: result,
		LatencyMs: uint32(min(latency.Milliseconds(), 1<<31)), Error: errText,
		AttemptedAt: uint64(at.UnixMilli()), NextAttemptAt: next, ReplayID: a.GetReplayId(),
	}
}
