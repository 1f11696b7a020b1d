// Package app runs the query service in-process: the Data API server, the
// ops server (/metrics, /healthz, /readyz) and the ClickHouse connection.
//
// Start-up order: both servers listen first, so the API answers 503 and
// /readyz says why while ClickHouse is still unreachable; chclient.Open then
// connects (with backoff) and applies the migrations, and the store gets its
// connection. Shutdown: the servers drain for --shutdown.timeout, then the
// connection closes.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/balances"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/guard"
	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/process"
	"github.com/moraine-data/moraine/pkg/rpc"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/query/internal/access"
	"github.com/moraine-data/moraine/query/internal/access/usage"
	"github.com/moraine-data/moraine/query/internal/access/usage/usageapi"
	"github.com/moraine-data/moraine/query/internal/data/api"
	"github.com/moraine-data/moraine/query/internal/data/nftreindex"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/health"
	"github.com/moraine-data/moraine/query/internal/ops/export"
	"github.com/moraine-data/moraine/query/internal/server"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
	"github.com/moraine-data/moraine/query/internal/server/pagetoken"
	"github.com/moraine-data/moraine/query/internal/webhooks"
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

	chains   *chains.Config
	store    *store.ClickHouse
	accounts *accountdb.DB
	access   *access.Access
	webhooks *webhooks.Webhooks
	// usage records requests; usageAPI serves getApiUsageMetrics and
	// getApiLogs from what was recorded.
	usage    *usage.Recorder
	usageAPI *usageapi.API
	// checks serves /v1/health-check and /v1/live-check.
	checks *health.Health
	// exports serves the operations routes and runs export jobs.
	exports *export.Export
	// ch is the ClickHouse connection of the families that read it
	// directly (usage), set once ClickHouse answers.
	ch      chclient.Lazy
	reindex *nftreindex.Service
	health  *obs.Health
	// pools are the chains' JSON-RPC node pools (chains with rpcUrls);
	// nftMeta reads NFT metadata; verifier checks served balances against
	// the nodes.
	pools    map[uint64]*rpc.Pool
	nftMeta  *nftmeta.Reader
	verifier *balances.Verifier
	// routes is the route table: every route of every family, each
	// declared once by the package that serves it.
	routes []server.Route
	// router is the API's handler, built from routes.
	router *server.Engine

	api, ops atomic.Pointer[obs.Server]
	mu       sync.Mutex
	conn     driver.Conn
}

// New validates the configuration, loads the chain file and the page-token
// key, and builds the router; it opens no connection.
func New(cfg Config, deps Deps) (*App, error) {
	if err := (process.Deps{Logger: deps.Logger, Registry: deps.Registry}).Validate(); err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cc, err := chains.Load(cfg.ChainsFile)
	if err != nil {
		return nil, err
	}
	cfg.Webhooks.Kafka.Metrics = deps.Registry // franz-go's client metrics (kafkautil.ClientMetrics)
	// What net/http answers by itself (431, 414, malformed requests) in the
	// API's error body too.
	cfg.HTTP.ErrorBody = errorBody
	a := &App{cfg: cfg, logger: deps.Logger, reg: deps.Registry, resolver: deps.Resolver, chains: cc, health: obs.NewHealth()}
	if err := a.build(); err != nil {
		return nil, err
	}
	return a, nil
}

// build makes the store, the account store, access control, the webhook
// half, the data API, and the router from their routes.
func (a *App) build() error {
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
	plans, err := a.cfg.Plans.Load()
	if err != nil {
		return err
	}
	if a.accounts, err = accountdb.New(a.cfg.AccountDB, a.reg); err != nil {
		return err
	}
	if a.access, err = access.New(a.cfg.Access, access.Deps{Logger: a.logger, Registerer: a.reg, Keys: a.accounts, Plans: plans}); err != nil {
		return err
	}
	if a.webhooks, err = webhooks.New(a.cfg.Webhooks, webhooks.Deps{
		Logger: a.logger, Registerer: a.reg, Chains: a.chains, DB: a.accounts, Indexed: webhooks.StoreIndexed{Store: a.store},
		Plans: plans, PageTokenKey: key, Resolver: a.resolver,
	}); err != nil {
		return err
	}
	// chainID is the decimal EVM chain id of a configured chain named by
	// its EVM or blockchain id, "" for any other value.
	chainID := func(p string) string {
		if ch, ok := a.chains.Find(p); ok {
			return ch.EVMChainID
		}
		return ""
	}
	if a.usage, err = usage.New(a.cfg.Usage, usage.Deps{
		Logger: a.logger.With("component", "usage"), Registerer: a.reg, Kafka: a.cfg.Webhooks.Kafka, ChainID: chainID,
	}); err != nil {
		return err
	}
	if a.usageAPI, err = usageapi.New(usageapi.Deps{
		Logger: a.logger.With("component", "usage"), Registerer: a.reg, Conn: &a.ch, Timeout: a.cfg.Store.QueryTimeout,
		Operators: a.accounts, OperatorTTL: a.cfg.Access.Auth.CacheTTL, ChainID: chainID,
		PageTokenKey: key, PageTokenTTL: a.cfg.PageToken.TTL,
	}); err != nil {
		return err
	}
	// Contract metadata reads go through a pool per chain: every node of
	// the chains file, with failover and the nodes' limits.
	pools := make(map[uint64]*rpc.Pool, len(a.chains.Chains))
	for _, c := range a.chains.Chains {
		pc := rpc.ForChain(c)
		pc.WSURL, pc.Logger = "", a.logger
		pool, err := rpc.NewPool(pc, rpc.NewMetrics(a.reg))
		if err != nil {
			return err
		}
		pools[c.ID()] = pool
	}
	contracts := tokenmeta.NewWithPools(a.cfg.Contracts, pools, tokenmeta.Deps{Logger: a.logger, Registerer: a.reg, Subsystem: "query"})
	// The balance routes read the chains' nodes through the same pools.
	a.pools = pools
	bal := a.buildBalances()
	// reindexNft requests go to the processor's NFT metadata worker over
	// the same brokers as the webhook changes.
	if a.reindex, err = nftreindex.New(nftreindex.Deps{Logger: a.logger, Registerer: a.reg, Kafka: a.cfg.Webhooks.Kafka}); err != nil {
		return err
	}
	a.health.Add("nft_reindex", a.reindex.Ready)
	data, err := api.New(api.Deps{
		Logger: a.logger.With("component", "api"), Chains: a.chains, History: a.store, Contracts: contracts,
		Store: a.store, Tokens: tokens, Config: a.cfg.API, Reindex: a.reindex,
		Balances: bal, NFTMetadata: a.nftMeta, BalanceSettle: uint64(a.cfg.Store.ReorgWindow),
	})
	if err != nil {
		return err
	}
	a.routes = append(data.Routes(), a.webhooks.Routes()...)
	if a.checks, err = health.New(health.Deps{
		Logger: a.logger.With("component", "health"), Registerer: a.reg, Conn: &a.ch, Kafka: a.usage.Ping,
		AddressWatch: a.webhooks.Ready,
	}); err != nil {
		return err
	}
	if a.exports, err = export.New(a.cfg.Export, export.Deps{
		Logger: a.logger.With("component", "export"), Registerer: a.reg, Kafka: a.cfg.Webhooks.Kafka, Conn: &a.ch,
		Timeout: a.cfg.Store.QueryTimeout, History: a.store, Chains: a.chains, Plans: plans, LinkKey: key,
	}); err != nil {
		return err
	}
	a.routes = append(a.routes, a.usageAPI.Routes()...)
	a.routes = append(a.routes, a.checks.Routes()...)
	a.routes = append(a.routes, a.exports.Routes()...)
	// Requests are recorded around access control, so refused ones are too.
	var middleware []gin.HandlerFunc
	if a.cfg.Usage.Enabled {
		a.usage.Expect(a.routes)
		middleware = append(middleware, a.usage.Middleware())
	}
	middleware = append(middleware, a.access.Middleware()...)
	router, err := server.New(a.routes, server.Deps{
		Logger: a.logger.With("component", "api"), Registerer: a.reg, TrustedProxies: a.cfg.TrustedProxyList,
		Middleware: middleware,
	})
	if err != nil {
		return err
	}
	a.router = router
	return nil
}

// buildBalances assembles the balance routes' reads (pkg/balances): on the
// store's connection, node reads through each chain's pool (a.pools), and
// the verifier.
func (a *App) buildBalances() balances.Service {
	cfg := a.cfg.Balances
	logger := a.logger.With("component", "balances")
	db, node := a.store.BalanceDB(), balances.NewRPCNode(a.pools)
	nfts := balances.NewNFTs(db, a.store)
	svc := balances.Service{
		Reader: balances.NewReader(db, a.store, balances.NewOpener(db, nfts, node, cfg.NodeTimeout, logger)),
		Native: balances.NewNative(node, cfg.NodeTimeout, cfg.NativeCacheSize, a.reg, "query"),
		NFTs:   nfts,
	}
	svc.Reader.Remember(cfg.DirectoryPairs, cfg.DirectoryHolderPairs)
	a.nftMeta = nftmeta.NewReader(a.cfg.Store.QueryTimeout)
	a.verifier = balances.NewVerifier(cfg.Verify, balances.VerifierDeps{
		DB: db, Reader: svc.Reader, Node: node, Native: svc.Native, NativeNode: node, Logger: logger,
		Registerer: a.reg, Subsystem: "query",
		Heads: func(ctx context.Context) (map[uint64]uint64, error) {
			heads, err := a.store.Heads(ctx)
			if err != nil {
				return nil, err
			}
			out := make(map[uint64]uint64, len(heads))
			for id, h := range heads {
				if h.Exists {
					out[id] = h.Number
				}
			}
			return out, nil
		},
	})
	return svc
}

// Run binds both servers, serves, and connects to ClickHouse in the
// background, until ctx ends or a server fails; then the servers drain and
// the connection closes.
func (a *App) Run(ctx context.Context) error {
	ops, err := obs.Listen(a.cfg.Ops.ListenAddress, obs.OpsMux(a.reg, a.health), a.logger)
	if err != nil {
		return fmt.Errorf("query: ops listener: %w", err)
	}
	api, err := obs.ListenHTTP(a.cfg.HTTPListenAddress, a.router, a.logger, a.cfg.HTTP)
	if err != nil {
		// Close the ops listener: Serve on an ended context shuts down.
		done, cancel := context.WithCancel(context.Background())
		cancel()
		_ = ops.Serve(done, a.cfg.ShutdownTimeout)
		return fmt.Errorf("query: api listener: %w", err)
	}
	a.api.Store(api)
	a.ops.Store(ops)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ops.Serve(gctx, a.cfg.ShutdownTimeout) })
	g.Go(func() error { return api.Serve(gctx, a.cfg.ShutdownTimeout) })
	g.Go(func() error { return a.access.Run(gctx) })
	g.Go(func() error { return a.webhooks.Run(gctx) })
	g.Go(func() error { return a.exports.Run(gctx) })
	g.Go(func() error {
		<-gctx.Done()
		a.checks.Stopping()
		return nil
	})
	for _, p := range a.pools {
		g.Go(func() error { _ = p.Run(gctx); return nil })
	}
	g.Go(func() error { return a.verifier.Run(gctx) })
	g.Go(func() error { return a.reindex.Run(gctx) })
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
		a.accounts.SetConn(conn)
		a.ch.Set(conn)
		a.nftMeta.SetConn(conn)
		a.reindex.SetConn(conn)
		a.logger.Info("clickhouse connected", "addr", a.cfg.ClickHouse.Addr, "database", a.cfg.ClickHouse.Database)
		return nil
	})
	a.logger.Info("query service listening", "api", api.Addr(), "ops", ops.Addr(), "chains", len(a.chains.Chains))
	err = g.Wait()
	// The API has drained: send the last request records.
	flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.ShutdownTimeout)
	a.usage.Close(flush)
	cancel()
	a.exports.Close()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn != nil {
		err = errors.Join(err, a.conn.Close())
	}
	return err
}

// errorBody renders an answer of net/http's (obs.HTTPConfig.ErrorBody) as
// the API's error body.
func errorBody(status int, message string) (string, []byte) {
	b, _ := json.Marshal(apierr.BodyOf(apierr.New(status, message)))
	return "application/json; charset=utf-8", b
}

// APIAddr is the API server's address once Run has bound it ("" before).
func (a *App) APIAddr() string { return a.api.Load().Addr() }

// OpsAddr is the ops server's address once Run has bound it ("" before).
func (a *App) OpsAddr() string { return a.ops.Load().Addr() }
