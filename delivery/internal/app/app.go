// Package app wires the delivery service: its configuration, its
// dependencies (Kafka for the activity, retry and address-watch topics,
// ClickHouse for the delivery log, the failure strikes and webhook status),
// the ops server and graceful shutdown. The delivery itself is package
// pipeline; the package docs there and in sign, guard, deactivate and dlog
// state the guarantees.
//
// Start-up order: ClickHouse (migrations), Kafka topics, the webhook and
// account table read from the address-watch topic up to its end, and only
// then the consumer group: no message is judged against a table that has
// not caught up. /readyz: kafka, clickhouse, the table caught up, and the
// pipeline started.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"golang.org/x/sync/errgroup"

	"github.com/moraine-data/moraine/delivery/internal/deactivate"
	"github.com/moraine-data/moraine/delivery/internal/dlog"
	"github.com/moraine-data/moraine/delivery/internal/pipeline"
	"github.com/moraine-data/moraine/delivery/internal/settings"
	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/process"
	"github.com/moraine-data/moraine/pkg/watch"
)

// Config is the delivery service's configuration.
type Config struct {
	Kafka           kafkautil.Config
	ClickHouse      chclient.Config
	Ops             obs.OpsConfig
	Log             obs.LogConfig
	ChainsFile      string
	ShutdownTimeout time.Duration
	AccountDB       accountdb.Config
	// WatchProduceTimeout bounds the publish of a deactivation to the
	// address-watch topic (the query service's reconciler repairs a
	// failure).
	WatchProduceTimeout time.Duration
	Delivery            pipeline.Config
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	return Config{
		Kafka:               kafkautil.Config{Brokers: "127.0.0.1:9092"},
		ClickHouse:          chclient.Config{Addr: "127.0.0.1:9000", Database: "moraine", User: "default", ReadTimeout: 30 * time.Second, MaxConns: 16},
		Ops:                 obs.OpsConfig{ListenAddress: "127.0.0.1:9104"},
		Log:                 obs.LogConfig{Level: "info", Format: "text"},
		ShutdownTimeout:     30 * time.Second,
		AccountDB:           accountdb.DefaultConfig(),
		WatchProduceTimeout: watch.DefaultConfig().ProduceTimeout,
		Delivery:            pipeline.DefaultConfig(),
	}
}

// RegisterFlags adds every delivery flag to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Kafka.RegisterFlags(fs)
	c.ClickHouse.RegisterFlags(fs)
	c.Ops.RegisterFlags(fs, "127.0.0.1:9104")
	c.Log.RegisterFlags(fs)
	chains.RegisterFlag(fs, &c.ChainsFile)
	fs.DurationVar(&c.ShutdownTimeout, "shutdown.timeout", 30*time.Second, "time to finish in-flight deliveries on shutdown")
	c.AccountDB.RegisterFlags(fs)
	fs.DurationVar(&c.WatchProduceTimeout, "watch.produce-timeout", watch.DefaultConfig().ProduceTimeout, "how long publishing a deactivation to the address-watch topic may take (the query service's reconciler publishes it otherwise)")
	c.Delivery.RegisterFlags(fs)
}

// Validate checks the configuration.
func (c Config) Validate() error {
	errs := []error{c.Kafka.Validate(), c.ClickHouse.Validate(), c.AccountDB.Validate(), c.Delivery.Validate()}
	if c.WatchProduceTimeout <= 0 {
		errs = append(errs, errors.New("delivery: --watch.produce-timeout must be positive"))
	}
	if c.ShutdownTimeout <= c.Delivery.DrainTimeout {
		errs = append(errs, errors.New("delivery: --shutdown.timeout must exceed --delivery.drain-timeout"))
	}
	return errors.Join(errs...)
}

// Deps are injected by main (or a test).
type Deps = process.Deps

// App is one delivery service.
type App struct {
	cfg    Config
	logger *slog.Logger
	reg    *prometheus.Registry
	health *obs.Health

	ops atomic.Pointer[obs.Server]
}

// New validates cfg and loads the chains file; it does no network I/O.
func New(cfg Config, deps Deps) (*App, error) {
	if err := deps.Validate(); err != nil {
		return nil, fmt.Errorf("delivery: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, err := chains.Load(cfg.ChainsFile); err != nil {
		return nil, err
	}
	cfg.Kafka.Metrics = deps.Registry // franz-go's client metrics (kafkautil.ClientMetrics)
	return &App{cfg: cfg, logger: deps.Logger, reg: deps.Registry, health: obs.NewHealth()}, nil
}

// OpsAddr is the ops server's address once Run has bound it ("" before).
func (a *App) OpsAddr() string { return a.ops.Load().Addr() }

// Run serves the ops endpoints and delivers until ctx ends or a
// component fails.
func (a *App) Run(ctx context.Context) error {
	cfg, logger, reg, health := a.cfg, a.logger, a.reg, a.health
	ops, err := obs.Listen(cfg.Ops.ListenAddress, obs.OpsMux(reg, health), logger)
	if err != nil {
		return fmt.Errorf("delivery: ops listener: %w", err)
	}
	a.ops.Store(ops)
	logger.Info("ops server listening", "addr", ops.Addr())
	var started atomic.Bool
	health.Add("startup", func(context.Context) error {
		if !started.Load() {
			return errors.New("connecting to kafka and clickhouse, reading the address-watch topic")
		}
		return nil
	})
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ops.Serve(gctx, 5*time.Second) })
	g.Go(func() error { return run(gctx, cfg, logger, reg, health, &started) })
	return g.Wait()
}

func run(ctx context.Context, cfg Config, logger *slog.Logger, reg prometheus.Registerer, health *obs.Health, started *atomic.Bool) error {
	conn, err := chclient.Open(ctx, cfg.ClickHouse, logger)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer conn.Close()
	dbCfg := cfg.AccountDB
	dbCfg.Subsystem = "delivery"
	db, err := accountdb.Open(conn, dbCfg, reg)
	if err != nil {
		return err
	}
	cl, err := kafkautil.NewClient(ctx, logger, cfg.Kafka.BaseOpts(logger, "moraine-delivery-admin")...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer cl.Close()
	if err := cfg.Kafka.EnsureTopics(ctx, cl, logger); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	health.Add("kafka", kafkautil.Ping(cl))
	health.Add("clickhouse", chclient.Ping(conn))

	table := settings.New(cfg.Kafka, logger)
	health.Add("address-watch", table.ReadyCheck)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return table.Run(gctx) })
	g.Go(func() error {
		kafkautil.ExportLag(gctx, kadm.NewClient(cl), reg, logger, kafkautil.LagInterval, cfg.Kafka.TopicPrefix+cfg.Delivery.Group)
		return nil
	})
	g.Go(func() error {
		// No message is judged before the table has caught up.
		if table.WaitReady(gctx) != nil {
			return nil
		}
		wcfg := watch.DefaultConfig()
		wcfg.ProduceTimeout = cfg.WatchProduceTimeout
		pub, err := watch.NewPublisher(wcfg, watch.PublisherDeps{
			Logger: logger, Registerer: reg, Kafka: cfg.Kafka, Subsystem: "delivery", ClientID: "moraine-delivery-watch",
		})
		if err != nil {
			return err
		}
		defer pub.Close()
		deact, err := deactivate.New(cfg.Delivery.FreeDoubleFailures, deactivate.Deps{
			Logger: logger, Registerer: reg, Store: db, Publisher: pub, Table: table,
		})
		if err != nil {
			return err
		}
		dl, err := dlog.New(cfg.Delivery.Log, db, logger, reg)
		if err != nil {
			return err
		}
		// The log outlives the pipeline so the last attempts are flushed.
		logCtx, stopLog := context.WithCancel(context.WithoutCancel(gctx))
		logDone := make(chan struct{})
		go func() { defer close(logDone); _ = dl.Run(logCtx) }()
		defer func() { stopLog(); <-logDone }()
		retentionCtx, stopRetention := context.WithCancel(gctx)
		retentionDone := make(chan struct{})
		go func() { defer close(retentionDone); _ = dl.RunRetention(retentionCtx, db, time.Now) }()
		defer func() { stopRetention(); <-retentionDone }()
		pl, err := pipeline.New(cfg.Delivery, pipeline.Deps{
			Logger: logger, Registerer: reg, Kafka: cfg.Kafka, Table: table, Deactivator: deact, Log: dl,
		})
		if err != nil {
			return err
		}
		started.Store(true)
		logger.Info("delivery ready")
		return pl.Run(gctx)
	})
	return g.Wait()
}
