package accountdb

import (
	"context"
	"math"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Replay statuses (replay_progress.status); a job without a progress row
// is ReplayQueued.
const (
	ReplayQueued    = "queued"
	ReplayWaiting   = "waiting"
	ReplayRunning   = "running"
	ReplayDone      = "done"
	ReplayCancelled = "cancelled"
	ReplayFailed    = "failed"
)

// ReplayFinished reports whether status is final.
func ReplayFinished(status string) bool {
	return status == ReplayDone || status == ReplayCancelled || status == ReplayFailed
}

// ReplayJob is a replay as requested (replay_jobs, migration 14). Only the
// query service writes it: once when it is created, again to cancel it.
type ReplayJob struct {
	WebhookID string
	ID        string
	AccountID string
	ChainID   uint64
	// FromBlock..ToBlock is the range replayed, inclusive.
	FromBlock, ToBlock uint64
	// FromTimestamp and ToTimestamp (Unix seconds) are the time range asked
	// for, 0 for a block range.
	FromTimestamp, ToTimestamp uint64
	// MessagesPerSecond paces the replay (the plan's).
	MessagesPerSecond uint32
	// CreatedAt and CancelRequestedAt are Unix milliseconds.
	CreatedAt         uint64
	CancelRequestedAt uint64
	// ToLive: the replay runs to where the webhook's live stream began
	// (fromBlock on create); its runner raises ToBlock when it starts.
	ToLive  bool
	Version uint64
}

// ReplayProgress is a job's progress as its runner reports it
// (replay_progress). Only the processor writes it.
type ReplayProgress struct {
	WebhookID string
	ID        string
	Status    string
	// ToBlock is the job's last block as the runner runs it (a ToLive job's
	// raised); 0 until it knows it.
	ToBlock uint64
	// NextBlock is the next block to replay: the blocks before it are done.
	NextBlock uint64
	// Retransmitted counts messages repeated with their sequence number,
	// Renumbered those the replay numbered anew.
	Retransmitted, Renumbered uint64
	// Error says why a job failed.
	Error string
	// StartedAt and UpdatedAt are Unix milliseconds.
	StartedAt, UpdatedAt uint64
	Version              uint64
}

// ProgressVersion orders a runner's reports of one job: further progress
// wins, and a final report wins over every other (two runners can report
// for a moment when a chain's partition moves).
func ProgressVersion(p ReplayProgress) uint64 {
	if ReplayFinished(p.Status) {
		return math.MaxUint64
	}
	return p.NextBlock<<1 | uint64(b2u(p.Status == ReplayRunning))
}

// ReplayDeliveries counts a replay's deliveries in the delivery log.
type ReplayDeliveries struct {
	// Delivered: messages with a successful attempt. Failed: messages
	// whose last attempt failed with no further one scheduled.
	Delivered, Failed uint64
}

const (
	replayJobCols = `webhook_id, id, account_id, chain_id, from_block, to_block, from_timestamp, to_timestamp,
messages_per_second, created_at, cancel_requested_at, to_live, version`
	iReplayJob = `INSERT INTO replay_jobs (` + replayJobCols + `)`
	qReplayJob = `SELECT ` + replayJobCols + ` FROM replay_jobs FINAL WHERE webhook_id = ? AND id = ?`
	// A webhook has few jobs; the newest first.
	qReplayJobs = `SELECT ` + replayJobCols + ` FROM replay_jobs FINAL WHERE webhook_id = ? ORDER BY created_at DESC, id DESC LIMIT ?`
	// Jobs without a final report, oldest first: what runners look for.
	qUnfinishedReplays = `SELECT ` + replayJobCols + ` FROM replay_jobs FINAL
WHERE id NOT IN (SELECT id FROM (SELECT id, status FROM replay_progress FINAL) WHERE status IN ('done', 'cancelled', 'failed'))
ORDER BY created_at, id`

	replayProgressCols = `webhook_id, id, status, to_block, next_block, retransmitted, renumbered, error, started_at, updated_at, version`
	iReplayProgress    = `INSERT INTO replay_progress (` + replayProgressCols + `)`
	qReplayProgress    = `SELECT ` + replayProgressCols + ` FROM replay_progress FINAL WHERE webhook_id = ? AND id IN ?`

	// Replays' rows are few beside the live ones; attempted_at bounds the
	// read to the job's lifetime.
	qReplayDeliveries = `SELECT uniqExactIf(message_id, result = 'success'),
  uniqExactIf(message_id, result != 'success' AND next_attempt_at = 0)
FROM deliveries WHERE webhook_id = ? AND attempted_at >= ? AND replay_id = ?`
)

func scanReplayJob(r driver.Rows) (ReplayJob, error) {
	var j ReplayJob
	var toLive uint8
	err := r.Scan(&j.WebhookID, &j.ID, &j.AccountID, &j.ChainID, &j.FromBlock, &j.ToBlock, &j.FromTimestamp, &j.ToTimestamp,
		&j.MessagesPerSecond, &j.CreatedAt, &j.CancelRequestedAt, &toLive, &j.Version)
	j.ToLive = toLive == 1
	return j, err
}

func scanReplayProgress(r driver.Rows) (ReplayProgress, error) {
	var p ReplayProgress
	err := r.Scan(&p.WebhookID, &p.ID, &p.Status, &p.ToBlock, &p.NextBlock, &p.Retransmitted, &p.Renumbered, &p.Error,
		&p.StartedAt, &p.UpdatedAt, &p.Version)
	return p, err
}

// PutReplayJob writes a (new version of a) replay job.
func (db *DB) PutReplayJob(ctx context.Context, j ReplayJob) error {
	return db.insert(ctx, "put_replay_job", iReplayJob, [][]any{{j.WebhookID, j.ID, j.AccountID, j.ChainID, j.FromBlock,
		j.ToBlock, j.FromTimestamp, j.ToTimestamp, j.MessagesPerSecond, j.CreatedAt, j.CancelRequestedAt, b2u(j.ToLive), j.Version}})
}

// ReplayJob reads one of webhookID's replay jobs.
func (db *DB) ReplayJob(ctx context.Context, webhookID, id string) (ReplayJob, error) {
	js, err := collect(ctx, db.query, "replay_job", qReplayJob, scanReplayJob, webhookID, id)
	return first(js, err, "replay "+id)
}

// ReplayJobs reads webhookID's newest limit replay jobs, newest first.
func (db *DB) ReplayJobs(ctx context.Context, webhookID string, limit int) ([]ReplayJob, error) {
	return collect(ctx, db.query, "replay_jobs", qReplayJobs, scanReplayJob, webhookID, uint64(limit))
}

// UnfinishedReplays reads every job without a final report, oldest first.
func (db *DB) UnfinishedReplays(ctx context.Context) ([]ReplayJob, error) {
	return collect(ctx, db.query, "unfinished_replays", qUnfinishedReplays, scanReplayJob)
}

// PutReplayProgress writes a job's progress (its version from
// ProgressVersion).
func (db *DB) PutReplayProgress(ctx context.Context, p ReplayProgress) error {
	return db.insert(ctx, "put_replay_progress", iReplayProgress, [][]any{{p.WebhookID, p.ID, p.Status, p.ToBlock, p.NextBlock,
		p.Retransmitted, p.Renumbered, p.Error, p.StartedAt, p.UpdatedAt, ProgressVersion(p)}})
}

// ReplayProgressOf reads the progress of webhookID's jobs ids; a job
// without a report is absent.
func (db *DB) ReplayProgressOf(ctx context.Context, webhookID string, ids []string) (map[string]ReplayProgress, error) {
	out := map[string]ReplayProgress{}
	if len(ids) == 0 {
		return out, nil
	}
	ps, err := collect(ctx, db.query, "replay_progress", qReplayProgress, scanReplayProgress, webhookID, groupSet(ids))
	for _, p := range ps {
		out[p.ID] = p
	}
	return out, err
}

// ReplayDeliveryCounts counts replayID's deliveries (attempts since
// since, Unix ms: the job's creation).
func (db *DB) ReplayDeliveryCounts(ctx context.Context, webhookID, replayID string, since uint64) (ReplayDeliveries, error) {
	var c ReplayDeliveries
	err := db.query(ctx, "replay_deliveries", qReplayDeliveries, func(r driver.Rows) error {
		return r.Scan(&c.Delivered, &c.Failed)
	}, webhookID, since, replayID)
	return c, err
}

// groupSet is ids as the bound value of an IN ? (FIELD-NOTES: a Go slice
// would become an Array literal).
func groupSet(ids []string) clickhouse.GroupSet {
	set := make([]any, len(ids))
	for i, id := range ids {
		set[i] = id
	}
	return clickhouse.GroupSet{Value: set}
}
