// Package ledger keeps the message ledger: one ClickHouse row
// (webhook_messages, migration 14) per message a webhook's stream
// numbered, so that a replay can repeat every message a receiver was sent,
// with its sequence number, and a receiver that lost messages recovers them
// with no gap (docs/webhook-stream.md, "Replay").
//
// # Writing: at least once, idempotent
//
// A consumer group (--ledger.group) reads the activity topic and the replay
// topic read_committed, so it sees exactly the messages the matcher's and
// the replays' transactions committed, and inserts one row per numbered
// message: live activity and retractions, and the messages a replay
// numbered anew. A replay's retransmissions (record.Activity.Retransmission)
// repeat rows the ledger has, and records written before sequences existed
// (sequence 0) have no place in it; both are skipped. Offsets are committed
// only after the rows are in ClickHouse; a redelivered record rewrites an
// identical row (ReplacingMergeTree keyed by webhook, block and sequence).
//
// # Reading
//
// Range returns a webhook's messages of a block range; Complete reports
// whether it holds every number of a webhook's stream up to a given one,
// the barrier a replay waits at before it reads the ledger.
//
// # Metrics
//
//	moraine_processor_ledger_rows_written_total
//	moraine_processor_ledger_batch_duration_seconds
package ledger

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Config configures the ledger consumer.
type Config struct {
	Enabled bool
	Group   string
	// Timeout bounds one insert or read.
	Timeout time.Duration
}

// RegisterFlags adds the --ledger.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Enabled, "ledger.enabled", true,
		"keep the message ledger (ClickHouse webhook_messages): every numbered webhook message, which replays repeat with their sequence numbers")
	fs.StringVar(&c.Group, "ledger.group", "moraine-ledger", "Kafka consumer group of the message ledger (--kafka.topic-prefix is prepended)")
	fs.DurationVar(&c.Timeout, "ledger.timeout", 30*time.Second, "deadline of one ledger insert or read")
}

// Validate checks the configuration of an enabled ledger.
func (c Config) Validate() error {
	if c.Group == "" || c.Timeout <= 0 {
		return errors.New("ledger: --ledger.group is required and --ledger.timeout must be positive")
	}
	return nil
}

// Entry is one message of the ledger.
type Entry struct {
	WebhookID   string
	BlockNumber uint64
	Sequence    uint64
	MessageID   string
	Kind        record.ActivityKind
	ChainID     uint64
	BlockHash   []byte
	// ReceiptsRoot is the block's, for rebuilding an activity payload.
	ReceiptsRoot []byte
	TxHash       []byte
	// RetractedMessageID names the message a retraction withdraws.
	RetractedMessageID string
	IncludeLogs        bool
	IncludeInternalTxs bool
	// ReplayID is the replay that numbered the message ('' for live ones).
	ReplayID   string
	ProducedAt uint64
}

// EntryOf is the ledger entry of an activity-topic or replay-topic record;
// false for records that have none (sequence 0, retransmissions).
func EntryOf(a *record.Activity) (Entry, bool) {
	if a.GetSequence() == 0 || a.GetRetransmission() {
		return Entry{}, false
	}
	return Entry{
		WebhookID: a.GetWebhookId(), BlockNumber: a.GetBlockNumber(), Sequence: a.GetSequence(), MessageID: a.GetMessageId(),
		Kind: a.GetKind(), ChainID: a.GetChainId(), BlockHash: a.GetBlockHash(), ReceiptsRoot: a.GetReceiptsRoot(), TxHash: a.GetTxHash(),
		RetractedMessageID: a.GetRetractedMessageId(), IncludeLogs: a.GetIncludeLogs(), IncludeInternalTxs: a.GetIncludeInternalTxs(),
		ReplayID: a.GetReplayId(), ProducedAt: uint64(max(a.GetMatchedAtUnixMs(), 0)),
	}, true
}

const (
	columns = `webhook_id, block_number, sequence, message_id, kind, chain_id, block_hash, receipts_root, tx_hash, retracted_message_id,
include_logs, include_internal_txs, replay_id, produced_at, version`
	iEntries = `INSERT INTO webhook_messages (` + columns + `)`
	// FINAL: a redelivered record wrote its row twice until a merge.
	qRange = `SELECT ` + columns + ` FROM webhook_messages FINAL
WHERE webhook_id = ? AND block_number >= ? AND block_number <= ? ORDER BY sequence`
	// uniqExact counts a number written twice (a redelivered record) once.
	qComplete = `SELECT min(sequence), uniqExact(sequence) FROM webhook_messages WHERE webhook_id = ? AND sequence <= ?`
)

// Put inserts entries in one batch.
func Put(ctx context.Context, conn driver.Conn, timeout time.Duration, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	ctx, cancel := chclient.WithTimeout(ctx, timeout, nil)
	defer cancel()
	batch, err := conn.PrepareBatch(ctx, iEntries)
	if err != nil {
		return fmt.Errorf("ledger: prepare insert: %w", err)
	}
	for _, e := range entries {
		if err := batch.Append(e.WebhookID, e.BlockNumber, e.Sequence, e.MessageID, uint8(e.Kind), e.ChainID,
			fixed32(e.BlockHash), fixed32(e.ReceiptsRoot), fixed32(e.TxHash), e.RetractedMessageID, b2u(e.IncludeLogs), b2u(e.IncludeInternalTxs),
			e.ReplayID, e.ProducedAt, e.ProducedAt); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("ledger: append: %w", err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("ledger: insert %d rows: %w", len(entries), err)
	}
	return nil
}

// Range returns webhookID's ledger entries of blocks from..to, in sequence
// order.
func Range(ctx context.Context, conn driver.Conn, timeout time.Duration, webhookID string, from, to uint64) ([]Entry, error) {
	ctx, cancel := chclient.WithTimeout(ctx, timeout, nil)
	defer cancel()
	rows, err := conn.Query(ctx, qRange, webhookID, from, to)
	if err != nil {
		return nil, fmt.Errorf("ledger: read %s blocks %d-%d: %w", webhookID, from, to, err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var kind, logs, internal uint8
		var blockHash, receiptsRoot, txHash string
		var version uint64
		if err := rows.Scan(&e.WebhookID, &e.BlockNumber, &e.Sequence, &e.MessageID, &kind, &e.ChainID, &blockHash, &receiptsRoot, &txHash,
			&e.RetractedMessageID, &logs, &internal, &e.ReplayID, &e.ProducedAt, &version); err != nil {
			return nil, fmt.Errorf("ledger: scan: %w", err)
		}
		e.Kind, e.IncludeLogs, e.IncludeInternalTxs = record.ActivityKind(kind), logs == 1, internal == 1
		e.BlockHash, e.ReceiptsRoot, e.TxHash = []byte(blockHash), []byte(receiptsRoot), []byte(txHash)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: read %s: %w", webhookID, err)
	}
	return out, nil
}

// Complete reports whether the ledger holds every message of webhookID
// numbered up to last (the stream's last sequence, as the matcher
// committed it): every number from the lowest the ledger has (1, unless
// the webhook's stream began before the ledger existed) to last. A replay
// waits for it before it reads the ledger, which then says which messages
// the stream carried.
func Complete(ctx context.Context, conn driver.Conn, timeout time.Duration, webhookID string, last uint64) (bool, error) {
	if last == 0 {
		return true, nil
	}
	ctx, cancel := chclient.WithTimeout(ctx, timeout, nil)
	defer cancel()
	var lowest, n uint64
	if err := conn.QueryRow(ctx, qComplete, webhookID, last).Scan(&lowest, &n); err != nil {
		return false, fmt.Errorf("ledger: numbers of %s: %w", webhookID, err)
	}
	return n > 0 && n == last-lowest+1, nil
}

// Consumer writes the ledger.
type Consumer struct {
	cfg    Config
	kafka  kafkautil.Config
	conn   driver.Conn
	logger *slog.Logger
	rows   prometheus.Counter
	batch  prometheus.Histogram
}

// New builds the consumer over conn (moraine's database); no I/O.
func New(cfg Config, kafka kafkautil.Config, conn driver.Conn, logger *slog.Logger, reg prometheus.Registerer) *Consumer {
	f := obs.NewMetrics(reg, "processor")
	return &Consumer{
		cfg: cfg, kafka: kafka, conn: conn, logger: logger.With("component", "ledger"),
		rows:  f.Counter("ledger_rows_written_total", "Message-ledger rows written (numbered webhook messages)."),
		batch: f.Histogram("ledger_batch_duration_seconds", "Time to write one batch of the message ledger.", prometheus.ExponentialBuckets(0.002, 2.5, 10)),
	}
}

// Group is the consumer group, behind the topic prefix.
func (c *Consumer) Group() string { return c.kafka.TopicPrefix + c.cfg.Group }

// Run consumes until ctx ends or an insert fails for good.
func (c *Consumer) Run(ctx context.Context) error {
	cl, err := kafkautil.NewClient(ctx, c.logger, c.kafka.ConsumerOpts(c.logger, "moraine-ledger", c.Group(),
		c.kafka.Topic(topics.Activity), c.kafka.Topic(topics.Replay))...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		cl.LeaveGroupContext(lctx)
		cl.Close()
	}()
	c.logger.Info("ledger consuming", "group", c.Group())
	for {
		fs := cl.PollRecords(ctx, 10000)
		if ctx.Err() != nil || fs.IsClientClosed() {
			cl.AllowRebalance()
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			c.logger.Warn("fetch error, retrying", "topic", t, "partition", p, "err", err)
		})
		recs := fs.Records()
		if len(recs) > 0 {
			if err := c.write(ctx, cl, recs); err != nil {
				cl.AllowRebalance()
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		cl.AllowRebalance()
	}
}

// write inserts the batch's entries (retrying) and commits its offsets.
func (c *Consumer) write(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	start := time.Now()
	var entries []Entry
	for _, r := range recs {
		a, err := codec.DecodeActivity(r.Value)
		if err != nil {
			// Delivery drops it too; nothing was numbered for it.
			c.logger.Warn("undecodable activity record skipped", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
			continue
		}
		if e, ok := EntryOf(a); ok {
			entries = append(entries, e)
		}
	}
	again := obs.Retry{Initial: 200 * time.Millisecond, Max: 5 * time.Second, Log: c.logger, Msg: "ledger insert failed, retrying"}
	if err := again.Do(ctx, func() error { return Put(ctx, c.conn, c.cfg.Timeout, entries) }); err != nil {
		return err
	}
	if err := cl.CommitRecords(ctx, recs...); err != nil {
		// Read again after a restart or rebalance: the rows are idempotent.
		c.logger.Warn("ledger offset commit failed; the records will be written again", "err", err)
	}
	c.rows.Add(float64(len(entries)))
	c.batch.Observe(time.Since(start).Seconds())
	return nil
}

func fixed32(b []byte) string {
	if len(b) == 32 {
		return string(b)
	}
	var out [32]byte
	copy(out[:], b)
	return string(out[:])
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
