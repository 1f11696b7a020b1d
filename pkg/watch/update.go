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

// Steps of a change, in order. StepAddressesWritten only happens in a
// create that has addresses.
const (
	StepBeforeWrite      Step = "before-write"
	StepAddressesWritten Step = "addresses-written"
	StepWritten          Step = "written"
	StepPublished        Step = "published"
)

// Store is what Writer reads and writes; *accountdb.DB implements it.
type Store interface {
	Webhook(ctx context.Context, accountID, id string) (accountdb.Webhook, error)
	PutWebhook(ctx context.Context, w accountdb.Webhook) error
	PutAddresses(ctx context.Context, rows []accountdb.Address) error
	Account(ctx context.Context, id string) (accountdb.Account, error)
	Secret(ctx context.Context, accountID string) (accountdb.Secret, error)
	PutSecret(ctx context.Context, s accountdb.Secret) error
}

// RecordPublisher produces address-watch records; *Publisher and the query
// service's reconciler implement it.
type RecordPublisher interface {
	Publish(ctx context.Context, recs []*kgo.Record) error
}

// Writer makes every change of webhook, address and account state the
// crash-safe way of the package doc: under the key's lock, ClickHouse
// first, then the records built from exactly the rows written. The query
// service's API (webhookapi) and delivery (deactivating a failing
// webhook) both go through it, so there is one mechanism.
type Writer struct {
	Store     Store
	Publisher RecordPublisher
	Locks     *Locks
	Clock     *accountdb.Clock
	// Step, when set, observes the steps (crash tests).
	Step func(Step)
}

// Update is the outcome of a change.
type Update struct {
	// Before is the webhook row read; After the row written (Before when
	// nothing changed, the new row for a create).
	Before, After accountdb.Webhook
	// Addresses are the address rows written.
	Addresses []accountdb.Address
	// Secret is the secret row written (PutSecret).
	Secret  accountdb.Secret
	Changed bool
	// PublishErr: the change is durable in ClickHouse but its records were
	// not all acknowledged by Kafka (or a row written could not be turned
	// into a record). The change stands (callers acknowledge it); a
	// reconciler publishes it within one pass.
	PublishErr error
}

func (w Writer) step(s Step) {
	if w.Step != nil {
		w.Step(s)
	}
}

func (w Writer) check() error {
	if w.Store == nil || w.Publisher == nil || w.Locks == nil || w.Clock == nil {
		return errors.New("watch: Writer needs Store, Publisher, Locks and Clock")
	}
	return nil
}

// batch gathers the records of the rows a change wrote, and the rows that
// could not become records.
type batch struct {
	recs []*kgo.Record
	errs []error
}

func (b *batch) add(r *kgo.Record, err error) {
	if err != nil {
		b.errs = append(b.errs, err)
		return
	}
	b.recs = append(b.recs, r)
}

// publish produces b's records. It ignores ctx's cancellation: the change
// is already in ClickHouse, and a client that hung up must not leave it to
// the reconciler. A row that cannot become a record is reported with the
// produce's error, and the other records are still produced.
func (w Writer) publish(ctx context.Context, b batch) error {
	var err error
	if len(b.recs) > 0 {
		err = w.Publisher.Publish(context.WithoutCancel(ctx), b.recs)
	}
	w.step(StepPublished)
	return errors.Join(append(b.errs, err)...)
}

// lockWebhook takes one of account's webhooks' lock and reads its row; on
// success the caller releases the lock with unlock.
func (w Writer) lockWebhook(ctx context.Context, accountID, id string) (cur accountdb.Webhook, unlock func(), err error) {
	if err := w.check(); err != nil {
		return cur, nil, err
	}
	unlock = w.Locks.Webhook(id)
	if cur, err = w.Store.Webhook(ctx, accountID, id); err != nil {
		unlock()
		return cur, nil, err
	}
	return cur, unlock, nil
}

// CreateWebhook writes a new webhook (wh, with its id set) and its first
// addresses (rows of wh's id), giving them one new version, and publishes
// them, holding the webhook's lock. The addresses go first and the webhook
// row last: the webhook row is the commit point, and addresses of a
// webhook row that was never written are never shown or published. A
// caller that checks a quota first holds the account's lock around both.
//
// A failed webhook insert may still have happened (an ambiguous failure);
// the caller's retry finds it by its request hash. Nothing after the
// webhook insert fails the call (see Update.PublishErr).
func (w Writer) CreateWebhook(ctx context.Context, wh accountdb.Webhook, addrs []accountdb.Address) (Update, error) {
	if err := w.check(); err != nil {
		return Update{}, err
	}
	unlock := w.Locks.Webhook(wh.ID)
	defer unlock()
	wh.Version = w.Clock.Next(0)
	addrs = slices.Clone(addrs)
	for i := range addrs {
		addrs[i].Version = wh.Version
	}
	w.step(StepBeforeWrite)
	if len(addrs) > 0 {
		if err := w.Store.PutAddresses(ctx, addrs); err != nil {
			return Update{}, err
		}
		w.step(StepAddressesWritten)
	}
	if err := w.Store.PutWebhook(ctx, wh); err != nil {
		return Update{}, err
	}
	w.step(StepWritten)
	var b batch
	b.add(WebhookRecord(wh))
	for _, a := range addrs {
		b.add(AddressRecord(a, wh.ChainID))
	}
	return Update{After: wh, Addresses: addrs, Changed: true, PublishErr: w.publish(ctx, b)}, nil
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
	cur, unlock, err := w.lockWebhook(ctx, accountID, id)
	if err != nil {
		return Update{}, err
	}
	defer unlock()
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
	var b batch
	b.add(WebhookRecord(next))
	return Update{Before: cur, After: next, Changed: true, PublishErr: w.publish(ctx, b)}, nil
}

// UpdateAddresses adds or removes addresses of one of account's webhooks:
// holding the webhook's lock, it reads the webhook and lets choose pick the
// rows to write (choose may read more state; its error aborts the change
// and is returned as is). Each row's Version, as choose returns it, is the
// version of the state it replaces; the rows are written with one version
// above those and the webhook's, then published. No rows: nothing is
// written. Store errors are returned as is (accountdb.ErrNotFound for an
// unknown webhook or another account's).
func (w Writer) UpdateAddresses(ctx context.Context, accountID, id string, choose func(cur accountdb.Webhook) ([]accountdb.Address, error)) (Update, error) {
	cur, unlock, err := w.lockWebhook(ctx, accountID, id)
	if err != nil {
		return Update{}, err
	}
	defer unlock()
	rows, err := choose(cur)
	if err != nil || len(rows) == 0 {
		return Update{Before: cur, After: cur}, err
	}
	floor := cur.Version
	for _, r := range rows {
		floor = max(floor, r.Version)
	}
	v := w.Clock.Next(floor)
	rows = slices.Clone(rows)
	for i := range rows {
		rows[i].WebhookID, rows[i].Version = id, v
	}
	w.step(StepBeforeWrite)
	if err := w.Store.PutAddresses(ctx, rows); err != nil {
		return Update{}, err
	}
	w.step(StepWritten)
	var b batch
	for _, a := range rows {
		b.add(AddressRecord(a, cur.ChainID))
	}
	return Update{Before: cur, After: cur, Addresses: rows, Changed: true, PublishErr: w.publish(ctx, b)}, nil
}

// PutSecret replaces an account's shared secret: holding the account's
// lock, it reads the account and its current secret (if any), writes the
// new one with a version above both, and publishes the account's record.
// Store errors are returned as is (accountdb.ErrNotFound for an unknown
// account).
func (w Writer) PutSecret(ctx context.Context, accountID, secret string) (Update, error) {
	if err := w.check(); err != nil {
		return Update{}, err
	}
	unlock := w.Locks.Account(accountID)
	defer unlock()
	acc, err := w.Store.Account(ctx, accountID)
	if err != nil {
		return Update{}, err
	}
	cur, err := w.Store.Secret(ctx, acc.ID)
	if err != nil && !errors.Is(err, accountdb.ErrNotFound) {
		return Update{}, err
	}
	sec := accountdb.Secret{AccountID: acc.ID, Secret: secret, Version: w.Clock.Next(max(cur.Version, acc.Version))}
	w.step(StepBeforeWrite)
	if err := w.Store.PutSecret(ctx, sec); err != nil {
		return Update{}, err
	}
	w.step(StepWritten)
	var b batch
	b.add(AccountRecord(acc, sec))
	return Update{Secret: sec, Changed: true, PublishErr: w.publish(ctx, b)}, nil
}
