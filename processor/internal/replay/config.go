package replay

import (
	"errors"
	"flag"
	"time"
)

// Config configures the replay runner (the --replay.* flags).
type Config struct {
	// Enabled runs replay jobs here (the matcher must run too).
	Enabled bool
	// PollInterval is how often jobs are looked for in ClickHouse.
	PollInterval time.Duration
	// ChunkBlocks bounds the blocks one chunk (one Kafka transaction)
	// reads; ChunkMessages the messages it produces (whole blocks: a block
	// with more still makes one chunk).
	ChunkBlocks   uint64
	ChunkMessages int
	// Concurrency bounds the jobs this instance runs at once.
	Concurrency int
	// Timeout bounds one ClickHouse statement; TransactionTimeout is the
	// replay producers' Kafka transaction timeout.
	Timeout            time.Duration
	TransactionTimeout time.Duration
	// BarrierTimeout bounds the wait, before a job starts, for the matcher
	// to pass its range and the ledger to hold every message of it; past
	// it the job fails (the matcher or the ledger is stuck).
	BarrierTimeout time.Duration
}

// RegisterFlags adds the --replay.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Enabled, "replay.enabled", true, "run webhook replay jobs (POST /v1/webhooks/{id}:replay) of the chains this processor's matcher owns (needs --matcher.enabled and --ledger.enabled)")
	fs.DurationVar(&c.PollInterval, "replay.poll-interval", time.Second, "how often replay jobs are looked for")
	fs.Uint64Var(&c.ChunkBlocks, "replay.chunk-blocks", 10000, "most blocks one replay transaction reads")
	fs.IntVar(&c.ChunkMessages, "replay.chunk-messages", 2000, "most messages one replay transaction produces (a block with more is produced whole)")
	fs.IntVar(&c.Concurrency, "replay.concurrency", 2, "replay jobs this instance runs at once")
	fs.DurationVar(&c.Timeout, "replay.timeout", 60*time.Second, "deadline of one ClickHouse read of a replay")
	fs.DurationVar(&c.TransactionTimeout, "replay.transaction-timeout", 20*time.Second, "Kafka transaction timeout of the replay producers")
	fs.DurationVar(&c.BarrierTimeout, "replay.barrier-timeout", 10*time.Minute,
		"longest wait, before a replay starts, for the matcher to pass its range and the message ledger to hold every message of it (then the replay fails)")
}

// Validate checks the configuration of an enabled runner.
func (c Config) Validate() error {
	if c.PollInterval <= 0 || c.ChunkBlocks == 0 || c.ChunkMessages <= 0 || c.Concurrency <= 0 ||
		c.Timeout <= 0 || c.TransactionTimeout < time.Second || c.BarrierTimeout <= 0 {
		return errors.New("replay: --replay.poll-interval, --replay.chunk-blocks, --replay.chunk-messages, --replay.concurrency, " +
			"--replay.timeout and --replay.barrier-timeout must be positive, --replay.transaction-timeout at least 1s")
	}
	return nil
}
