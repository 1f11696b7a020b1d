// Package mgmt assembles the management half of the query service for
// internal/app: API-key authentication and rate limiting on every /v1
// route, the webhook and shared-secret routes, and the address-watch
// publisher and reconciler.
//
// Wiring (internal/app):
//
//	m, err := mgmt.New(cfg.Mgmt, mgmt.Deps{Logger, Registerer, Chains, PageTokenKey})
//	router, err := api.Router(api.Deps{..., Middleware: m.Middleware()})  // block and chain routes
//	err = m.Register(router)                                            // webhook routes on /v1
//	health.Add("webhooks", m.Ready)
//	... once ClickHouse is open: m.SetConn(conn)
//	g.Go(func() error { return m.Run(gctx) })                           // reconciler, counters
//
// Flags: --kafka.*, --accountdb.*, --auth.*, --ratelimit.*, --plans.file,
// --webhooks.*, --watch.* (each package documents its own).
package mgmt

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/guard"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/query/internal/access/auth"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/access/ratelimit"
	"github.com/moraine-data/moraine/query/internal/webhooks/reconcile"
	"github.com/moraine-data/moraine/query/internal/webhooks/webhookapi"
)

// Config gathers the settings of the parts.
type Config struct {
	Kafka     kafkautil.Config
	AccountDB accountdb.Config
	Auth      auth.Config
	RateLimit ratelimit.Config
	Plans     plan.Config
	Webhooks  webhookapi.Config
	Watch     reconcile.Config
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	return Config{
		Kafka:     kafkautil.Config{Brokers: "127.0.0.1:9092"},
		AccountDB: accountdb.DefaultConfig(),
		Auth:      auth.DefaultConfig(),
		RateLimit: ratelimit.DefaultConfig(),
		Webhooks:  webhookapi.DefaultConfig(),
		Watch:     reconcile.DefaultConfig(),
	}
}

// RegisterFlags adds every part's flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Kafka.RegisterFlags(fs)
	c.AccountDB.RegisterFlags(fs)
	c.Auth.RegisterFlags(fs)
	c.RateLimit.RegisterFlags(fs)
	c.Plans.RegisterFlags(fs)
	c.Webhooks.RegisterFlags(fs)
	c.Watch.RegisterFlags(fs)
}

// Validate checks every part.
func (c Config) Validate() error {
	var errs []error
	for _, v := range []interface{ Validate() error }{c.Kafka, c.AccountDB, c.Auth, c.RateLimit, c.Webhooks, c.Watch} {
		if err := v.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Deps are what the host service provides.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Chains     *chains.Config
	// PageTokenKey signs page tokens (the service's shared page-token key).
	PageTokenKey []byte
	// Hooks observe the steps of webhook changes (tests).
	Hooks webhookapi.Hooks
	// Resolver resolves webhook URL hosts (net.DefaultResolver when nil;
	// tests without DNS pass guardtest.Resolver).
	Resolver guard.Resolver
}

// Mgmt is the assembled management half.
type Mgmt struct {
	cfg     Config
	deps    Deps
	logger  *slog.Logger
	db      *accountdb.DB
	locks   *watch.Locks
	clock   *accountdb.Clock
	plans   *plan.Set
	authn   *auth.Authenticator
	limiter *ratelimit.Memory
	watch   *reconcile.Reconciler
	mw      []gin.HandlerFunc
}

// New validates, loads the plans file and allocates; no network I/O.
func New(cfg Config, d Deps) (*Mgmt, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Logger == nil || d.Registerer == nil || d.Chains == nil {
		return nil, errors.New("mgmt: Deps.Logger, Registerer and Chains are required")
	}
	plans, err := cfg.Plans.Load()
	if err != nil {
		return nil, err
	}
	m := &Mgmt{cfg: cfg, deps: d, logger: d.Logger, plans: plans, locks: watch.NewLocks(), clock: accountdb.NewClock(nil), limiter: ratelimit.NewMemory()}
	if m.db, err = accountdb.New(cfg.AccountDB, d.Registerer); err != nil {
		return nil, err
	}
	if m.authn, err = auth.New(cfg.Auth, auth.Deps{Logger: d.Logger.With("component", "auth"), Registerer: d.Registerer, Store: m.db}); err != nil {
		return nil, err
	}
	limit, err := ratelimit.Middleware(cfg.RateLimit, ratelimit.Deps{
		Logger: d.Logger.With("component", "ratelimit"), Registerer: d.Registerer, Limiter: m.limiter, Plans: plans,
		Subject: func(c *gin.Context) (ratelimit.Subject, bool) {
			k, p := auth.Subject(c)
			return ratelimit.Subject{Key: k, Plan: p}, true
		},
	})
	if err != nil {
		return nil, err
	}
	m.mw = []gin.HandlerFunc{m.authn.Identify(), limit, auth.RejectInvalid()}
	if m.watch, err = reconcile.New(cfg.Watch, reconcile.Deps{
		Logger: d.Logger, Registerer: d.Registerer, Kafka: cfg.Kafka, Store: m.db, Locks: m.locks,
	}); err != nil {
		return nil, err
	}
	return m, nil
}

// Middleware is the chain every /v1 route runs before its handler:
// identify the API key, charge the rate limit, refuse a bad key (401).
func (m *Mgmt) Middleware() []gin.HandlerFunc { return append([]gin.HandlerFunc(nil), m.mw...) }

// Register adds the webhook and shared-secret routes to the engine's /v1.
func (m *Mgmt) Register(r *gin.Engine) error {
	return webhookapi.Register(r.Group("/v1"), m.cfg.Webhooks, webhookapi.Deps{
		Logger: m.logger, Registerer: m.deps.Registerer, Store: m.db, Publisher: m.watch, Locks: m.locks,
		Clock: m.clock, Plans: m.plans, Chains: m.deps.Chains, PageTokenKey: m.deps.PageTokenKey,
		Middleware: m.mw, Hooks: m.deps.Hooks, Resolver: m.deps.Resolver,
	})
}

// SetConn hands over the ClickHouse connection (after migrations ran).
func (m *Mgmt) SetConn(conn driver.Conn) { m.db.SetConn(conn) }

// DB is the account store (tests create accounts with it).
func (m *Mgmt) DB() *accountdb.DB { return m.db }

// Ready reports whether the address-watch topic has been reconciled once.
func (m *Mgmt) Ready(ctx context.Context) error { return m.watch.Ready(ctx) }

// Run creates the Kafka topics if needed, then runs the reconciler and the
// rate-limit counter sweeper until ctx ends.
func (m *Mgmt) Run(ctx context.Context) error {
	go ratelimit.RunSweeper(ctx, m.limiter, m.deps.Registerer)
	if err := m.ensureTopics(ctx); err != nil {
		m.watch.Close()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return m.watch.Run(ctx)
}

func (m *Mgmt) ensureTopics(ctx context.Context) error {
	cl, err := kafkautil.NewClient(ctx, m.logger, m.cfg.Kafka.BaseOpts(m.logger, "moraine-query-admin")...)
	if err != nil {
		return fmt.Errorf("mgmt: %w", err)
	}
	defer cl.Close()
	again := obs.Retry{Initial: 500 * time.Millisecond, Max: 10 * time.Second, Log: m.logger, Msg: "creating kafka topics failed, retrying"}
	if err := again.Do(ctx, func() error { return m.cfg.Kafka.EnsureTopics(ctx, cl, m.logger) }); err != nil {
		return fmt.Errorf("mgmt: create topics: %w", err)
	}
	return nil
}
