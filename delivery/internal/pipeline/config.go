package pipeline

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/moraine-data/moraine/delivery/internal/dlog"
	"github.com/moraine-data/moraine/delivery/internal/sign"
	"github.com/moraine-data/moraine/pkg/guard"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Schedule is the retry schedule: Schedule[i] is the wait between the end
// of failed attempt i+1 and attempt i+2. Its length plus one is the number
// of attempts a message gets.
type Schedule []time.Duration

// DefaultSchedule is the hosted service's (CONTRACT.md section 5.5):
// attempt 2 ten seconds after attempt 1, then 1 min, 5 min, 10 min, 30 min,
// 2 h, 6 h, 12 h and 24 h; ten attempts in all.
func DefaultSchedule() Schedule {
	return Schedule{10 * time.Second, time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute,
		2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}
}

// String implements flag.Value.
func (s *Schedule) String() string {
	parts := make([]string, len(*s))
	for i, d := range *s {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

// Set implements flag.Value: comma-separated Go durations.
func (s *Schedule) Set(v string) error {
	var out Schedule
	for _, p := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return fmt.Errorf("retry schedule %q: %w", v, err)
		}
		out = append(out, d)
	}
	*s = out
	return nil
}

// Attempts is the number of attempts a message gets.
func (s Schedule) Attempts() int { return len(s) + 1 }

// Config tunes the pipeline.
type Config struct {
	// Group is the Kafka consumer group of every delivery instance.
	Group string
	// AttemptTimeout bounds one POST.
	AttemptTimeout time.Duration
	Schedule       Schedule
	// MaxInFlight bounds concurrent attempts of the process; MaxPerHost
	// those to one endpoint host (host:port).
	MaxInFlight int
	MaxPerHost  int
	// Messages wait for a busy host for at most HostQueueTimeout, and when
	// the host is slow (attempts average over min(1 s, AttemptTimeout/2))
	// at most MaxHostQueue of them; beyond either bound, a message is
	// parked on the first retry level (without counting an attempt), so a
	// slow endpoint never fills a partition's window.
	MaxHostQueue     int
	HostQueueTimeout time.Duration
	// PartitionWindow bounds, per partition, the records dispatched and not
	// yet done (commit goes in offset order), and the records fetched ahead.
	PartitionWindow int
	// KeyEncoding reads the shared secret as the HMAC key (hex or utf8).
	KeyEncoding string
	// AllowPrivateTargets lets deliveries reach loopback, private and
	// link-local addresses (development stack, tests).
	AllowPrivateTargets bool
	// FreeDoubleFailures is the free plan's number of messages failing
	// attempts 1 and 2 that deactivates a webhook.
	FreeDoubleFailures int
	// CommitInterval is how often finished offsets are committed.
	CommitInterval time.Duration
	// SessionTimeout is the consumer group session timeout: how long a
	// crashed instance's partitions wait before another takes them.
	SessionTimeout time.Duration
	// DrainTimeout bounds the wait for attempts in flight when partitions
	// are revoked or the service stops.
	DrainTimeout time.Duration
	// Replays (the replay topic) have attempts of their own: at most
	// ReplayMaxInFlight in this process and ReplayMaxPerHost per endpoint
	// host, beside (never taking) the live messages' MaxInFlight and
	// MaxPerHost, so a replay never delays a live message; a failed
	// replayed message is tried again after each wait of ReplaySchedule,
	// holding its record, and then given up (a replay can be run again).
	ReplayMaxInFlight int
	ReplayMaxPerHost  int
	ReplaySchedule    Schedule
	Log               dlog.Config
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	return Config{
		Group:              "moraine-delivery",
		AttemptTimeout:     10 * time.Second,
		Schedule:           DefaultSchedule(),
		MaxInFlight:        512,
		MaxPerHost:         16,
		MaxHostQueue:       256,
		HostQueueTimeout:   10 * time.Second,
		PartitionWindow:    1024,
		KeyEncoding:        string(sign.Hex),
		FreeDoubleFailures: 6,
		CommitInterval:     time.Second,
		SessionTimeout:     15 * time.Second,
		DrainTimeout:       12 * time.Second,
		ReplayMaxInFlight:  32,
		ReplayMaxPerHost:   4,
		ReplaySchedule:     Schedule{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute},
		Log: dlog.Config{FlushInterval: 200 * time.Millisecond, Batch: 5000, Buffer: 100_000,
			Retention: 30 * 24 * time.Hour, RetentionInterval: time.Hour},
	}
}

// RegisterFlags adds the --delivery.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	*c = d
	fs.StringVar(&c.Group, "delivery.group", d.Group, "Kafka consumer group of the delivery instances (--kafka.topic-prefix is prepended)")
	fs.DurationVar(&c.AttemptTimeout, "delivery.timeout", d.AttemptTimeout, "timeout of one delivery attempt; any 2xx within it is success")
	fs.Var(&c.Schedule, "delivery.retry-schedule", "waits before attempts 2, 3, ... (comma-separated durations, at most 9; the number of attempts is one more)")
	fs.IntVar(&c.MaxInFlight, "delivery.max-in-flight", d.MaxInFlight, "most delivery attempts in flight in this process")
	fs.IntVar(&c.MaxPerHost, "delivery.max-per-host", d.MaxPerHost, "most delivery attempts in flight to one endpoint host:port")
	fs.IntVar(&c.MaxHostQueue, "delivery.max-host-queue", d.MaxHostQueue, "most messages waiting for a slow endpoint host (attempts averaging over min(1s, timeout/2)) before further ones are parked on the first retry level")
	fs.DurationVar(&c.HostQueueTimeout, "delivery.host-queue-timeout", d.HostQueueTimeout, "longest wait for a busy endpoint host before the message is parked on the first retry level (no attempt counted)")
	fs.IntVar(&c.PartitionWindow, "delivery.partition-window", d.PartitionWindow, "records per partition in flight (and fetched ahead) before the partition waits")
	fs.StringVar(&c.KeyEncoding, "delivery.signature-key-encoding", d.KeyEncoding, "HMAC key of the signatures: hex (the shared secret hex-decoded; the docs' reading) or utf8 (its characters; ChainKit validateWebhook's reading)")
	guard.RegisterFlags(fs, &c.AllowPrivateTargets)
	fs.IntVar(&c.FreeDoubleFailures, "delivery.free-double-failures", d.FreeDoubleFailures, "free plan: the number of messages failing attempts 1 and 2 that deactivates a webhook")
	fs.DurationVar(&c.CommitInterval, "delivery.commit-interval", d.CommitInterval, "how often offsets of finished messages are committed")
	fs.DurationVar(&c.SessionTimeout, "delivery.session-timeout", d.SessionTimeout, "Kafka consumer group session timeout: how soon a crashed instance's partitions move to another (the broker allows 6s to 5m by default)")
	fs.DurationVar(&c.DrainTimeout, "delivery.drain-timeout", d.DrainTimeout, "longest wait for attempts in flight when partitions move or the service stops (unfinished ones are redelivered)")
	fs.IntVar(&c.ReplayMaxInFlight, "delivery.replay-max-in-flight", d.ReplayMaxInFlight, "most attempts of replayed messages in flight in this process, beside --delivery.max-in-flight (live messages never wait for them)")
	fs.IntVar(&c.ReplayMaxPerHost, "delivery.replay-max-per-host", d.ReplayMaxPerHost, "most attempts of replayed messages in flight to one endpoint host:port, beside --delivery.max-per-host")
	fs.Var(&c.ReplaySchedule, "delivery.replay-retry-schedule", "waits before attempts 2, 3, ... of a replayed message, which holds its record meanwhile, then is given up (comma-separated durations)")
	fs.DurationVar(&c.Log.FlushInterval, "delivery.log-flush-interval", d.Log.FlushInterval, "how often buffered delivery-log rows are inserted into ClickHouse")
	fs.IntVar(&c.Log.Batch, "delivery.log-batch", d.Log.Batch, "delivery-log rows that trigger an insert before the interval")
	fs.IntVar(&c.Log.Buffer, "delivery.log-buffer", d.Log.Buffer, "delivery-log rows buffered before new ones are dropped")
	fs.DurationVar(&c.Log.Retention, "delivery.log-retention", d.Log.Retention, "keep delivery-log rows at least this long; whole months older are dropped (the table holds up to a month more). 0: keep forever")
	fs.DurationVar(&c.Log.RetentionInterval, "delivery.log-retention-interval", d.Log.RetentionInterval, "how often the delivery log's old months are looked for")
}

// Validate checks the values.
func (c Config) Validate() error {
	var errs []error
	if c.Group == "" {
		errs = append(errs, errors.New("--delivery.group is required"))
	}
	if c.AttemptTimeout <= 0 || c.HostQueueTimeout <= 0 || c.CommitInterval <= 0 || c.DrainTimeout <= 0 || c.SessionTimeout <= 0 {
		errs = append(errs, errors.New("--delivery.timeout, host-queue-timeout, commit-interval, session-timeout and drain-timeout must be positive"))
	}
	if len(c.Schedule) < 1 || len(c.Schedule) > topics.DeliveryRetryLevels {
		errs = append(errs, fmt.Errorf("--delivery.retry-schedule needs 1 to %d waits", topics.DeliveryRetryLevels))
	}
	for _, d := range c.Schedule {
		if d <= 0 {
			errs = append(errs, errors.New("--delivery.retry-schedule waits must be positive"))
			break
		}
	}
	if c.MaxInFlight < 1 || c.MaxPerHost < 1 || c.MaxHostQueue < 0 || c.PartitionWindow < 1 || c.FreeDoubleFailures < 1 {
		errs = append(errs, errors.New("--delivery.max-in-flight, max-per-host, partition-window and free-double-failures must be positive"))
	}
	if c.ReplayMaxInFlight < 1 || c.ReplayMaxPerHost < 1 {
		errs = append(errs, errors.New("--delivery.replay-max-in-flight and replay-max-per-host must be positive"))
	}
	for _, d := range c.ReplaySchedule {
		if d <= 0 {
			errs = append(errs, errors.New("--delivery.replay-retry-schedule waits must be positive"))
			break
		}
	}
	if _, err := sign.ParseEncoding(c.KeyEncoding); err != nil {
		errs = append(errs, fmt.Errorf("--delivery.signature-key-encoding: %w", err))
	}
	if err := c.Log.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("pipeline: %w", errors.Join(errs...))
	}
	return nil
}
