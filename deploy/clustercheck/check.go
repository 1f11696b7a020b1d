package clustercheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/moraine-data/moraine/pkg/process"
)

// Limits bound what "within seconds" means for each recovery. They are
// generous for a 2-core machine shared with builds; the printed figures are
// the measurement, the limits only catch a cluster that does not recover.
type Limits struct {
	// ReplicaWritable: from a killed ClickHouse replica's restart until it
	// accepts an INSERT.
	ReplicaWritable time.Duration
	// ReplicaCaughtUp: from that restart until it holds every row written
	// while it was down and its replication runs (its old ZooKeeper session
	// must expire first: 6 s in the profile's config).
	ReplicaCaughtUp time.Duration
	// Replicated: until a row written on one replica is read on the other.
	Replicated time.Duration
	// AckWait: the longest an acks=all send may wait while a broker dies
	// (the controller fences a dead broker after broker.session.timeout.ms,
	// 9 s by default, before a new leader takes its partitions).
	AckWait time.Duration
	// BrokerInSync: from a killed broker's restart until it is back in the
	// topic's in-sync replicas.
	BrokerInSync time.Duration
}

// DefaultLimits are the limits of `make cluster-check`.
func DefaultLimits() Limits {
	return Limits{
		ReplicaWritable: 30 * time.Second,
		ReplicaCaughtUp: 30 * time.Second,
		Replicated:      10 * time.Second,
		AckWait:         30 * time.Second,
		BrokerInSync:    60 * time.Second,
	}
}

// Options configure Run.
type Options struct {
	Stack  Stack
	Limits Limits
	// Out receives one line per step passed, with its figures.
	Out io.Writer
	// SkipClickHouse, SkipKafka leave out a part (to check the other alone).
	SkipClickHouse, SkipKafka bool
}

// check carries one run's state: the report and what must be undone.
type check struct {
	o      Options
	suffix string
	// killed holds nodes this run SIGKILLed and has not seen start again:
	// they are started at the end whatever happened.
	killed map[string]bool
}

func (c *check) say(format string, args ...any) {
	fmt.Fprintf(c.o.Out, format+"\n", args...)
}

// kill SIGKILLs a node and remembers to bring it back.
func (c *check) kill(ctx context.Context, node string) error {
	c.killed[node] = true
	return c.o.Stack.Kill(ctx, node)
}

// start starts a killed node again and returns how long the start took.
func (c *check) start(ctx context.Context, node string) (time.Duration, error) {
	took, err := c.o.Stack.Start(ctx, node)
	if err == nil {
		delete(c.killed, node)
	}
	return took, err
}

// restore starts whatever this run killed and did not start again.
func (c *check) restore(ctx context.Context) error {
	var errs []error
	for node := range c.killed {
		c.say("restoring %s", node)
		if _, err := c.start(ctx, node); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Run checks the cluster; it returns the first failure. Whatever it did to
// the cluster is undone before it returns.
func Run(ctx context.Context, o Options) (err error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	c := &check{o: o, suffix: hex.EncodeToString(b[:]), killed: map[string]bool{}}
	defer func() {
		// The caller's context may be what ended the run: restoring gets its own.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
		defer cancel()
		if rerr := c.restore(rctx); rerr != nil {
			err = errors.Join(err, fmt.Errorf("restoring killed nodes: %w", rerr))
		}
	}()

	status, err := o.Stack.Status(ctx)
	if err != nil {
		return fmt.Errorf("nodes: not every node is up: %w", err)
	}
	c.say("nodes: %d up", strings.Count(status, ": running ("))
	env, err := o.Stack.Env(ctx)
	if err != nil {
		return err
	}

	if !o.SkipClickHouse {
		addrs := process.SplitList(env["MORAINE_CLICKHOUSE_ADDR"])
		cluster := env["MORAINE_CLICKHOUSE_CLUSTER"]
		if len(addrs) == 0 || cluster == "" {
			return errors.New("stack.sh cluster env: MORAINE_CLICKHOUSE_ADDR or MORAINE_CLICKHOUSE_CLUSTER missing")
		}
		if err := c.clickhouse(ctx, addrs, cluster); err != nil {
			return fmt.Errorf("clickhouse: %w", err)
		}
	}
	if !o.SkipKafka {
		brokers := process.SplitList(env["MORAINE_KAFKA_BROKERS"])
		if len(brokers) == 0 {
			return errors.New("stack.sh cluster env: MORAINE_KAFKA_BROKERS missing")
		}
		if err := c.kafka(ctx, brokers); err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
	}
	return nil
}

// poll calls f until it reports done, an error, or limit passes; it returns
// how long it took. The last error of f is kept for the timeout's message.
func poll(ctx context.Context, limit, every time.Duration, f func(context.Context) (bool, error)) (time.Duration, error) {
	t0 := time.Now()
	var last error
	for {
		done, err := f(ctx)
		if done {
			return time.Since(t0), nil
		}
		if err != nil {
			last = err
		}
		if time.Since(t0) > limit {
			if last != nil {
				return time.Since(t0), fmt.Errorf("not within %s (last error: %w)", limit, last)
			}
			return time.Since(t0), fmt.Errorf("not within %s", limit)
		}
		select {
		case <-ctx.Done():
			return time.Since(t0), ctx.Err()
		case <-time.After(every):
		}
	}
}

// secs formats a duration as seconds with one decimal, as the report shows them.
func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
