// Package lease decides which ingest instance writes each chain, so that
// several instances can run for the same chains: exactly one writes a
// chain at any time, and a standby takes over within seconds when it dies,
// stops or is cut off from Kafka.
//
// # Mechanism
//
// Two existing Kafka mechanisms, no consensus of our own:
//
//   - Who should write: a consumer group. Every instance joins the group
//     --ingest.lease-group on the lease topic (schemas/topics.IngestLeases,
//     which carries no records). A chain belongs to the lease partition its
//     decimal id hashes to (murmur2, like the blocks topic's keys), and the
//     instance the group assigns that partition writes the chain.
//     franz-go's default cooperative-sticky balancer spreads the partitions
//     over the instances and moves only the ones it must. A graceful stop
//     leaves the group, so a standby takes over at once; a crashed or
//     partitioned instance is dropped when its session times out
//     (--ingest.lease-session-timeout).
//   - Who can write: Kafka transactions. Each chain is produced by a
//     transactional producer whose transactional.id is the chain's
//     (Writer). A new writer registers that id first (InitProducerID),
//     which aborts the previous writer's open transaction and fences it:
//     from then on every produce or commit of the former writer fails, even
//     if it has not yet noticed that it lost the lease. Consumers read
//     committed records only, so nothing of the former writer's last,
//     aborted transaction is ever seen, and the new writer reads its
//     checkpoint after the fence, when the log no longer changes under it.
//
// A writer that finds itself fenced while the group still gives this
// instance the lease stops and starts again after a session timeout: by
// then a stale assignment has been corrected, and if the lease is still
// here the new writer fences the other one. Two instances can therefore
// never both produce a chain, and a chain whose lease is held is written.
//
// # Metrics
//
//	moraine_ingest_chain_writer{chain}                        1 while this instance writes the chain
//	moraine_ingest_lease_changes_total{chain,event}           acquired, released, lost, fenced
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
)

// ErrFenced is returned by a Writer's Run when another instance took the
// chain over (its producer was fenced).
var ErrFenced = errors.New("fenced: another instance writes this chain")

// Config configures the lease group.
type Config struct {
	// Topic is the lease topic's full name (prefix applied).
	Topic string
	// Group is the consumer group's full name (prefix applied).
	Group string
	// SessionTimeout is how long the group waits for a silent instance
	// before its chains move: the takeover time after a crash. The broker
	// bounds it (group.min.session.timeout.ms, 6 s by default).
	SessionTimeout time.Duration
	// HeartbeatInterval is how often an instance tells the group it lives.
	HeartbeatInterval time.Duration
	// StopTimeout bounds how long a chain's writer may take to stop when
	// its lease moves (it finishes producing what it fetched).
	StopTimeout time.Duration
}

func (c *Config) defaults() {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 6 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = time.Second
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = 15 * time.Second
	}
}

// RunChain writes one chain until ctx ends (nil), the writer is fenced
// (an error wrapping ErrFenced) or it fails for good (any other error,
// which stops the instance).
type RunChain func(ctx context.Context, chain string) error

// Deps are the manager's collaborators.
type Deps struct {
	Logger *slog.Logger
	// KafkaOpts are the base client options (seed brokers, logger).
	KafkaOpts []kgo.Opt
	// Registerer receives the metrics (nil: none).
	Registerer prometheus.Registerer
}

// Manager holds this instance's leases and runs a writer for each chain
// whose lease it holds.
type Manager struct {
	cfg    Config
	deps   Deps
	logger *slog.Logger
	chains map[int32][]string // lease partition -> chains
	run    RunChain
	m      *metrics

	mu      sync.Mutex
	writing map[string]*term // chain -> its running writer
	failed  chan error       // a writer failed for good
}

// term is one run of a chain's writer while this instance holds the lease.
type term struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// New validates cfg; it does no I/O. chains are the decimal chain ids this
// instance is configured for; partitions is the lease topic's partition
// count.
func New(cfg Config, deps Deps, chains []string, partitions int, run RunChain) (*Manager, error) {
	cfg.defaults()
	switch {
	case deps.Logger == nil:
		return nil, errors.New("lease: Deps.Logger is required")
	case cfg.Topic == "" || cfg.Group == "":
		return nil, errors.New("lease: Config.Topic and Config.Group are required")
	case partitions <= 0:
		return nil, fmt.Errorf("lease: %d lease partitions", partitions)
	case run == nil:
		return nil, errors.New("lease: a RunChain is required")
	case cfg.HeartbeatInterval >= cfg.SessionTimeout:
		return nil, fmt.Errorf("lease: heartbeat interval %s must be below the session timeout %s", cfg.HeartbeatInterval, cfg.SessionTimeout)
	}
	m := &Manager{
		cfg: cfg, deps: deps, run: run,
		logger:  deps.Logger.With("component", "lease"),
		chains:  map[int32][]string{},
		writing: map[string]*term{},
		failed:  make(chan error, 1),
		m:       newMetrics(deps.Registerer),
	}
	for _, c := range chains {
		p := PartitionOf(c, partitions)
		m.chains[p] = append(m.chains[p], c)
		m.m.init(c)
	}
	return m, nil
}

// PartitionOf is the lease partition of a chain among n: the partitioner of
// keyed records (franz-go's sticky key partitioner, murmur2 like the Java
// client), so every instance maps a chain to the same lease.
func PartitionOf(chain string, n int) int32 {
	p := kgo.StickyKeyPartitioner(nil).ForTopic("")
	return int32(p.Partition(&kgo.Record{Key: []byte(chain)}, n))
}

// Writing reports whether this instance writes chain now.
func (m *Manager) Writing(chain string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.writing[chain]
	return ok
}

// Run joins the lease group and runs the writers of the chains it is given
// until ctx ends or a writer fails for good. On return every writer has
// stopped and the group was left, so a standby takes over at once.
func (m *Manager) Run(ctx context.Context) error {
	opts := append(append([]kgo.Opt(nil), m.deps.KafkaOpts...),
		kgo.ConsumerGroup(m.cfg.Group),
		kgo.ConsumeTopics(m.cfg.Topic),
		kgo.SessionTimeout(m.cfg.SessionTimeout),
		kgo.HeartbeatInterval(m.cfg.HeartbeatInterval),
		// The revoke callback waits for writers to stop; the group must
		// wait for it.
		kgo.RebalanceTimeout(m.cfg.StopTimeout+30*time.Second),
		kgo.OnPartitionsAssigned(m.assigned),
		kgo.OnPartitionsRevoked(m.revoked),
		kgo.OnPartitionsLost(m.lost),
		// The lease topic holds no records; nothing is committed.
		kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(time.Second),
	)
	cl, err := kafkautil.NewClient(ctx, m.logger, opts...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("lease: %w", err)
	}
	m.logger.Info("joining the lease group", "group", m.cfg.Group, "topic", m.cfg.Topic)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		// Polling keeps the consumer running; the topic is empty.
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
			fs.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.Canceled) {
					m.logger.Warn("lease group fetch error", "topic", t, "partition", p, "err", err)
				}
			})
		}
	}()
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-m.failed:
	}
	// Stop the writers before leaving, so the standby that takes over finds
	// every record of this instance acknowledged.
	m.stopAll(m.cfg.StopTimeout, "released")
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	cl.LeaveGroupContext(lctx)
	cl.Close()
	<-polled
	return runErr
}

func (m *Manager) assigned(_ context.Context, _ *kgo.Client, got map[string][]int32) {
	for _, p := range got[m.cfg.Topic] {
		for _, c := range m.chains[p] {
			m.start(c)
		}
	}
}

func (m *Manager) revoked(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	m.stop(lost[m.cfg.Topic], m.cfg.StopTimeout, "released")
}

// lost: the session expired (a crash of the coordinator, or this instance
// cut off). Another instance may write the chains already; their writers
// are fenced if they still try. Stop them quickly.
func (m *Manager) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	m.stop(lost[m.cfg.Topic], time.Second, "lost")
}

func (m *Manager) start(chain string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.writing[chain]; ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &term{cancel: cancel, done: make(chan struct{})}
	m.writing[chain] = t
	m.m.writer.WithLabelValues(chain).Set(1)
	m.m.changes.WithLabelValues(chain, "acquired").Inc()
	m.logger.Info("lease acquired: writing the chain", "chain_id", chain)
	go m.runTerm(ctx, chain, t)
}

func (m *Manager) runTerm(ctx context.Context, chain string, t *term) {
	defer close(t.done)
	// Fenced: another instance writes the chain. If the group corrects a
	// stale assignment, this term is revoked meanwhile; if the lease is
	// still here after a session timeout, take the chain back. The wait is
	// a quarter longer than the timeout, as Backoff's jitter shortens it by
	// up to a fifth: never less than the timeout.
	wait := m.cfg.SessionTimeout * 5 / 4
	again := obs.Retry{Initial: wait, Max: wait, Log: m.logger,
		Msg: "fenced by another writer of the chain; retrying if the lease is still here", Attrs: []any{"chain_id", chain, "after", m.cfg.SessionTimeout}}
	err := again.Do(ctx, func() error {
		err := m.run(ctx, chain)
		if errors.Is(err, ErrFenced) && ctx.Err() == nil {
			m.m.changes.WithLabelValues(chain, "fenced").Inc()
			return err
		}
		return obs.Permanent(err) // nil: stopped by itself, nothing more to do
	})
	if err != nil && ctx.Err() == nil {
		select {
		case m.failed <- fmt.Errorf("chain %s: %w", chain, err):
		default:
		}
	}
}

// stop stops the writers of the chains of the given lease partitions and
// waits up to timeout for them.
func (m *Manager) stop(partitions []int32, timeout time.Duration, event string) {
	var chains []string
	for _, p := range partitions {
		chains = append(chains, m.chains[p]...)
	}
	m.stopChains(chains, timeout, event)
}

func (m *Manager) stopAll(timeout time.Duration, event string) {
	m.mu.Lock()
	chains := make([]string, 0, len(m.writing))
	for c := range m.writing {
		chains = append(chains, c)
	}
	m.mu.Unlock()
	sort.Strings(chains)
	m.stopChains(chains, timeout, event)
}

func (m *Manager) stopChains(chains []string, timeout time.Duration, event string) {
	var stopping []*term
	m.mu.Lock()
	for _, c := range chains {
		t, ok := m.writing[c]
		if !ok {
			continue
		}
		delete(m.writing, c)
		t.cancel()
		stopping = append(stopping, t)
		m.m.writer.WithLabelValues(c).Set(0)
		m.m.changes.WithLabelValues(c, event).Inc()
		m.logger.Info("lease "+event+": stopping the chain's writer", "chain_id", c)
	}
	m.mu.Unlock()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, t := range stopping {
		select {
		case <-t.done:
		case <-deadline.C:
			// The writer's own shutdown timeout bounds it too; a late one
			// is fenced by the next writer anyway.
			m.logger.Warn("a chain's writer is still stopping; moving on", "timeout", timeout)
			return
		}
	}
}

type metrics struct {
	writer  *prometheus.GaugeVec
	changes *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := obs.NewMetrics(reg, "ingest")
	return &metrics{
		writer: f.GaugeVec("chain_writer", "1 while this instance holds the chain's lease and writes it.", "chain"),
		changes: f.CounterVec("lease_changes_total",
			"Changes of a chain's lease on this instance: acquired, released, lost, fenced.", "chain", "event"),
	}
}

func (m *metrics) init(chain string) {
	m.writer.WithLabelValues(chain).Set(0)
	for _, e := range []string{"acquired", "released", "lost", "fenced"} {
		m.changes.WithLabelValues(chain, e)
	}
}
