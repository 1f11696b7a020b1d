package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
	"github.com/moraine-data/moraine/query/internal/server/pagetoken"
)

func init() {
	// Release mode once, before any engine exists: SetMode writes a global.
	gin.SetMode(gin.ReleaseMode)
}

// Store is what the block and chain handlers read; *store.ClickHouse
// implements it, handler tests use a fake.
type Store interface {
	// Heads returns the head of every configured chain (Exists false while
	// a chain has none); the map must not be modified.
	Heads(ctx context.Context) (map[uint64]store.Head, error)
	// Blocks returns up to limit canonical blocks with number <= cursor,
	// newest first.
	Blocks(ctx context.Context, chainID, cursor uint64, limit int) ([]store.Block, error)
	BlockByNumber(ctx context.Context, chainID, number uint64) (store.Block, error)
	BlockByHash(ctx context.Context, chainID uint64, hash store.Hash) (store.Block, error)
	// BlockTransactions returns up to limit (<= 0: all) transactions of b
	// with index >= from, by index.
	BlockTransactions(ctx context.Context, b store.Block, from uint32, limit int) ([]store.Tx, error)
}

// Deps are the router's collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Chains     *chains.Config
	Store      Store
	// History serves the transaction, address and contract routes.
	History HistoryStore
	// Contracts asks token contracts about themselves (eth_call).
	Contracts Contracts
	Tokens    *pagetoken.Codec
	Config    Config
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Middleware runs on every /v1 route, after the route's compute-unit
	// weight is set (RouteWeight) and before its handler: the place for
	// API-key authentication and rate limiting. It aborts with
	// apierr.Write.
	Middleware []gin.HandlerFunc
	// Register adds further route groups to the engine (the webhook API:
	// mgmt.Register), before the per-route series are created, so that
	// their series exist from start-up too.
	Register []func(*gin.Engine) error
}

// Router builds the HTTP API: gin.New() with metrics, access log and panic
// recovery, every route of this package, the OpenAPI document and the
// NestJS-style 404 for anything else. New endpoint groups add a
// register function next to registerChainRoutes and call it here.
func Router(d Deps) (*gin.Engine, error) {
	switch {
	case d.Logger == nil:
		return nil, errors.New("api: Deps.Logger is required")
	case d.Registerer == nil:
		return nil, errors.New("api: Deps.Registerer is required")
	case d.Chains == nil:
		return nil, errors.New("api: Deps.Chains is required")
	case d.Store == nil:
		return nil, errors.New("api: Deps.Store is required")
	case d.Tokens == nil:
		return nil, errors.New("api: Deps.Tokens is required")
	case d.History == nil:
		return nil, errors.New("api: Deps.History is required")
	case d.Contracts == nil:
		return nil, errors.New("api: Deps.Contracts is required")
	}
	if err := d.Config.Validate(); err != nil {
		return nil, err
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	r := gin.New()
	// Express (NestJS) answers a known path with an unknown method as an
	// unknown route: 404 "Cannot POST /v1/chains", never 405. No
	// redirects either: a client gets the answer for what it asked.
	r.HandleMethodNotAllowed = false
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	// Route on the path as sent, as Express does: an escaped slash is part
	// of a segment (/v1/chains/43112%2Fblocks is chain "43112/blocks", a
	// 400), not a separator. Parameters are unescaped after matching.
	r.UseRawPath = true
	r.UnescapePathValues = true
	if err := r.SetTrustedProxies(d.Config.TrustedProxies); err != nil {
		return nil, fmt.Errorf("api: trusted proxies: %w", err)
	}
	m := newMetrics(d.Registerer)
	r.Use(m.middleware(), accessLog(d.Logger), recovery(d.Logger), cors(), keepBadEscapes())
	r.NoRoute(func(c *gin.Context) {
		apierr.Write(c, apierr.NotFound(fmt.Sprintf("Cannot %s %s", c.Request.Method, c.Request.URL.RequestURI())))
	})

	h := &handlers{
		logger: d.Logger, store: d.Store, tokens: d.Tokens, cfg: d.Config, now: d.Now,
		chains:  newChainIndex(d.Chains),
		history: historyDeps{store: d.History, contracts: d.Contracts, tokens: newHistoryTokens(d.Tokens)},
	}
	rt := &routes{group: r.Group("/v1"), middleware: d.Middleware, metrics: m}
	registerChainRoutes(rt, h)
	registerBlockRoutes(rt, h)
	registerHistoryRoutes(rt, h)

	r.GET("/api-json", serveOpenAPI)
	for _, reg := range d.Register {
		if err := reg(r); err != nil {
			return nil, err
		}
	}
	m.initErrorSeries(r.Routes())
	return r, nil
}

// Weight is a route's cost in compute units (CONTRACT.md section 7.1).
type Weight int

// The x-execution-weight values of the spec.
const (
	WeightFree   Weight = 1
	WeightSmall  Weight = 10
	WeightMedium Weight = 20
	WeightLarge  Weight = 50
	WeightXL     Weight = 100
	WeightXXL    Weight = 200
)

const weightKey = "moraine.api.weight"

// RouteWeight returns the compute-unit weight of the matched route, for
// rate-limiting middleware (0 outside /v1 routes).
func RouteWeight(c *gin.Context) Weight {
	w, _ := c.Get(weightKey)
	n, _ := w.(Weight)
	return n
}

// routes registers /v1 handlers with their weight and the shared middleware.
type routes struct {
	group      *gin.RouterGroup
	middleware []gin.HandlerFunc
	metrics    *metrics
}

func (rt *routes) handle(method, path string, w Weight, h gin.HandlerFunc) {
	chain := make([]gin.HandlerFunc, 0, len(rt.middleware)+2)
	chain = append(chain, func(c *gin.Context) { c.Set(weightKey, w) })
	chain = append(chain, rt.middleware...)
	chain = append(chain, h)
	rt.group.Handle(method, path, chain...)
	rt.metrics.initRoute(routeLabel(rt.group.BasePath()+path), method)
	if method == http.MethodGet {
		// Express answers HEAD for every GET route; net/http drops the body.
		rt.group.Handle(http.MethodHead, path, chain...)
	}
}

// Config is the API's own settings.
type Config struct {
	// ChainStaleAfter: a chain whose head this process has not seen advance
	// for this long is listed as UNAVAILABLE (0 disables).
	ChainStaleAfter time.Duration
	// TrustedProxies are the proxies whose X-Forwarded-For is believed
	// for the client IP (none by default).
	TrustedProxies []string
	// StatusTimeout bounds the head read behind chain statuses, so
	// /v1/chains answers quickly (UNAVAILABLE) when ClickHouse hangs.
	StatusTimeout time.Duration
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	return Config{ChainStaleAfter: 10 * time.Minute, StatusTimeout: time.Second}
}

// Validate checks the values.
func (c Config) Validate() error {
	if c.ChainStaleAfter < 0 {
		return errors.New("api: --chains.stale-after must not be negative")
	}
	if c.StatusTimeout <= 0 {
		return errors.New("api: Config.StatusTimeout must be positive")
	}
	return nil
}

// handlers holds what the block and chain handlers share.
type handlers struct {
	logger  *slog.Logger
	store   Store
	tokens  *pagetoken.Codec
	cfg     Config
	now     func() time.Time
	chains  *chainIndex
	history historyDeps
}

// historyDeps are what the transaction, address and contract handlers add.
type historyDeps struct {
	store     HistoryStore
	contracts Contracts
	tokens    *historyTokens
}

// storeError maps a store error to the API error.
func storeError(err error, notFound string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apierr.NotFound(notFound)
	case errors.Is(err, store.ErrUnavailable):
		return apierr.Unavailable("Chain data is temporarily unavailable", err)
	default:
		return apierr.Internal(err)
	}
}

// ok writes a 200 JSON body.
func ok(c *gin.Context, body any) { c.JSON(http.StatusOK, body) }
