// Package kafkautil builds franz-go clients the same way in every service.
//
// What stays with the caller: which topics it reads or writes, consumer group
// names, and commit discipline (commit only after the output succeeded).
package kafkautil

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"

	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/process"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Config says where the brokers are, how topics are named and how many
// copies of them the cluster keeps.
type Config struct {
	Brokers     string
	TopicPrefix string
	// ReplicationFactor and MinInsyncReplicas apply to the topics the
	// services create and align at start-up; 0 derives them from the number
	// of brokers (topics.Replication).
	ReplicationFactor int
	MinInsyncReplicas int
	// Metrics, when set (not a flag: the service sets its registry), makes
	// every client built from BaseOpts report franz-go's client metrics there
	// (ClientMetrics, labelled with the client id).
	Metrics prometheus.Registerer
}

// RegisterFlags adds the --kafka.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Brokers, "kafka.brokers", "127.0.0.1:9092", "comma-separated Kafka seed brokers")
	fs.StringVar(&c.TopicPrefix, "kafka.topic-prefix", "", "prefix for every topic name (lets several deployments or tests share a broker)")
	fs.IntVar(&c.ReplicationFactor, "kafka.replication-factor", 0, "replication factor of the topics moraine creates (0: 3, or the number of brokers when fewer)")
	fs.IntVar(&c.MinInsyncReplicas, "kafka.min-insync-replicas", 0, "min.insync.replicas of moraine's topics: acknowledged writes (acks=all) are on at least this many replicas (0: a majority of the replicas when the factor is 3 or more, else 1)")
}

// Validate rejects an empty broker list and impossible replication settings.
func (c Config) Validate() error {
	var errs []error
	if len(c.SeedBrokers()) == 0 {
		errs = append(errs, errors.New("kafka: --kafka.brokers is required"))
	}
	if c.ReplicationFactor < 0 || c.ReplicationFactor > 32767 {
		errs = append(errs, fmt.Errorf("kafka: --kafka.replication-factor %d must be 0 (derived) or a positive number", c.ReplicationFactor))
	}
	if c.MinInsyncReplicas < 0 || c.ReplicationFactor > 0 && c.MinInsyncReplicas > c.ReplicationFactor {
		errs = append(errs, fmt.Errorf("kafka: --kafka.min-insync-replicas %d must be 0 (derived) or at most the replication factor", c.MinInsyncReplicas))
	}
	return errors.Join(errs...)
}

// Replication is the topics' replication as configured (zeros derived at
// topic creation).
func (c Config) Replication() topics.Replication {
	return topics.Replication{Factor: int16(c.ReplicationFactor), MinInsyncReplicas: c.MinInsyncReplicas}
}

// SeedBrokers splits Brokers.
func (c Config) SeedBrokers() []string { return process.SplitList(c.Brokers) }

// Topic returns the full name of a topic from schemas/topics.
func (c Config) Topic(name string) string { return c.TopicPrefix + name }

// Topics returns every topic spec with the prefix applied.
func (c Config) Topics() []topics.Spec { return topics.WithPrefix(c.TopicPrefix, topics.All) }

// maxRecordBytes matches the topics' max.message.bytes: a block with call
// traces can be several MiB.
const maxRecordBytes = 16 << 20

// BaseOpts are the options every client gets. franz-go logs through kslog,
// warnings and errors only: its info lines (every metadata refresh, join and
// assignment) would drown the services' own.
func (c Config) BaseOpts(logger *slog.Logger, clientID string) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.SeedBrokers()...),
		kgo.ClientID(clientID),
		kgo.WithLogger(kslog.New(slog.New(warnAndAbove{logger.With("component", "kafka").Handler()}))),
		// Fail a request that hangs rather than wedge the pipeline.
		kgo.RequestTimeoutOverhead(10 * time.Second),
		kgo.RetryTimeout(30 * time.Second),
		kgo.WithDecompressor(newLZ4Decompressor(maxDecompressedBatch)),
	}
	if c.Metrics != nil {
		opts = append(opts, ClientMetrics(c.Metrics, clientID))
	}
	return opts
}

// ProducerOpts are for producers of large, ordered records. Idempotent
// production is franz-go's default, so a retried produce never duplicates;
// acks=all (also the default, spelled out because every durability claim
// rests on it) means an acknowledged record is on min.insync.replicas
// brokers.
func (c Config) ProducerOpts(logger *slog.Logger, clientID string) []kgo.Opt {
	return append(c.BaseOpts(logger, clientID),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(maxRecordBytes),
		kgo.WithCompressor(newLZ4Compressor()),
		// Small linger: batch what arrives together, but keep latency low.
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
}

// ConsumerOpts are for group consumers that commit only what they finished,
// themselves: CommitRecords after each batch.
func (c Config) ConsumerOpts(logger *slog.Logger, clientID, group string, topicNames ...string) []kgo.Opt {
	return c.groupOpts(logger, clientID, group, kgo.DisableAutoCommit(), topicNames...)
}

// MarkingConsumerOpts are for group consumers for which a batch read twice
// costs only repeated work: they mark what they finished
// (kgo.Client.MarkCommitRecords) and franz-go commits the marks every
// interval and when partitions are revoked (the group left, a rebalance),
// instead of an offset commit per batch, which during a backfill is one per
// record batch ingest produces. After a crash, what was finished within the
// last interval is read again.
func (c Config) MarkingConsumerOpts(logger *slog.Logger, clientID, group string, interval time.Duration, topicNames ...string) []kgo.Opt {
	return append(c.groupOpts(logger, clientID, group, kgo.AutoCommitMarks(), topicNames...),
		kgo.AutoCommitInterval(interval))
}

// groupOpts are a group consumer's options with commit, how it commits.
func (c Config) groupOpts(logger *slog.Logger, clientID, group string, commit kgo.Opt, topicNames ...string) []kgo.Opt {
	return append(c.BaseOpts(logger, clientID),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topicNames...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		commit,
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxBytes(64<<20),
		kgo.FetchMaxPartitionBytes(maxRecordBytes*2),
		// FIELD-NOTES: a short max wait keeps rebalances and tests quick.
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.HeartbeatInterval(1*time.Second),
		kgo.SessionTimeout(15*time.Second),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
}

// NewClient creates a client and waits, with backoff, until a broker answers
// or ctx ends.
func NewClient(ctx context.Context, logger *slog.Logger, opts ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	wait := obs.Retry{Initial: 200 * time.Millisecond, Max: 5 * time.Second, Log: logger, Msg: "kafka not reachable yet, retrying"}
	if err := wait.Do(ctx, func() error {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return cl.Ping(pctx)
	}); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka: no broker answered: %w", err)
	}
	return cl, nil
}

// EnsureTopics creates the missing topics and aligns the configs of the
// others (idempotent), then waits until the broker's metadata shows the
// ones it created, so a client started next does not find a topic missing.
// Existing topics with fewer replicas than the replication factor are
// logged: moving partitions is left to the operator
// (docs/operating-a-cluster.md).
//
// On a cluster, a topic another service has just created can be in one
// broker's metadata and not yet in another's, which then answers
// UNKNOWN_TOPIC_OR_PARTITION: such retriable errors are retried for a
// while.
func (c Config) EnsureTopics(ctx context.Context, cl *kgo.Client, logger *slog.Logger) error {
	var res topics.EnsureResult
	deadline := time.Now().Add(30 * time.Second)
	// Not logged: the caller reports what is still failing after the
	// deadline.
	err := obs.Retry{Initial: 100 * time.Millisecond, Max: 2 * time.Second}.Do(ctx, func() (err error) {
		res, err = topics.Ensure(ctx, kadm.NewClient(cl), c.Topics(), c.Replication())
		if err != nil && (!kerr.IsRetriable(err) || time.Now().After(deadline)) {
			return obs.Permanent(err)
		}
		return err
	})
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	if len(res.UnderReplicated) > 0 {
		logger.Warn("topics have fewer replicas than the replication factor; reassign their partitions to add replicas",
			"topics", res.UnderReplicated, "replication_factor", res.Replication.Factor)
	}
	if err != nil || len(res.Created) == 0 {
		return err
	}
	return topics.WaitVisible(ctx, cl, c.Topics())
}

// Ping reports whether a broker answers, for readiness checks.
func Ping(cl *kgo.Client) obs.ReadyCheck {
	return func(ctx context.Context) error {
		if err := cl.Ping(ctx); err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
		return nil
	}
}

// warnAndAbove passes a handler's records of level Warn and above.
type warnAndAbove struct{ slog.Handler }

func (h warnAndAbove) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnAndAbove) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnAndAbove{h.Handler.WithAttrs(attrs)}
}

func (h warnAndAbove) WithGroup(name string) slog.Handler {
	return warnAndAbove{h.Handler.WithGroup(name)}
}
