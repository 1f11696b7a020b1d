// Package webhooks assembles the query service's webhook half for
// internal/app: the Webhooks API's routes (package webhookapi), and the
// address-watch publisher and reconciler (package reconcile) that carry
// every webhook change to the processor and delivery.
//
// Wiring (internal/app):
//
//	w, err := webhooks.New(cfg.Webhooks, webhooks.Deps{Logger, Registerer, Chains, PageTokenKey, DB, Indexed, Plans})
//	routes := append(data.Routes(), w.Routes()...)       // the route table
//	health.New(health.Deps{AddressWatch: w.Ready, ...})  // GET /v1/health-check's address_watch
//	g.Go(func() error { return w.Run(gctx) })           // topics, then the reconciler
//
// Ready is not one of the ops server's /readyz checks: it needs Kafka, and
// an instance that cannot reach Kafka still serves reads, and acknowledges
// webhook changes (the reconciler publishes them once Kafka is back); so
// it is reported by /v1/health-check (package health), not used to take
// the instance out of a load balancer.
//
// Flags: --kafka.*, --webhooks.*, --watch.* (each package documents its own).
package webhooks

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/guard"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/server"
	"github.com/moraine-data/moraine/query/internal/webhooks/reconcile"
	"github.com/moraine-data/moraine/query/internal/webhooks/webhookapi"
)

// Config gathers the settings of the parts.
type Config struct {
	Kafka    kafkautil.Config
	Webhooks webhookapi.Config
	Watch    reconcile.Config
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	return Config{
		Kafka:    kafkautil.Config{Brokers: "127.0.0.1:9092"},
		Webhooks: webhookapi.DefaultConfig(),
		Watch:    reconcile.DefaultConfig(),
	}
}

// RegisterFlags adds every part's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Kafka.RegisterFlags(fs)
	c.Webhooks.RegisterFlags(fs)
	c.Watch.RegisterFlags(fs)
}

// Validate checks every part.
func (c Config) Validate() error {
	return errors.Join(c.Kafka.Validate(), c.Webhooks.Validate(), c.Watch.Validate())
}

// Deps are what the host service provides.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Chains     *chains.Config
	// DB is the account store: webhooks, addresses, secrets, replays.
	DB *accountdb.DB
	// Indexed says what each chain has indexed (StoreIndexed).
	Indexed webhookapi.Indexed
	// Plans bound webhooks and addresses per account.
	Plans *plan.Set
	// PageTokenKey signs page tokens (the service's shared page-token key).
	PageTokenKey []byte
	// Hooks observe the steps of webhook changes (tests).
	Hooks webhookapi.Hooks
	// Resolver resolves webhook URL hosts (net.DefaultResolver when nil;
	// tests without DNS pass guardtest.Resolver).
	Resolver guard.Resolver
}

// Webhooks is the assembled webhook half.
type Webhooks struct {
	cfg    Config
	logger *slog.Logger
	api    *webhookapi.API
	watch  *reconcile.Reconciler
}

// New validates and allocates; no network I/O.
func New(cfg Config, d Deps) (*Webhooks, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Logger == nil || d.Registerer == nil || d.Chains == nil || d.DB == nil || d.Indexed == nil || d.Plans == nil {
		return nil, errors.New("webhooks: Deps.Logger, Registerer, Chains, DB, Indexed and Plans are required")
	}
	w := &Webhooks{cfg: cfg, logger: d.Logger}
	locks := watch.NewLocks()
	var err error
	if w.watch, err = reconcile.New(cfg.Watch, reconcile.Deps{
		Logger: d.Logger, Registerer: d.Registerer, Kafka: cfg.Kafka, Store: d.DB, Locks: locks,
	}); err != nil {
		return nil, err
	}
	if w.api, err = webhookapi.New(cfg.Webhooks, webhookapi.Deps{
		Logger: d.Logger, Registerer: d.Registerer, Store: d.DB, Indexed: d.Indexed, Publisher: w.watch, Locks: locks,
		Clock: accountdb.NewClock(nil), Plans: d.Plans, Chains: d.Chains, PageTokenKey: d.PageTokenKey,
		Hooks: d.Hooks, Resolver: d.Resolver,
	}); err != nil {
		return nil, err
	}
	return w, nil
}

// Routes are the webhook and shared-secret routes.
func (w *Webhooks) Routes() []server.Route { return w.api.Routes() }

// Ready reports whether the address-watch topic has been reconciled once.
func (w *Webhooks) Ready(ctx context.Context) error { return w.watch.Ready(ctx) }

// Run creates the Kafka topics if needed, then runs the reconciler until
// ctx ends.
func (w *Webhooks) Run(ctx context.Context) error {
	if err := w.ensureTopics(ctx); err != nil {
		w.watch.Close()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return w.watch.Run(ctx)
}

func (w *Webhooks) ensureTopics(ctx context.Context) error {
	cl, err := kafkautil.NewClient(ctx, w.logger, w.cfg.Kafka.BaseOpts(w.logger, "moraine-query-admin")...)
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	defer cl.Close()
	again := obs.Retry{Initial: 500 * time.Millisecond, Max: 10 * time.Second, Log: w.logger, Msg: "creating kafka topics failed, retrying"}
	if err := again.Do(ctx, func() error { return w.cfg.Kafka.EnsureTopics(ctx, cl, w.logger) }); err != nil {
		return fmt.Errorf("webhooks: create topics: %w", err)
	}
	return nil
}
