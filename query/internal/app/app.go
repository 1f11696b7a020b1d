// Package app runs the query service in-process: the Data API server, the
// admin server (/metrics, /healthz, /readyz) and the ClickHouse connection.
//
// Start-up order: both servers listen first, so the API answers 503 and
// /readyz says why while ClickHouse is still unreachable; chclient.Open then
// connects (with backoff) and applies the migrations, and the store gets its
// connection. Shutdown: the servers drain for --shutdown.timeout, then the
// connection closes.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/guard"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/query/internal/api"
	"github.com/moraine-data/moraine/query/internal/mgmt"
	"github.com/moraine-data/moraine/query/internal/pagetoken"
	"github.com/moraine-data/moraine/query/internal/store"
)

// Deps are injected by main (or a test).
type Deps struct {
	Logger   *slog.Logger
	Registry *prometheus.Registry
	// Resolver resolves webhook URL hosts (net.DefaultResolver when nil).
	Resolver guard.Resolver
}

// App is one query service.
type App struct {
	cfg      Config
	logger   *slog.Logger
	reg      *prometheus.Registry
	resolver guard.Resolver

	chains *chains.Config
	store  *store.ClickHouse
	mgmt   *mgmt.Mgmt
	health *obs.Health
	// router is the API's handler (tests list its routes).
	router *gin.Engine
	api    *obs.Server
	admin  *obs.Server

	cancel context.CancelFunc
	group  *errgroup.Group
	mu     sync.Mutex
	conn   driver.Conn
}

// New validates the configuration, loads the chain file and the page-token
// key, and builds the router; it opens no connection.
func New(cfg Config, deps Deps) (*App, error) {
	if deps.Logger == nil {
		return nil, errors.New("app: Deps.Logger is required")
	}
	if deps.Registry == nil {
		return nil, errors.New("app: Deps.Registry is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cc, err := chains.Load(cfg.ChainsFile)
	if err != nil {
		return nil, err
	}
	cfg.Mgmt.Kafka.Metrics = deps.Registry // franz-go's client metrics (kafkautil.ClientMetrics)
	return &App{cfg: cfg, logger: deps.Logger, reg: deps.Registry, resolver: deps.Resolver, chains: cc, health: obs.NewHealth()}, nil
}

// Start binds both servers, starts serving and starts connecting to
// ClickHouse; it returns once the listeners are bound (see APIAddr).
func (a *App) Start(ctx context.Context) error {
	key, err := a.cfg.PageToken.Key()
	if err != nil {
		return err
	}
	tokens, err := pagetoken.NewCodec(key, a.cfg.PageToken.TTL, nil)
	if err != nil {
		return err
	}
	ids := make([]uint64, 0, len(a.chains.Chains))
	for _, c := range a.chains.Chains {
		ids = append(ids, c.ID())
	}
	a.store, err = store.New(a.cfg.Store, store.Deps{
		Logger: a.logger.With("component", "store"), Registerer: a.reg, ChainIDs: ids,
	})
	if err != nil {
		return err
	}
	a.health.Add("clickhouse", a.store.Ready)
	a.mgmt, err = mgmt.New(a.cfg.Mgmt, mgmt.Deps{Logger: a.logger, Registerer: a.reg, Chains: a.chains, PageTokenKey: key, Resolver: a.resolver})
	if err != nil {
		return err
	}
	rpc := make(map[uint64][]string, len(a.chains.Chains))
	for _, c := range a.chains.Chains {
		rpc[c.ID()] = c.RPCURLs
	}
	contracts := tokenmeta.New(a.cfg.Contracts, rpc, tokenmeta.Deps{Logger: a.logger, Registerer: a.reg, Subsystem: "query"})
	router, err := api.Router(api.Deps{
		Logger: a.logger.With("component", "api"), Registerer: a.reg, Chains: a.chains,
		History: a.store, Contracts: contracts,
		Store: a.store, Tokens: tokens, Config: a.cfg.API, Middleware: a.mgmt.Middleware(),
		Register: []func(*gin.Engine) error{a.mgmt.Register},
	})
	if err != nil {
		return err
	}
	a.router = router
	if a.admin, err = obs.Listen(a.cfg.Admin.ListenAddress, obs.AdminMux(a.reg, a.health), a.logger); err != nil {
		return fmt.Errorf("app: admin listen: %w", err)
	}
	if a.api, err = obs.ListenHTTP(a.cfg.HTTPListenAddress, router, a.logger, a.cfg.HTTP); err != nil {
		// Close the admin listener: Serve on an ended context shuts down.
		done, cancel := context.WithCancel(context.Background())
		cancel()
		_ = a.admin.Serve(done, a.cfg.ShutdownTimeout)
		return fmt.Errorf("app: api listen: %w", err)
	}
	ctx, a.cancel = context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(ctx)
	a.group = g
	g.Go(func() error { return a.admin.Serve(gctx, a.cfg.ShutdownTimeout) })
	g.Go(func() error { return a.api.Serve(gctx, a.cfg.ShutdownTimeout) })
	g.Go(func() error { return a.mgmt.Run(gctx) })
	g.Go(func() error {
		conn, err := chclient.Open(gctx, a.cfg.ClickHouse, a.logger.With("component", "chclient"))
		if err != nil {
			if gctx.Err() != nil {
				return nil // stopped before ClickHouse answered
			}
			return err
		}
		a.mu.Lock()
		a.conn = conn
		a.mu.Unlock()
		a.store.SetConn(conn)
		a.mgmt.SetConn(conn)
		a.logger.Info("clickhouse connected", "addr", a.cfg.ClickHouse.Addr, "database", a.cfg.ClickHouse.Database)
		return nil
	})
	a.logger.Info("query service listening", "api", a.api.Addr(), "admin", a.admin.Addr(), "chains", len(a.chains.Chains))
	return nil
}

// APIAddr is the bound API address (after Start).
func (a *App) APIAddr() string { return a.api.Addr() }

// AdminAddr is the bound admin address (after Start).
func (a *App) AdminAddr() string { return a.admin.Addr() }

// Wait blocks until the context given to Start ends (or a server fails),
// drains the servers and closes the connection.
func (a *App) Wait() error {
	err := a.group.Wait()
	a.cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn != nil {
		err = errors.Join(err, a.conn.Close())
	}
	return err
}

// Run starts the service and blocks until ctx ends.
func Run(ctx context.Context, cfg Config, deps Deps) error {
	a, err := New(cfg, deps)
	if err != nil {
		return err
	}
	if err := a.Start(ctx); err != nil {
		return err
	}
	return a.Wait()
}
