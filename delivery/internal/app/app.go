// Package app wires the delivery service: its configuration, its
// dependencies (Kafka for the activity topic, ClickHouse for the delivery
// log), the admin server and graceful shutdown.
//
// The signed-POST pipeline itself (consume activity, sign, retry on the
// hosted service's schedule, record attempts) is issue 6; until it lands
// this service only verifies and reports its dependencies.
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
	"golang.org/x/sync/errgroup"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/chdb"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
)

// Config is the delivery service's configuration.
type Config struct {
	Kafka           kafkautil.Config
	ClickHouse      chdb.Config
	Admin           obs.AdminConfig
	Log             obs.LogConfig
	ChainsFile      string
	ShutdownTimeout time.Duration
}

// RegisterFlags adds every delivery flag to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Kafka.RegisterFlags(fs)
	c.ClickHouse.RegisterFlags(fs)
	c.Admin.RegisterFlags(fs, "127.0.0.1:9104")
	c.Log.RegisterFlags(fs)
	chains.RegisterFlag(fs, &c.ChainsFile)
	fs.DurationVar(&c.ShutdownTimeout, "shutdown.timeout", 30*time.Second, "time to finish in-flight deliveries on shutdown")
}

// Validate checks the configuration.
func (c Config) Validate() error {
	return errors.Join(c.Kafka.Validate(), c.ClickHouse.Validate())
}

// Run runs the service until ctx ends.
func Run(ctx context.Context, cfg Config, logger *slog.Logger, reg *prometheus.Registry) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if _, err := chains.Load(cfg.ChainsFile); err != nil {
		return err
	}
	health := obs.NewHealth()
	admin, err := obs.Listen(cfg.Admin.ListenAddress, obs.AdminMux(reg, health), logger)
	if err != nil {
		return fmt.Errorf("delivery: admin listener: %w", err)
	}
	logger.Info("admin server listening", "addr", admin.Addr())
	var starting atomic.Bool
	starting.Store(true)
	health.Add("startup", func(context.Context) error {
		if starting.Load() {
			return errors.New("connecting to kafka and clickhouse")
		}
		return nil
	})
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return admin.Serve(gctx, 5*time.Second) })
	g.Go(func() error {
		conn, err := chdb.Open(gctx, cfg.ClickHouse, logger)
		if err != nil {
			return err
		}
		defer conn.Close()
		cl, err := kafkautil.NewClient(gctx, logger, cfg.Kafka.BaseOpts(logger, "moraine-delivery")...)
		if err != nil {
			return err
		}
		defer cl.Close()
		if err := cfg.Kafka.EnsureTopics(gctx, cl); err != nil {
			return err
		}
		health.Add("kafka", kafkautil.Ping(cl))
		health.Add("clickhouse", chdb.Ping(conn))
		starting.Store(false)
		logger.Info("delivery ready")
		<-gctx.Done()
		return nil
	})
	return g.Wait()
}
