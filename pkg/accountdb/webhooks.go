package accountdb

import (
	"context"
	"math"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Webhook statuses.
const (
	StatusActive   = "active"
	StatusInactive = "inactive"
)

// Webhook is one webhook's settings (its addresses are separate rows).
type Webhook struct {
	AccountID string
	ID        string
	URL       string
	// ChainID is the decimal EVM chain id.
	ChainID            string
	EventType          string
	Name               string
	Description        string
	EventSignatures    []string
	IncludeInternalTxs bool
	IncludeLogs        bool
	Status             string
	// CreatedAt is Unix milliseconds.
	CreatedAt uint64
	// RequestHash identifies the create request (retry dedupe).
	RequestHash string
	// Confirmations is how many blocks must be on top of a block before its
	// activity is delivered (a moraine extension; 0 delivers at once).
	Confirmations uint32
	Version       uint64
}

// WebhookCursor is a position in the createdAt-descending list: the next
// page holds rows strictly after (CreatedAt, ID) in (created_at DESC, id
// DESC) order.
type WebhookCursor struct {
	CreatedAt uint64
	ID        string
}

// FirstWebhookPage is the cursor of the first page.
var FirstWebhookPage = WebhookCursor{CreatedAt: math.MaxUint64}

const (
	webhookCols = `account_id, id, url, chain_id, event_type, name, description, event_signatures, include_internal_txs, include_logs, status, created_at, request_hash, confirmations, version`
	qWebhook    = `SELECT ` + webhookCols + ` FROM webhooks FINAL WHERE account_id = ? AND id = ?`
	// The status filter is outside the FINAL subquery: filters on non-key
	// columns must see only the latest version of each row.
	qWebhookPage = `SELECT ` + webhookCols + ` FROM (SELECT ` + webhookCols + ` FROM webhooks FINAL WHERE account_id = ?)
WHERE (? = '' OR status = ?) AND (created_at < ? OR (created_at = ? AND id < ?))
ORDER BY created_at DESC, id DESC LIMIT ?`
	// The status filter is outside FINAL, as in qWebhookPage.
	qActiveWebhookCount   = `SELECT count() FROM (SELECT status FROM webhooks FINAL WHERE account_id = ?) WHERE status = ?`
	qWebhookByRequestHash = `SELECT ` + webhookCols + ` FROM (SELECT ` + webhookCols + ` FROM webhooks FINAL WHERE account_id = ?)
WHERE request_hash = ? AND created_at >= ? ORDER BY created_at DESC, id DESC LIMIT 1`
	qAllWebhooks = `SELECT ` + webhookCols + ` FROM webhooks FINAL`
	iWebhook     = `INSERT INTO webhooks (` + webhookCols + `)`
)

func scanWebhook(r driver.Rows) (Webhook, error) {
	var w Webhook
	var internal, logs uint8
	err := r.Scan(&w.AccountID, &w.ID, &w.URL, &w.ChainID, &w.EventType, &w.Name, &w.Description,
		&w.EventSignatures, &internal, &logs, &w.Status, &w.CreatedAt, &w.RequestHash, &w.Confirmations, &w.Version)
	w.IncludeInternalTxs, w.IncludeLogs = internal == 1, logs == 1
	if w.EventSignatures == nil {
		w.EventSignatures = []string{}
	}
	return w, err
}

func (db *DB) webhooks(ctx context.Context, name, q string, args ...any) ([]Webhook, error) {
	return collect(ctx, db.query, name, q, scanWebhook, args...)
}

// PutWebhook writes a (new version of a) webhook.
func (db *DB) PutWebhook(ctx context.Context, w Webhook) error {
	sigs := w.EventSignatures
	if sigs == nil {
		sigs = []string{}
	}
	return db.insert(ctx, "put_webhook", iWebhook, [][]any{{
		w.AccountID, w.ID, w.URL, w.ChainID, w.EventType, w.Name, w.Description, sigs,
		b2u(w.IncludeInternalTxs), b2u(w.IncludeLogs), w.Status, w.CreatedAt, w.RequestHash, w.Confirmations, w.Version,
	}})
}

// Webhook reads one of account's webhooks; another account's id is
// ErrNotFound, exactly like an unknown one.
func (db *DB) Webhook(ctx context.Context, accountID, id string) (Webhook, error) {
	ws, err := db.webhooks(ctx, "webhook", qWebhook, accountID, id)
	return first(ws, err, "webhook "+id)
}

// Webhooks reads up to limit of account's webhooks after cursor, newest
// first; status "" means any.
func (db *DB) Webhooks(ctx context.Context, accountID, status string, after WebhookCursor, limit int) ([]Webhook, error) {
	return db.webhooks(ctx, "webhook_page", qWebhookPage, accountID, status, status,
		after.CreatedAt, after.CreatedAt, after.ID, uint64(limit))
}

// CountActiveWebhooks counts account's active webhooks: what the plan's
// webhooks-per-account limit applies to (a deactivated webhook, by DELETE or
// by delivery, frees its place until it is reactivated).
func (db *DB) CountActiveWebhooks(ctx context.Context, accountID string) (int, error) {
	var n uint64
	err := db.query(ctx, "webhook_count_active", qActiveWebhookCount, func(r driver.Rows) error { return r.Scan(&n) }, accountID, StatusActive)
	return int(n), err
}

// WebhookByRequestHash returns account's newest webhook created from the
// request hash at or after sinceMs (Unix ms), or ErrNotFound.
func (db *DB) WebhookByRequestHash(ctx context.Context, accountID, hash string, sinceMs uint64) (Webhook, error) {
	ws, err := db.webhooks(ctx, "webhook_by_request", qWebhookByRequestHash, accountID, hash, sinceMs)
	if err != nil {
		return Webhook{}, err
	}
	if len(ws) == 0 {
		return Webhook{}, ErrNotFound
	}
	return ws[0], nil
}

// AllWebhooks reads every webhook of every account (the reconciler's view;
// webhooks per account are capped by plan, so this stays small).
func (db *DB) AllWebhooks(ctx context.Context) ([]Webhook, error) {
	return collect(ctx, db.stream, "all_webhooks", qAllWebhooks, scanWebhook)
}
