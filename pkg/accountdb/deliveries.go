package accountdb

import (
	"context"
	"math"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/chclient"
)

// Delivery results (the result column of the delivery log).
const (
	ResultSuccess       = "success"
	ResultHTTPError     = "http_error"
	ResultTimeout       = "timeout"
	ResultNetwork       = "network"
	ResultRefusedTarget = "refused_target"
	ResultInactive      = "inactive"
)

// Delivery is one row of the delivery log: one attempt to POST a message,
// or a message dropped without an attempt (result inactive).
type Delivery struct {
	WebhookID string
	MessageID string
	// Attempt is 1 for the first POST of a message, up to the schedule's
	// last attempt.
	Attempt   uint8
	AccountID string
	ChainID   uint64
	// TxHash is 0x + 64 lowercase hex.
	TxHash string
	// Status is the HTTP status code, 0 when no response arrived.
	Status uint16
	Result string
	// LatencyMs is the attempt's duration.
	LatencyMs uint32
	// Error describes a failure (URLs redacted); empty on success.
	Error string
	// AttemptedAt and NextAttemptAt are Unix milliseconds; NextAttemptAt is
	// 0 when no further attempt is scheduled.
	AttemptedAt   uint64
	NextAttemptAt uint64
	// ReplayID is the replay the message belongs to ('' for live ones).
	ReplayID string
}

// DeliveryCursor is a position in a webhook's newest-first delivery list:
// the next page holds rows strictly after it in (attempted_at DESC,
// message_id DESC, attempt DESC) order.
type DeliveryCursor struct {
	AttemptedAt uint64
	MessageID   string
	Attempt     uint8
}

// FirstDeliveryPage is the cursor of the first page.
var FirstDeliveryPage = DeliveryCursor{AttemptedAt: math.MaxUint64}

// Strike kinds (delivery_strikes.kind).
const (
	StrikeDoubleFailure = "double_failure"
	StrikeExhausted     = "exhausted"
	StrikeDeactivated   = "deactivated"
)

// Strike is one row of delivery_strikes (migration 000004).
type Strike struct {
	WebhookID string
	Kind      string
	MessageID string
	// At is Unix milliseconds.
	At      uint64
	Detail  string
	Version uint64
}

const (
	deliveryCols = `webhook_id, attempted_at, message_id, attempt, account_id, chain_id, tx_hash, status, result, latency_ms, error, next_attempt_at`
	iDelivery    = `INSERT INTO deliveries (` + deliveryCols + `, replay_id)`
	// attempted_at >= ? bounds the range read (no read-in-order on 18.16:
	// ORDER BY ... LIMIT reads every row the WHERE admits).
	qDeliveryPage = `SELECT ` + deliveryCols + ` FROM deliveries
WHERE webhook_id = ? AND attempted_at >= ?
  AND (attempted_at < ? OR (attempted_at = ? AND (message_id < ? OR (message_id = ? AND attempt < ?))))
ORDER BY attempted_at DESC, message_id DESC, attempt DESC LIMIT ?`

	strikeCols = `webhook_id, kind, message_id, at, detail, version`
	iStrike    = `INSERT INTO delivery_strikes (` + strikeCols + `)`
	// Distinct messages of a kind since the webhook's latest deactivation
	// by delivery (max over no rows is 0: every strike counts).
	qStrikeCount = `SELECT uniqExact(message_id) FROM delivery_strikes
WHERE webhook_id = ? AND kind = ? AND at > (SELECT max(at) FROM delivery_strikes WHERE webhook_id = ? AND kind = 'deactivated')`
)

// PutDeliveries appends delivery-log rows in one batch.
func (db *DB) PutDeliveries(ctx context.Context, rows []Delivery) error {
	batch := make([][]any, len(rows))
	for i, d := range rows {
		batch[i] = []any{d.WebhookID, d.AttemptedAt, d.MessageID, d.Attempt, d.AccountID, d.ChainID, d.TxHash,
			d.Status, d.Result, d.LatencyMs, d.Error, d.NextAttemptAt, d.ReplayID}
	}
	return db.insert(ctx, "put_deliveries", iDelivery, batch)
}

func scanDelivery(r driver.Rows) (Delivery, error) {
	var d Delivery
	err := r.Scan(&d.WebhookID, &d.AttemptedAt, &d.MessageID, &d.Attempt, &d.AccountID, &d.ChainID, &d.TxHash,
		&d.Status, &d.Result, &d.LatencyMs, &d.Error, &d.NextAttemptAt)
	return d, err
}

// deliveryFirstSpan is the attempted_at range the first read of a page
// covers; it grows eightfold until the page is full or reaches the start.
const deliveryFirstSpan = uint64(time.Hour / time.Millisecond)

// Deliveries returns up to limit delivery-log rows of webhookID after
// cursor, newest first. ClickHouse 18.16 cannot stop an ORDER BY ... LIMIT
// early, so it reads a bounded attempted_at range below the cursor (an
// hour first), widening it until the page is full or the range reaches
// the beginning.
func (db *DB) Deliveries(ctx context.Context, webhookID string, after DeliveryCursor, limit int) ([]Delivery, error) {
	ref := min(after.AttemptedAt, uint64(time.Now().UnixMilli())+uint64(time.Minute/time.Millisecond))
	span := deliveryFirstSpan
	for {
		lo := uint64(0)
		if ref > span {
			lo = ref - span
		}
		out, err := collect(ctx, db.query, "delivery_page", qDeliveryPage, scanDelivery,
			webhookID, lo, after.AttemptedAt, after.AttemptedAt, after.MessageID, after.MessageID, after.Attempt, uint64(limit))
		if err != nil {
			return nil, err
		}
		if len(out) >= limit || lo == 0 {
			return out, nil
		}
		span *= 8
	}
}

// PutStrikes writes strike rows in one batch.
func (db *DB) PutStrikes(ctx context.Context, rows []Strike) error {
	batch := make([][]any, len(rows))
	for i, s := range rows {
		batch[i] = []any{s.WebhookID, s.Kind, s.MessageID, s.At, s.Detail, s.Version}
	}
	return db.insert(ctx, "put_strikes", iStrike, batch)
}

// CountStrikes counts the distinct messages with a strike of kind against
// webhookID since delivery last deactivated it.
func (db *DB) CountStrikes(ctx context.Context, webhookID, kind string) (int, error) {
	var n uint64
	err := db.query(ctx, "strike_count", qStrikeCount, func(r driver.Rows) error { return r.Scan(&n) }, webhookID, kind, webhookID)
	return int(n), err
}

// DropDeliveriesBefore drops the months of the delivery log (partitioned by
// toYYYYMM of attempted_at) that end at or before cutoff (UTC), through
// chclient.DropPartitionsBefore: a month is kept while any of it is newer
// than cutoff, so the log holds between the retention and the retention
// plus a month. It returns the partitions dropped.
func (db *DB) DropDeliveriesBefore(ctx context.Context, cutoff time.Time) ([]string, error) {
	conn, err := db.conn.Get(ErrUnavailable)
	if err != nil {
		return nil, err
	}
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	defer db.observe("drop_delivery_partitions", time.Now())
	dropped, err := chclient.DropPartitionsBefore(ctx, conn, "deliveries", cutoff)
	if err != nil {
		return dropped, classify("drop_delivery_partitions", err)
	}
	return dropped, nil
}
