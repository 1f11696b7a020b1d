package watch

import (
	"context"
	"errors"
	"reflect"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
)

// Step names a point between the steps of a change, for crash tests.
type Step string

// Steps of a webhook change, in order.
const (
	StepBeforeWrite Step = "before-write"
	StepWritten     Step = "written"
	StepPublished   Step = "published"
)

// WebhookStore is what UpdateWebhook reads and writes; *accountdb.DB
// implements it.
type WebhookStore interface {
	Webhook(ctx context.Context, accountID, id string) (accountdb.Webhook, error)
	PutWebhook(ctx context.Context, w accountdb.Webhook) error
}

// RecordPublisher produces address-watch records; *Watch and *Publisher
// implement it.
type RecordPublisher interface {
	Publish(ctx context.Context, recs []*kgo.Record) error
}

// Writer changes webhook settings the crash-safe way of the package doc.
// The query service's API (webhookapi) and delivery (deactivating a
// failing webhook) both go through it, so there is one mechanism.
type Writer struct {
	Store     WebhookStore
	Publisher RecordPublisher
	Locks     *Locks
	Clock     *accountdb.Clock
	// Step, when set, observes the steps (crash tests).
	Step func(Step)
}

// Update is the outcome of UpdateWebhook.
type Update struct {
	// Before is the row read; After the row written (Before when nothing
	// changed).
	Before, After accountdb.Webhook
	Changed       bool
	// PublishErr: the change is durable in ClickHouse but its record was
	// not acknowledged by Kafka. The change stands (callers acknowledge
	// it); a reconciler publishes it within one pass.
	PublishErr error
}

func (w Writer) step(s Step) {
	if w.Step != nil {
		w.Step(s)
	}
}

// UpdateWebhook changes one of account's webhooks: holding the webhook's
// lock, it reads the current row, lets mutate edit a copy (mutate may read
// more state; its error aborts the change and is returned as is), and when
// the copy differs writes it to ClickHouse with a version above the row's,
// then publishes its record synchronously. Store errors are returned as is
// (accountdb.ErrNotFound for an unknown webhook or another account's).
//
// Nothing after the ClickHouse write fails the call: a failed publish is
// reported in Update.PublishErr.
func (w Writer) UpdateWebhook(ctx context.Context, accountID, id string, mutate func(cur accountdb.Webhook, next *accountdb.Webhook) error) (Update, error) {
	if w.Store == nil || w.Publisher == nil || w.Locks == nil || w.Clock == nil {
		return Update{}, errors.New("watch: Writer needs Store, Publisher, Locks and Clock")
	}
	unlock := w.Locks.Webhook(id)
	defer unlock()
	cur, err := w.Store.Webhook(ctx, accountID, id)
	if err != nil {
		return Update{}, err
	}
	next := cur
	next.EventSignatures = slices.Clone(cur.EventSignatures)
	if err := mutate(cur, &next); err != nil {
		return Update{}, err
	}
	next.Version = cur.Version
	if reflect.DeepEqual(next, cur) {
		return Update{Before: cur, After: cur}, nil
	}
	next.Version = w.Clock.Next(cur.Version)
	w.step(StepBeforeWrite)
	if err := w.Store.PutWebhook(ctx, next); err != nil {
		return Update{}, err
	}
	w.step(StepWritten)
	u := Update{Before: cur, After: next, Changed: true}
	rec, err := WebhookRecord(next)
	if err == nil {
		err = w.Publisher.Publish(context.WithoutCancel(ctx), []*kgo.Record{rec})
	}
	u.PublishErr = err
	w.step(StepPublished)
	return u, nil
}
