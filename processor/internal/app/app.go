package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/guard"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/process"
	"github.com/moraine-data/moraine/processor/internal/ledger"
	"github.com/moraine-data/moraine/processor/internal/matcher"
	"github.com/moraine-data/moraine/processor/internal/nftdiscover"
	"github.com/moraine-data/moraine/processor/internal/nftworker"
	"github.com/moraine-data/moraine/processor/internal/replay"
	"github.com/moraine-data/moraine/processor/internal/sink"
	"github.com/moraine-data/moraine/processor/internal/usagesink"
)

// Config is the processor's configuration.
type Config struct {
	Kafka      kafkautil.Config
	ClickHouse chclient.Config
	Ops        obs.OpsConfig
	Log        obs.LogConfig
	// Sink is the ClickHouse sink (package sink).
	Sink            sink.Config
	ShutdownTimeout time.Duration
	// Matcher is the address-activity matcher (package matcher).
	Matcher matcher.Config
	// NFT is NFT discovery and the metadata worker (packages nftdiscover
	// and nftworker).
	NFT nftworker.Config
	// ChainsFile names the chains file (RPC URLs for token metadata, native
	// tokens); the matcher and the NFT metadata worker read it.
	ChainsFile string
	// Ledger is the message ledger (package ledger); Replay the replay
	// runner (package replay), which runs beside the matcher; Accounts the
	// access to the jobs and webhooks it reads.
	Ledger   ledger.Config
	Replay   replay.Config
	Accounts accountdb.Config
	// Usage is the request-log sink (package usagesink).
	Usage usagesink.Config
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	var c Config
	c.RegisterFlags(flag.NewFlagSet("defaults", flag.ContinueOnError))
	return c
}

// RegisterFlags adds every processor flag to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Kafka.RegisterFlags(fs)
	c.ClickHouse.RegisterFlags(fs)
	c.Ops.RegisterFlags(fs, "127.0.0.1:9102")
	c.Log.RegisterFlags(fs)
	c.Matcher.RegisterFlags(fs)
	chains.RegisterFlag(fs, &c.ChainsFile)
	c.Sink.RegisterFlags(fs)
	c.Usage.RegisterFlags(fs)
	c.NFT.RegisterFlags(fs)
	c.Ledger.RegisterFlags(fs)
	c.Replay.RegisterFlags(fs)
	c.Accounts.RegisterFlags(fs)
	fs.DurationVar(&c.ShutdownTimeout, "shutdown.timeout", 30*time.Second, "time to finish the in-flight batch on shutdown")
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	errs = append(errs, c.Kafka.Validate())
	if !c.Sink.Enabled && !c.Matcher.Enabled && !c.NFT.Enabled && !c.Usage.Enabled {
		errs = append(errs, errors.New("processor: nothing to run: --processor.sink-enabled, --matcher.enabled, --nft.enabled and --usage.enabled are all false"))
	}
	if c.Matcher.Enabled {
		errs = append(errs, c.Matcher.Validate())
	}
	if c.Sink.Enabled {
		errs = append(errs, c.Sink.Validate())
	}
	if c.NFT.Enabled {
		errs = append(errs, c.NFT.Validate())
	}
	if c.Ledger.Enabled {
		errs = append(errs, c.Ledger.Validate())
	}
	if c.replays() {
		errs = append(errs, c.Replay.Validate(), c.Accounts.Validate())
	}
	if c.Sink.Enabled || c.NFT.Enabled || c.Ledger.Enabled || c.replays() {
		errs = append(errs, c.ClickHouse.Validate())
	}
	if c.Usage.Enabled {
		errs = append(errs, c.ClickHouse.Validate(), c.Usage.Validate())
	}
	return errors.Join(errs...)
}

// replays reports whether this instance runs replay jobs: beside its
// matcher only, since a chain's replays are numbered by the instance that
// numbers its live messages.
func (c Config) replays() bool { return c.Replay.Enabled && c.Matcher.Enabled }

// Deps are injected by main (or a test).
type Deps = process.Deps

// App is one processor: the ops server, the sink and the matcher.
type App struct {
	cfg    Config
	logger *slog.Logger
	reg    *prometheus.Registry
	chains *chains.Config // nil: no chains file (the matcher warns)
	health *obs.Health
	// blocks decompresses each block batch once for the sink and the
	// matcher, which both read every one (64 MiB of recent batches kept).
	blocks kgo.Decompressor
	sink   *sink.Consumer  // nil when --processor.sink-enabled=false
	usage  *usagesink.Sink // nil when --usage.enabled=false
	// nftDiscover and nftWorker are nil when --nft.enabled=false.
	nftDiscover *nftdiscover.Discoverer
	nftWorker   *nftworker.Worker

	ops atomic.Pointer[obs.Server]
}

// testHookBeforeEnd, when set (by tests only, before Run), becomes the
// matcher's Deps.BeforeEnd.
var testHookBeforeEnd func() (abort bool)

// nftDiscoveryPoll is how many block records NFT discovery takes at a time:
// a batch's requests are produced and acknowledged before its offsets are
// committed, so a smaller batch commits sooner without costing more calls.
const nftDiscoveryPoll = 256

// testHookResolver, when set (by tests only, before New), resolves host
// names for the NFT metadata worker's SSRF checks.
var testHookResolver guard.Resolver

// New validates cfg and loads the chains file (when the matcher runs); it
// does no network I/O.
func New(cfg Config, deps Deps) (*App, error) {
	if err := deps.Validate(); err != nil {
		return nil, fmt.Errorf("processor: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var chainCfg *chains.Config
	if cfg.Matcher.Enabled || cfg.NFT.Enabled {
		var err error
		chainCfg, err = chains.Load(cfg.ChainsFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Matching needs no chain configuration; payloads do, for their
			// networkToken and token metadata, and NFT metadata for its node
			// calls. Run, but say so loudly.
			deps.Logger.Warn("chains file not found: payloads will have no networkToken and no token metadata, NFT metadata stays UNINDEXED; pass --chains.file",
				"path", cfg.ChainsFile)
			chainCfg = nil
		case err != nil:
			return nil, fmt.Errorf("processor: --chains.file: %w", err)
		}
	}
	cfg.Kafka.Metrics = deps.Registry // franz-go's client metrics (kafkautil.ClientMetrics)
	cfg.Sink.ShutdownTimeout = cfg.ShutdownTimeout
	cfg.Matcher.ShutdownTimeout = cfg.ShutdownTimeout
	cfg.NFT.ShutdownTimeout = cfg.ShutdownTimeout
	a := &App{cfg: cfg, logger: deps.Logger, reg: deps.Registry, chains: chainCfg, health: obs.NewHealth(),
		blocks: kafkautil.NewSharedDecompressor(64 << 20)}
	if cfg.Sink.Enabled {
		var err error
		if a.sink, err = sink.New(cfg.Sink, sink.Deps{Logger: a.logger, Registerer: a.reg, Kafka: cfg.Kafka, ClickHouse: cfg.ClickHouse,
			Health: a.health, Decompressor: a.blocks}); err != nil {
			return nil, err
		}
	}
	if cfg.Usage.Enabled {
		var err error
		if a.usage, err = usagesink.New(cfg.Usage, usagesink.Deps{Logger: a.logger, Registerer: a.reg, Kafka: cfg.Kafka,
			ClickHouse: cfg.ClickHouse, Health: a.health}); err != nil {
			return nil, err
		}
	}
	if cfg.NFT.Enabled {
		var err error
		if a.nftDiscover, err = nftdiscover.New(nftdiscover.Config{Group: cfg.NFT.DiscoveryGroup, StartOffset: cfg.NFT.DiscoveryStartOffset,
			CacheSize: cfg.NFT.DiscoveryCache, MaxPollRecords: nftDiscoveryPoll},
			nftdiscover.Deps{Logger: a.logger, Registerer: a.reg, Kafka: cfg.Kafka, Decompressor: a.blocks}); err != nil {
			return nil, err
		}
		if a.nftWorker, err = nftworker.New(cfg.NFT, nftworker.Deps{Logger: a.logger, Registerer: a.reg, Kafka: cfg.Kafka,
			ClickHouse: cfg.ClickHouse, Chains: chainCfg, Health: a.health, Resolver: testHookResolver}); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// runReplays connects to ClickHouse (waiting for it) and starts the
// message ledger and the replay runner (producers nil: not here).
func (a *App) runReplays(ctx context.Context, g *errgroup.Group, m *matcher.Consumer, producers *replay.Producers) error {
	cfg := a.cfg
	conn, err := chclient.Open(ctx, cfg.ClickHouse, a.logger)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	a.health.Add("replay-clickhouse", chclient.Ping(conn))
	g.Go(func() error {
		<-ctx.Done()
		return conn.Close()
	})
	if cfg.Ledger.Enabled {
		l := ledger.New(cfg.Ledger, cfg.Kafka, conn, a.logger, a.reg)
		g.Go(func() error { return l.Run(ctx) })
	}
	if producers == nil {
		return nil
	}
	acfg := cfg.Accounts
	acfg.Subsystem = "processor"
	accounts, err := accountdb.Open(conn, acfg, a.reg)
	if err != nil {
		return err
	}
	r, err := replay.New(cfg.Replay, replay.Deps{
		Logger: a.logger, Registerer: a.reg, Kafka: cfg.Kafka, Conn: conn, Accounts: accounts, Matcher: m, Producers: producers,
		MatcherGroup: cfg.Kafka.TopicPrefix + cfg.Matcher.Group, SinkGroup: cfg.Kafka.TopicPrefix + cfg.Sink.Group,
		RetractionWindow: cfg.Matcher.RetractionWindow,
		LedgerTimeout:    cfg.Ledger.Timeout,
	})
	if err != nil {
		return err
	}
	g.Go(func() error { return r.Run(ctx) })
	return nil
}

// OpsAddr is the ops server's address once Run has bound it ("" before).
func (a *App) OpsAddr() string { return a.ops.Load().Addr() }

// Run serves the ops endpoints, creates the topics and runs the sink and
// the matcher until ctx ends or one of them fails.
func (a *App) Run(ctx context.Context) error {
	cfg, logger, reg := a.cfg, a.logger, a.reg
	ops, err := obs.Listen(cfg.Ops.ListenAddress, obs.OpsMux(reg, a.health), logger)
	if err != nil {
		return fmt.Errorf("processor: ops listener: %w", err)
	}
	a.ops.Store(ops)
	logger.Info("ops server listening", "addr", ops.Addr())

	sk := a.sink
	var matcherUp atomic.Bool
	a.health.Add("startup", func(context.Context) error {
		sinkUp := sk == nil
		if sk != nil {
			select {
			case <-sk.Connected():
				sinkUp = true
			default:
			}
		}
		usageUp := a.usage == nil
		if a.usage != nil {
			select {
			case <-a.usage.Connected():
				usageUp = true
			default:
			}
		}
		if !sinkUp || !usageUp || cfg.Matcher.Enabled && !matcherUp.Load() {
			return errors.New("connecting to kafka and clickhouse")
		}
		return nil
	})

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ops.Serve(gctx, 5*time.Second) })
	g.Go(func() error {
		admCl, err := kafkautil.NewClient(gctx, logger, cfg.Kafka.BaseOpts(logger, "moraine-processor-admin")...)
		if err == nil {
			if err = cfg.Kafka.EnsureTopics(gctx, admCl, logger); err != nil {
				admCl.Close()
			}
		}
		if err != nil {
			if gctx.Err() != nil {
				return nil // stopped while starting
			}
			return err
		}
		// The Kafka admin client stays to read the consumer groups' lag.
		var groups []string
		if cfg.Sink.Enabled {
			groups = append(groups, cfg.Kafka.TopicPrefix+cfg.Sink.Group)
		}
		if cfg.Matcher.Enabled {
			groups = append(groups, cfg.Kafka.TopicPrefix+cfg.Matcher.Group)
		}
		if a.usage != nil {
			groups = append(groups, a.usage.Group())
		}
		if a.nftWorker != nil {
			groups = append(groups, a.nftDiscover.Group(), a.nftWorker.Group())
		}
		if cfg.Ledger.Enabled {
			groups = append(groups, cfg.Kafka.TopicPrefix+cfg.Ledger.Group)
		}
		g.Go(func() error {
			defer admCl.Close()
			kafkautil.ExportLag(gctx, kadm.NewClient(admCl), reg, logger, kafkautil.LagInterval, groups...)
			return nil
		})
		var producers *replay.Producers
		if cfg.replays() {
			producers = replay.NewProducers(cfg.Kafka, cfg.Matcher.Group, cfg.Replay.TransactionTimeout, logger.With("component", "replay"))
		}
		var m *matcher.Consumer
		if cfg.Matcher.Enabled {
			deps := matcher.Deps{Logger: logger, Registerer: reg, Kafka: cfg.Kafka, Chains: a.chains,
				Health: a.health, Decompressor: a.blocks, BeforeEnd: testHookBeforeEnd}
			if producers != nil {
				deps.Partitions = producers
			}
			if a.sink != nil {
				// The head latency target weighs what this matcher sees.
				deps.ActivityCommitted = a.sink.Budget().ObserveHead
			}
			if m, err = matcher.New(cfg.Matcher, deps); err != nil {
				return err
			}
			matcherUp.Store(true)
			g.Go(func() error { return m.Run(gctx) })
		}
		if cfg.Ledger.Enabled || producers != nil {
			g.Go(func() error { return a.runReplays(gctx, g, m, producers) })
		}
		if sk != nil {
			g.Go(func() error { return sk.Run(gctx) })
		}
		if a.usage != nil {
			g.Go(func() error { return a.usage.Run(gctx) })
		}
		if a.nftWorker != nil {
			g.Go(func() error { return a.nftDiscover.Run(gctx) })
			g.Go(func() error { return a.nftWorker.Run(gctx) })
		}
		return nil
	})
	return g.Wait()
}
