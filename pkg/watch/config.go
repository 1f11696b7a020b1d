package watch

import (
	"errors"
	"flag"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Config tunes publishing and reconciliation.
type Config struct {
	// ProduceTimeout bounds the synchronous produce of a request; past it
	// the request is acknowledged anyway and the reconciler publishes.
	ProduceTimeout time.Duration
	// ReconcileInterval is the period of the incremental pass.
	ReconcileInterval time.Duration
	// FullReconcileInterval is the period of the full pass (every key).
	FullReconcileInterval time.Duration
	// Lookback is how far back (by row version) the incremental pass looks
	// for address changes; older unpublished rows are found by the full
	// pass, or earlier when this process knows it failed to publish them.
	Lookback time.Duration
	// Grace is how old a row must be before the reconciler publishes it for
	// a writer that has not: younger rows may still be in flight.
	Grace time.Duration
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	return Config{
		ProduceTimeout:        3 * time.Second,
		ReconcileInterval:     5 * time.Second,
		FullReconcileInterval: 10 * time.Minute,
		Lookback:              10 * time.Minute,
		Grace:                 2 * time.Second,
	}
}

// RegisterFlags adds the --watch.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.DurationVar(&c.ProduceTimeout, "watch.produce-timeout", d.ProduceTimeout, "how long a webhook change waits for Kafka before it is acknowledged anyway (the reconciler then publishes it)")
	fs.DurationVar(&c.ReconcileInterval, "watch.reconcile-interval", d.ReconcileInterval, "period of the incremental ClickHouse-to-topic reconciliation")
	fs.DurationVar(&c.FullReconcileInterval, "watch.full-reconcile-interval", d.FullReconcileInterval, "period of the full reconciliation (every webhook, address and account)")
	fs.DurationVar(&c.Lookback, "watch.lookback", d.Lookback, "how far back the incremental reconciliation looks for address changes")
	fs.DurationVar(&c.Grace, "watch.grace", d.Grace, "age a change must reach before the reconciler publishes it for its writer")
}

// Validate checks the values.
func (c Config) Validate() error {
	switch {
	case c.ProduceTimeout <= 0:
		return errors.New("watch: --watch.produce-timeout must be positive")
	case c.ReconcileInterval <= 0:
		return errors.New("watch: --watch.reconcile-interval must be positive")
	case c.FullReconcileInterval < c.ReconcileInterval:
		return errors.New("watch: --watch.full-reconcile-interval must not be below --watch.reconcile-interval")
	case c.Lookback < c.ReconcileInterval:
		return errors.New("watch: --watch.lookback must not be below --watch.reconcile-interval")
	case c.Grace < 0:
		return errors.New("watch: --watch.grace must not be negative")
	}
	return nil
}

// Partitioner sends every record of a webhook to the partition of its id
// (codec.WatchPartitionKey), so a webhook's records stay in order.
func Partitioner() kgo.Partitioner {
	return kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
		return func(r *kgo.Record, n int) int {
			h := fnv.New32a()
			h.Write(codec.WatchPartitionKey(r.Key))
			return int(h.Sum32() % uint32(n))
		}
	})
}

// ProducerOpts are the options of the address-watch producer: kafkautil's
// producer options with the webhook partitioner and a delivery timeout.
func ProducerOpts(k kafkautil.Config, logger *slog.Logger, clientID string, cfg Config) []kgo.Opt {
	return append(k.ProducerOpts(logger, clientID),
		kgo.RecordPartitioner(Partitioner()),
		kgo.DefaultProduceTopic(k.Topic(topics.AddressWatch)),
		// A record not delivered in this time fails instead of being
		// retried for ever; the reconciler republishes what failed.
		kgo.RecordDeliveryTimeout(max(2*cfg.ProduceTimeout, 10*time.Second)),
	)
}
