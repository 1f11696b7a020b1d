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

// Config tunes publishing. The query service's reconciler
// (query/internal/webhooks/reconcile) adds its own settings to it.
type Config struct {
	// ProduceTimeout bounds the synchronous produce of a change; past it
	// the change is acknowledged anyway and the reconciler publishes it.
	ProduceTimeout time.Duration
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	return Config{ProduceTimeout: 3 * time.Second}
}

// RegisterFlags adds --watch.produce-timeout.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.ProduceTimeout, "watch.produce-timeout", DefaultConfig().ProduceTimeout, "how long a webhook change waits for Kafka before it is acknowledged anyway (the reconciler then publishes it)")
}

// Validate checks the values.
func (c Config) Validate() error {
	if c.ProduceTimeout <= 0 {
		return errors.New("watch: --watch.produce-timeout must be positive")
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
