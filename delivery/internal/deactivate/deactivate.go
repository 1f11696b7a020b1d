// Package deactivate applies the hosted service's automatic deactivation
// rules (CONTRACT.md section 5.5) and deactivates webhooks through the
// same crash-safe path as the API (pkg/watch.Writer: ClickHouse first,
// then the address-watch topic; the query service's reconciler repairs a
// publish that failed).
//
// Rules, by the account's plan:
//
//	free (and any plan not known to be paid):
//	  - a message that fails attempts 1 and 2 enters the retry queue; the
//	    6th such message over the webhook's life deactivates it (the hosted
//	    service's "6 messages fail both attempts" and "only five messages
//	    can enter the retry queue" are the same event) and is not queued;
//	  - a message that fails its last attempt deactivates it.
//	base, growth, pro, enterprise, custom:
//	  - a message that fails its last (24 h) attempt deactivates it.
//
// The counts are durable: every double failure is a row in
// delivery_strikes (migration 000004), written and counted before the
// message is acknowledged, one per (webhook, message) so a redelivered
// message counts once. A webhook's life restarts when delivery deactivates
// it (a "deactivated" strike): after the account reactivates it, only
// failures from then on count. Deactivating writes that strike first and
// the webhook's status second, so a crash between the two at worst forgives
// the failures so far; it never deactivates twice for one set.
//
// Counting is per webhook and serialised within a process; several
// delivery instances failing messages of one webhook at the same moment
// may both count 6 and both deactivate (the second write changes nothing).
package deactivate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/delivery/internal/settings"
	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/watch"
)

// Reasons, the label values of moraine_delivery_webhooks_deactivated_total.
const (
	ReasonDoubleFailures = "free_double_failures"
	ReasonExhausted      = "exhausted"
)

// paid lists the plans that only lose a webhook to an exhausted message.
var paid = map[string]bool{"base": true, "growth": true, "pro": true, "enterprise": true, "custom": true}

// FreeRules reports whether plan follows the free plan's rules.
func FreeRules(plan string) bool { return !paid[plan] }

// Store is what the deactivator reads and writes; *accountdb.DB
// implements it.
type Store interface {
	watch.Store
	PutStrikes(ctx context.Context, rows []accountdb.Strike) error
	CountStrikes(ctx context.Context, webhookID, kind string) (int, error)
}

// Deps are the collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Store      Store
	Publisher  watch.RecordPublisher
	Table      *settings.Table
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Deactivator counts strikes and deactivates webhooks.
type Deactivator struct {
	limit  int
	store  Store
	writer watch.Writer
	table  *settings.Table
	logger *slog.Logger
	now    func() time.Time
	clock  *accountdb.Clock

	deactivated *prometheus.CounterVec

	mu    sync.Mutex
	locks map[string]*hookLock
}

type hookLock struct {
	mu   sync.Mutex
	refs int
}

// New returns a deactivator; freeDoubleFailures is the free plan's number
// of double-failed messages that deactivates (6).
func New(freeDoubleFailures int, d Deps) (*Deactivator, error) {
	switch {
	case freeDoubleFailures < 1:
		return nil, errors.New("deactivate: the free plan's double-failure limit must be positive")
	case d.Logger == nil, d.Registerer == nil, d.Store == nil, d.Publisher == nil, d.Table == nil:
		return nil, errors.New("deactivate: Deps.Logger, Registerer, Store, Publisher and Table are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	clock := accountdb.NewClock(d.Now)
	x := &Deactivator{
		limit: freeDoubleFailures, store: d.Store, table: d.Table, logger: d.Logger.With("component", "deactivate"),
		now: d.Now, clock: clock, locks: map[string]*hookLock{},
		writer: watch.Writer{Store: d.Store, Publisher: d.Publisher, Locks: watch.NewLocks(), Clock: clock},
		deactivated: obs.NewMetrics(d.Registerer, "delivery").CounterVec("webhooks_deactivated_total",
			"Webhooks delivery deactivated, by reason (free_double_failures, exhausted).", "reason"),
	}
	for _, r := range []string{ReasonDoubleFailures, ReasonExhausted} {
		x.deactivated.WithLabelValues(r)
	}
	return x, nil
}

func (x *Deactivator) lock(id string) func() {
	x.mu.Lock()
	l := x.locks[id]
	if l == nil {
		l = &hookLock{}
		x.locks[id] = l
	}
	l.refs++
	x.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		x.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(x.locks, id)
		}
		x.mu.Unlock()
	}
}

// DoubleFailure records that messageID failed attempts 1 and 2 (attempt 2
// started at attemptedAt) and applies the free plan's rule. It reports
// whether the message may enter the retry queue: false when this failure
// deactivated the webhook (or it already was inactive).
func (x *Deactivator) DoubleFailure(ctx context.Context, wh settings.Webhook, plan, messageID string, attemptedAt time.Time) (bool, error) {
	if !FreeRules(plan) {
		return true, nil
	}
	unlock := x.lock(wh.ID)
	defer unlock()
	if cur, ok := x.table.Webhook(wh.ID); ok && !cur.Active {
		return false, nil
	}
	err := x.store.PutStrikes(ctx, []accountdb.Strike{{
		WebhookID: wh.ID, Kind: accountdb.StrikeDoubleFailure, MessageID: messageID,
		At: uint64(attemptedAt.UnixMilli()), Version: x.clock.Next(0),
	}})
	if err != nil {
		return false, fmt.Errorf("deactivate: record double failure: %w", err)
	}
	n, err := x.store.CountStrikes(ctx, wh.ID, accountdb.StrikeDoubleFailure)
	if err != nil {
		return false, fmt.Errorf("deactivate: count double failures: %w", err)
	}
	if n < x.limit {
		return true, nil
	}
	return false, x.deactivate(ctx, wh, messageID, ReasonDoubleFailures,
		fmt.Sprintf("%d messages failed attempts 1 and 2 (free plan limit %d)", n, x.limit))
}

// Exhausted records that messageID failed its last attempt and deactivates
// the webhook (every plan).
func (x *Deactivator) Exhausted(ctx context.Context, wh settings.Webhook, messageID string) error {
	unlock := x.lock(wh.ID)
	defer unlock()
	if cur, ok := x.table.Webhook(wh.ID); ok && !cur.Active {
		return nil
	}
	err := x.store.PutStrikes(ctx, []accountdb.Strike{{
		WebhookID: wh.ID, Kind: accountdb.StrikeExhausted, MessageID: messageID,
		At: uint64(x.now().UnixMilli()), Version: x.clock.Next(0),
	}})
	if err != nil {
		return fmt.Errorf("deactivate: record exhausted message: %w", err)
	}
	return x.deactivate(ctx, wh, messageID, ReasonExhausted, "a message failed every attempt of the retry schedule")
}

// deactivate writes the deactivated strike, then the webhook's status.
func (x *Deactivator) deactivate(ctx context.Context, wh settings.Webhook, messageID, reason, detail string) error {
	err := x.store.PutStrikes(ctx, []accountdb.Strike{{
		WebhookID: wh.ID, Kind: accountdb.StrikeDeactivated, MessageID: messageID,
		At: uint64(x.now().UnixMilli()), Detail: reason + ": " + detail, Version: x.clock.Next(0),
	}})
	if err != nil {
		return fmt.Errorf("deactivate: record deactivation: %w", err)
	}
	u, err := x.writer.UpdateWebhook(ctx, wh.AccountID, wh.ID, func(_ accountdb.Webhook, next *accountdb.Webhook) error {
		next.Status = accountdb.StatusInactive
		return nil
	})
	switch {
	case errors.Is(err, accountdb.ErrNotFound):
		x.logger.Warn("webhook to deactivate not found in clickhouse", "webhook_id", wh.ID)
		return nil
	case err != nil:
		return fmt.Errorf("deactivate: write status: %w", err)
	}
	x.table.SetInactive(wh.ID, u.After.Version)
	if u.Changed {
		x.deactivated.WithLabelValues(reason).Inc()
		x.logger.Info("webhook deactivated", "webhook_id", wh.ID, "account_id", wh.AccountID, "reason", reason, "detail", detail)
	}
	if u.PublishErr != nil {
		x.logger.Warn("deactivation written but not yet published; the query service's reconciler will publish it",
			"webhook_id", wh.ID, "err", u.PublishErr)
	}
	return nil
}
