package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/moraine-data/moraine/ingest/internal/follow"
	"github.com/moraine-data/moraine/ingest/internal/rpc"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/schemas/topics"
)

// clientID names ingest's Kafka clients.
const clientID = "moraine-ingest"

// App is the ingest service: one follower per chain, the producer and the
// admin server.
type App struct {
	cfg    Config
	logger *slog.Logger
	reg    *prometheus.Registry
	chains []chains.Chain
	health *obs.Health

	mu        sync.Mutex
	followers []*follow.Follower
	kafka     *kgo.Client
	adminAddr string
}

// New validates cfg and loads the chain file; it does no network I/O.
func New(cfg Config, logger *slog.Logger, reg *prometheus.Registry) (*App, error) {
	if logger == nil || reg == nil {
		return nil, errors.New("app: logger and registry are required")
	}
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

// Run runs the service until ctx ends.
func Run(ctx context.Context, cfg Config, logger *slog.Logger, reg *prometheus.Registry) error {
	a, err := New(cfg, logger, reg)
	if err != nil {
		return err
	}
	return a.Run(ctx)
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

// AdminAddr is the admin server's address once Run has bound it.
func (a *App) AdminAddr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.adminAddr
}

// Run starts the admin server, connects to Kafka, creates the topics and
// runs one follower per chain until ctx ends or a follower fails. Shutdown
// order: the followers stop fetching and produce what they fetched, the
// producer flushes (bounded by --shutdown.timeout), then the admin server
// stops.
func (a *App) Run(ctx context.Context) error {
	a.health.Add("startup", func(context.Context) error {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.followers == nil {
			return errors.New("starting: connecting to Kafka")
		}
		return nil
	})
	srv, err := obs.Listen(a.cfg.Admin.ListenAddress, obs.AdminMux(a.reg, a.health), a.logger)
	if err != nil {
		return fmt.Errorf("admin server: %w", err)
	}
	a.mu.Lock()
	a.adminAddr = srv.Addr()
	a.mu.Unlock()
	a.logger.Info("admin server listening", "addr", srv.Addr())

	// The admin server outlives the followers so that /metrics shows the
	// shutdown.
	adminCtx, stopAdmin := context.WithCancel(context.WithoutCancel(ctx))
	adminDone := make(chan error, 1)
	go func() { adminDone <- srv.Serve(adminCtx, 5*time.Second) }()
	defer func() {
		stopAdmin()
		<-adminDone
	}()

	err = a.runFollowers(ctx)
	if ctx.Err() != nil && err == nil {
		a.logger.Info("ingest stopped")
	}
	return err
}

func (a *App) runFollowers(ctx context.Context) error {
	kopts := a.cfg.Kafka.BaseOpts(a.logger, clientID)
	popts := follow.ProducerOpts(a.cfg.Kafka, a.logger, clientID)
	cl, err := kafkautil.NewClient(ctx, a.logger, popts...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer func() {
		// Followers already waited for their records; this catches the rest.
		fctx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
		defer cancel()
		if err := cl.Flush(fctx); err != nil {
			a.logger.Warn("flushing the producer at shutdown", "err", err)
		}
		cl.Close()
	}()
	if err := a.cfg.Kafka.EnsureTopics(ctx, cl); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("create topics: %w", err)
	}
	a.health.Add("kafka", kafkautil.Ping(cl))

	rpcMetrics := rpc.NewMetrics(a.reg)
	followMetrics := follow.NewMetrics(a.reg)
	var followers []*follow.Follower
	for _, ch := range a.chains {
		logger := a.logger.With("chain_id", ch.EVMChainID)
		client := rpc.New(rpc.Config{URL: ch.RPCURLs[0], Chain: ch.EVMChainID, Timeout: a.cfg.RPCTimeout}, rpcMetrics)
		rpcMetrics.Init(ch.EVMChainID, "eth_blockNumber", "eth_getBlockByNumber", "eth_getBlockReceipts")
		heads := rpc.NewHeads(client, rpc.HeadsConfig{WSURL: ch.WSURL, PollInterval: a.cfg.PollInterval}, logger.With("component", "heads"))
		f, err := follow.New(follow.Config{
			Chain:           ch,
			Topic:           a.cfg.Kafka.Topic(topics.Blocks),
			Concurrency:     a.cfg.Concurrency,
			BatchBlocks:     a.cfg.BatchBlocks,
			Window:          a.cfg.Window,
			ReadyLag:        a.cfg.ReadyLag,
			ShutdownTimeout: a.cfg.ShutdownTimeout,
		}, follow.Deps{
			Logger:    a.logger,
			Kafka:     cl,
			KafkaOpts: kopts,
			RPC:       client,
			Heads:     heads,
			Metrics:   followMetrics,
		})
		if err != nil {
			return err
		}
		a.health.Add("chain "+ch.EVMChainID, f.Ready)
		followers = append(followers, f)
		a.logger.Info("following chain", "chain_id", ch.EVMChainID, "name", ch.Name, "rpc_url", rpc.Redact(ch.RPCURLs[0]),
			"ws_url", rpc.Redact(ch.WSURL), "traces", ch.Traces, "replay", ch.Replay, "start_block", ch.StartBlock)
	}
	a.mu.Lock()
	a.followers, a.kafka = followers, cl
	a.mu.Unlock()

	g, gctx := errgroup.WithContext(ctx)
	for _, f := range followers {
		g.Go(func() error {
			if err := f.Run(gctx); err != nil {
				return fmt.Errorf("chain %s: %w", f.Chain(), err)
			}
			return nil
		})
	}
	return g.Wait()
}
