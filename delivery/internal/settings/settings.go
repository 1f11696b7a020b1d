// Package settings keeps what delivery needs of every webhook and account
// (URL, status, owner; plan and shared secret), read from the compacted
// address-watch topic (schemas/proto/moraine/v1/watch.proto) with
// kafkautil.TableReader: every partition from the start, then tailing.
// Address records are skipped; delivery never needs them.
//
// Ready reports whether the table holds everything the topic held at
// start-up (WaitReady waits for it); delivery consumes no activity before.
// Records are applied by the one rule of pkg/watch (Versions): a record
// older than what the table has seen for its key, tombstones included, is
// dropped, so neither a late record nor delivery's own change applied
// locally (SetInactive) being overtaken by a record already in flight can
// reactivate a deactivated webhook.
package settings

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Webhook is one webhook's delivery settings.
type Webhook struct {
	ID        string
	AccountID string
	ChainID   uint64
	Active    bool
	// URL is the parsed delivery URL; nil when it does not parse as an
	// absolute http(s) URL (the API never stores such a URL).
	URL *url.URL
	// Host is the URL's host:port, lowercase: the unit of per-endpoint
	// concurrency.
	Host    string
	Version uint64
}

// Account is one account's delivery settings.
type Account struct {
	ID   string
	Plan string
	// Secret is 64 lowercase hex characters, "" before the account made one.
	Secret  string
	Version uint64
}

// Table is the webhook and account table.
type Table struct {
	reader   *kafkautil.TableReader
	logger   *slog.Logger
	versions *watch.Versions

	mu       sync.RWMutex
	webhooks map[string]Webhook
	accounts map[string]Account
}

// New returns a table fed from k's address-watch topic; Run reads it.
func New(k kafkautil.Config, logger *slog.Logger) *Table {
	t := &Table{logger: logger.With("component", "settings"), versions: watch.NewVersions(), webhooks: map[string]Webhook{}, accounts: map[string]Account{}}
	t.reader = kafkautil.NewTableReader(k, k.Topic(topics.AddressWatch), t.Apply, t.logger)
	return t
}

// Run reads the topic until ctx ends.
func (t *Table) Run(ctx context.Context) error { return t.reader.Run(ctx) }

// Ready reports whether the start-up contents have been read.
func (t *Table) Ready() bool { return t.reader.Ready() }

// WaitReady waits until Ready, or ctx ends.
func (t *Table) WaitReady(ctx context.Context) error { return t.reader.WaitReady(ctx) }

// ReadyCheck is Ready as a readiness check.
func (t *Table) ReadyCheck(ctx context.Context) error { return t.reader.ReadyCheck(ctx) }

// CatchUp waits until every record the topic holds now has been applied.
func (t *Table) CatchUp(ctx context.Context) error { return t.reader.CatchUp(ctx) }

// Webhook returns a webhook's settings.
func (t *Table) Webhook(id string) (Webhook, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	w, ok := t.webhooks[id]
	return w, ok
}

// Account returns an account's settings.
func (t *Table) Account(id string) (Account, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	a, ok := t.accounts[id]
	return a, ok
}

// SetInactive applies delivery's own deactivation (written as version)
// before its record comes back from the topic. The version is admitted
// first, so a record of the webhook older than the deactivation, still in
// flight, is dropped when it arrives.
func (t *Table) SetInactive(id string, version uint64) {
	if !t.versions.Admit([]byte(codec.WatchWebhookKey(id)), version) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if w, ok := t.webhooks[id]; ok {
		w.Active, w.Version = false, version
		t.webhooks[id] = w
	}
}

// Apply applies one address-watch record (TableReader's callback; tests
// call it directly) by the rule of watch.Versions. Address records are
// skipped before the rule: delivery never needs them, and remembering their
// versions would cost memory for nothing.
func (t *Table) Apply(r *kgo.Record) {
	k, err := codec.ParseWatchKey(string(r.Key))
	if err != nil || k.Kind == codec.WatchKeyAddress {
		return
	}
	if !t.versions.AdmitRecord(r) {
		return
	}
	version := watch.RecordVersion(r)
	var e *record.WatchEntry
	if r.Value != nil {
		if e, err = codec.DecodeWatchEntry(r.Value); err != nil {
			t.logger.Warn("undecodable address-watch record skipped", "key", string(r.Key), "offset", r.Offset, "err", err)
			return
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch k.Kind {
	case codec.WatchKeyWebhook:
		wh := e.GetWebhook()
		if wh == nil {
			delete(t.webhooks, k.WebhookID)
			return
		}
		t.webhooks[k.WebhookID] = newWebhook(k.WebhookID, wh, version)
	case codec.WatchKeyAccount:
		acc := e.GetAccount()
		if acc == nil {
			delete(t.accounts, k.AccountID)
			return
		}
		t.accounts[k.AccountID] = Account{ID: k.AccountID, Plan: acc.GetPlan(), Secret: acc.GetSharedSecret(), Version: version}
	}
}

func newWebhook(id string, wh *record.WatchedWebhook, version uint64) Webhook {
	w := Webhook{
		ID: id, AccountID: wh.GetAccountId(), ChainID: wh.GetChainId(),
		Active: wh.GetStatus() == record.WebhookStatus_WEBHOOK_STATUS_ACTIVE, Version: version,
	}
	if u, err := url.Parse(wh.GetUrl()); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		w.URL = u
		w.Host = strings.ToLower(u.Host)
	}
	return w
}

// Size returns the numbers of webhooks and accounts held.
func (t *Table) Size() (webhooks, accounts int) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.webhooks), len(t.accounts)
}
