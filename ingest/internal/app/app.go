package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/ingest/internal/follow"
	"github.com/moraine-data/moraine/ingest/internal/lease"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/process"
	"github.com/moraine-data/moraine/pkg/rpc"
	"github.com/moraine-data/moraine/schemas/topics"
)

// clientID names ingest's Kafka clients.
const clientID = "moraine-ingest"

// App is the ingest service: one follower per chain, the producer and the
// ops server.
type App struct {
	cfg    Config
	logger *slog.Logger
	reg    *prometheus.Registry
	chains []chains.Chain
	health *obs.Health

	ops     atomic.Pointer[obs.Server]
	mu      sync.Mutex
	started bool // the lease group is being joined
}

// Deps are injected by main (or a test).
type Deps = process.Deps

// New validates cfg and loads the chain file; it does no network I/O.
func New(cfg Config, deps Deps) (*App, error) {
	if err := deps.Validate(); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	logger, reg := deps.Logger, deps.Registry
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	file, err := chains.Load(cfg.ChainsFile)
	if err != nil {
		return nil, err
	}
	selected, err := cfg.selectChains(file)
	if err != nil {
		return nil, err
	}
	cfg.Kafka.Metrics = reg // franz-go's client metrics (kafkautil.ClientMetrics)
	return &App{cfg: cfg, logger: logger, reg: reg, chains: selected, health: obs.NewHealth()}, nil
}

// Ready runs the readiness checks: Kafka answers, and every chain's node
// answered, its checkpoint was recovered and it is within --ingest.ready-lag
// blocks of the head.
func (a *App) Ready(ctx context.Context) error {
	failed := a.health.Check(ctx)
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("not ready: %v", failed)
}

// OpsAddr is the ops server's address once Run has bound it (""
// before).
func (a *App) OpsAddr() string { return a.ops.Load().Addr() }

// Run starts the ops server, connects to Kafka, creates the topics and
// runs one follower per chain until ctx ends or a follower fails. Shutdown
// order: the followers stop fetching and produce what they fetched, the
// producer flushes (bounded by --shutdown.timeout), then the ops server
// stops.
func (a *App) Run(ctx context.Context) error {
	a.health.Add("startup", func(context.Context) error {
		a.mu.Lock()
		defer a.mu.Unlock()
		if !a.started {
			return errors.New("starting: connecting to Kafka")
		}
		return nil
	})
	srv, err := obs.Listen(a.cfg.Ops.ListenAddress, obs.OpsMux(a.reg, a.health), a.logger)
	if err != nil {
		return fmt.Errorf("ingest: ops listener: %w", err)
	}
	a.ops.Store(srv)
	a.logger.Info("ops server listening", "addr", srv.Addr())

	// The ops server outlives the followers so that /metrics shows the
	// shutdown.
	opsCtx, stopOps := context.WithCancel(context.WithoutCancel(ctx))
	opsDone := make(chan error, 1)
	go func() { opsDone <- srv.Serve(opsCtx, 5*time.Second) }()
	defer func() {
		stopOps()
		<-opsDone
	}()

	err = a.runFollowers(ctx)
	if ctx.Err() != nil && err == nil {
		a.logger.Info("ingest stopped")
	}
	return err
}

func (a *App) runFollowers(ctx context.Context) error {
	kopts := a.cfg.Kafka.BaseOpts(a.logger, clientID)
	cl, err := kafkautil.NewClient(ctx, a.logger, kopts...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer cl.Close()
	if err := a.cfg.Kafka.EnsureTopics(ctx, cl, a.logger); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("ingest: create topics: %w", err)
	}
	a.health.Add("kafka", kafkautil.Ping(cl))
	leaseSpec, _ := topics.Lookup(a.cfg.Kafka.Topics(), topics.IngestLeases)

	rpcMetrics := rpc.NewMetrics(a.reg)
	followMetrics := follow.NewMetrics(a.reg)
	byID := map[string]*chainRunner{}
	var ids []string
	for _, ch := range a.chains {
		pcfg := rpc.ForChain(ch)
		pcfg.Timeout, pcfg.PollInterval, pcfg.Logger = a.cfg.RPCTimeout, a.cfg.PollInterval, a.logger
		pool, err := rpc.NewPool(pcfg, rpcMetrics)
		if err != nil {
			return err
		}
		var nodes []string
		for _, n := range ch.RPCNodes() {
			rpcMetrics.Init(ch.EVMChainID, n.Name, "eth_getBlockByNumber", "eth_getBlockReceipts", "debug_traceBlockByNumber", "batch")
			nodes = append(nodes, n.Name+"="+rpc.Redact(n.URL))
		}
		r := &chainRunner{app: a, chain: ch, rpc: pool, metrics: followMetrics, kafkaOpts: kopts}
		byID[ch.EVMChainID] = r
		ids = append(ids, ch.EVMChainID)
		a.health.Add("chain "+ch.EVMChainID, r.ready)
		a.logger.Info("configured chain", "chain_id", ch.EVMChainID, "name", ch.Name, "nodes", strings.Join(nodes, " "),
			"ws_url", rpc.Redact(ch.WSURL), "traces", ch.Traces, "replay", ch.Replay, "start_block", ch.StartBlock,
			"skip_checks", ch.SkipChecks)
	}
	leases, err := lease.New(lease.Config{
		Topic:          leaseSpec.Name,
		Group:          a.cfg.Kafka.TopicPrefix + a.cfg.LeaseGroup,
		SessionTimeout: a.cfg.LeaseSessionTimeout,
		StopTimeout:    a.cfg.ShutdownTimeout,
	}, lease.Deps{Logger: a.logger, KafkaOpts: kopts, Registerer: a.reg}, ids, int(leaseSpec.Partitions),
		func(ctx context.Context, chain string) error { return byID[chain].run(ctx) })
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.started = true
	a.mu.Unlock()
	return leases.Run(ctx)
}

// chainRunner writes one chain while this instance holds its lease: each
// term gets a new transactional producer (fencing the former writer) and a
// new follower that resumes from the checkpoint in Kafka.
type chainRunner struct {
	app       *App
	chain     chains.Chain
	rpc       *rpc.Pool
	metrics   *follow.Metrics
	kafkaOpts []kgo.Opt

	mu       sync.Mutex
	follower *follow.Follower // nil while another instance writes the chain
}

func (r *chainRunner) run(ctx context.Context) error {
	a := r.app
	cl, err := kgo.NewClient(follow.ProducerOpts(a.cfg.Kafka, a.logger, clientID, r.chain.EVMChainID)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	f, err := follow.New(follow.Config{
		Chain: r.chain,
		Topic: a.cfg.Kafka.Topic(topics.Blocks),
		// Per node: a backfill bound by the nodes grows with them (the
		// pool gives each batch to the node expected to answer first).
		Concurrency:     a.cfg.Concurrency * len(r.chain.RPCNodes()),
		BatchBlocks:     a.cfg.BatchBlocks,
		Window:          a.cfg.Window,
		ReadyLag:        a.cfg.ReadyLag,
		ShutdownTimeout: a.cfg.ShutdownTimeout,
		MaxLead:         a.cfg.MaxLead,
		LeadGroup:       a.cfg.Kafka.TopicPrefix + a.cfg.LeadGroup,
	}, follow.Deps{
		Logger:    a.logger,
		Kafka:     cl,
		KafkaOpts: r.kafkaOpts,
		RPC:       r.rpc,
		Metrics:   r.metrics,
	})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.follower = f
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.follower = nil
		r.mu.Unlock()
	}()
	return f.Run(ctx)
}

// ready: the writer's readiness while this instance writes the chain; a
// standby is ready (it has nothing to catch up).
func (r *chainRunner) ready(ctx context.Context) error {
	r.mu.Lock()
	f := r.follower
	r.mu.Unlock()
	if f == nil {
		return nil
	}
	return f.Ready(ctx)
}
