package webhookapi

import (
	"errors"
	"flag"
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/guard"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/query/internal/access/auth"
	"github.com/moraine-data/moraine/query/internal/access/plan"
)

// Config is the webhook API's settings.
type Config struct {
	// CreateDedupeWindow: an identical create from the same account within
	// this window returns the webhook already created instead of a second
	// one (the SDK retries POST after 5xx and connection errors for up to
	// 2 minutes). 0 disables.
	CreateDedupeWindow time.Duration
	// MaxAddressesInResponse caps metadata.addresses in webhook responses;
	// GET /v1/webhooks/{id}/addresses pages through all of them.
	MaxAddressesInResponse int
	// MaxBodyBytes caps request bodies.
	MaxBodyBytes int64
	// PageTokenTTL is how long a nextPageToken stays valid (0: forever).
	PageTokenTTL time.Duration
	// AllowPrivateTargets accepts webhook URLs that name or resolve to
	// internal addresses (--delivery.allow-private-targets, the flag
	// delivery reads for the same policy at connection time).
	AllowPrivateTargets bool
	// URLResolveTimeout bounds the DNS lookup of a webhook URL's host.
	URLResolveTimeout time.Duration
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	return Config{
		CreateDedupeWindow:     2 * time.Minute,
		MaxAddressesInResponse: 100_000,
		MaxBodyBytes:           8 << 20,
		PageTokenTTL:           24 * time.Hour,
		URLResolveTimeout:      2 * time.Second,
	}
}

// RegisterFlags adds the --webhooks.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.DurationVar(&c.CreateDedupeWindow, "webhooks.create-dedupe-window", d.CreateDedupeWindow, "an identical POST /v1/webhooks from the same account within this window returns the webhook it already created (protects against SDK retries; 0 disables)")
	fs.IntVar(&c.MaxAddressesInResponse, "webhooks.max-addresses-in-response", d.MaxAddressesInResponse, "most addresses listed in a webhook's metadata.addresses (GET /v1/webhooks/{id}/addresses pages through all)")
	fs.Int64Var(&c.MaxBodyBytes, "webhooks.max-body-bytes", d.MaxBodyBytes, "largest accepted request body of the webhook routes")
	fs.DurationVar(&c.PageTokenTTL, "webhooks.page-token-ttl", d.PageTokenTTL, "how long a webhook or address nextPageToken stays valid (0: forever)")
	fs.DurationVar(&c.URLResolveTimeout, "webhooks.url-resolve-timeout", d.URLResolveTimeout, "longest DNS lookup of a webhook URL's host when it is accepted (a lookup that fails for the resolver's reasons answers 503)")
	guard.RegisterFlags(fs, &c.AllowPrivateTargets)
}

// Validate checks the values.
func (c Config) Validate() error {
	switch {
	case c.CreateDedupeWindow < 0:
		return errors.New("webhookapi: --webhooks.create-dedupe-window must not be negative")
	case c.MaxAddressesInResponse < 1:
		return errors.New("webhookapi: --webhooks.max-addresses-in-response must be positive")
	case c.MaxBodyBytes < 1024:
		return errors.New("webhookapi: --webhooks.max-body-bytes must be at least 1024")
	case c.PageTokenTTL < 0:
		return errors.New("webhookapi: --webhooks.page-token-ttl must not be negative")
	case c.URLResolveTimeout <= 0:
		return errors.New("webhookapi: --webhooks.url-resolve-timeout must be positive")
	}
	return nil
}

// Deps are the webhook API's collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Store      Store
	Publisher  Publisher
	// Locks are shared with the reconciler (reconcile.Reconciler).
	Locks  *watch.Locks
	Clock  *accountdb.Clock
	Plans  *plan.Set
	Chains *chains.Config
	// PageTokenKey signs page tokens (at least 32 bytes, the same on every
	// instance).
	PageTokenKey []byte
	// Middleware runs before every webhook handler, in order: typically
	// auth.Identify, the rate limiter and auth.RejectInvalid. Register adds
	// auth.RequireAccount after it.
	Middleware []gin.HandlerFunc
	Hooks      Hooks
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Resolver resolves webhook URL hosts (net.DefaultResolver when nil).
	Resolver guard.Resolver
}

// Register adds the webhook and shared-secret routes to rg, the /v1 group.
func Register(rg *gin.RouterGroup, cfg Config, d Deps) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if d.Logger == nil || d.Registerer == nil || d.Store == nil || d.Publisher == nil ||
		d.Locks == nil || d.Clock == nil || d.Plans == nil || d.Chains == nil {
		return errors.New("webhookapi: Deps.Logger, Registerer, Store, Publisher, Locks, Clock, Plans and Chains are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	tokens, err := newTokenCodec(d.PageTokenKey, cfg.PageTokenTTL, d.Now)
	if err != nil {
		return err
	}
	h := &handlers{
		svc: &service{
			cfg: cfg, store: d.Store, pub: d.Publisher, locks: d.Locks, clock: d.Clock, plans: d.Plans,
			hooks: d.Hooks, chains: d.Chains, logger: d.Logger.With("component", "webhookapi"), now: d.Now,
			metrics: newMetrics(d.Registerer),
			policy:  guard.Policy{AllowPrivate: cfg.AllowPrivateTargets, Resolver: d.Resolver, ResolveTimeout: cfg.URLResolveTimeout},
		},
		chains: d.Chains, tokens: tokens, maxBody: cfg.MaxBodyBytes,
	}
	chain := func(fn gin.HandlerFunc) []gin.HandlerFunc {
		out := append([]gin.HandlerFunc(nil), d.Middleware...)
		return append(out, auth.RequireAccount(), fn)
	}
	get := func(path string, fn gin.HandlerFunc) {
		rg.GET(path, chain(fn)...)
		// Express answers HEAD for every GET route (as the block routes
		// do); net/http drops the body.
		rg.HEAD(path, chain(fn)...)
	}
	rg.POST("/webhooks", chain(h.create)...)
	get("/webhooks", h.list)
	// The custom-method paths carry a literal colon (AIP-136). gin reads
	// ":" as a parameter; "\:" registers it literally (gin >= 1.10), and the
	// routes do not clash with /webhooks/:id, which has a "/" first.
	rg.POST(`/webhooks\:generateOrRotateSharedSecret`, chain(h.rotateSecret)...)
	get(`/webhooks\:getSharedSecret`, h.getSecret)
	get("/webhooks/:id", h.get)
	rg.PATCH("/webhooks/:id", chain(h.update)...)
	rg.DELETE("/webhooks/:id", chain(h.deactivate)...)
	get("/webhooks/:id/addresses", h.listAddresses)
	rg.PATCH("/webhooks/:id/addresses", chain(h.addAddresses)...)
	rg.DELETE("/webhooks/:id/addresses", chain(h.removeAddresses)...)
	get("/webhooks/:id/deliveries", h.listDeliveries)
	return nil
}

type metrics struct {
	changes         *prometheus.CounterVec
	publishFailures *prometheus.CounterVec
	deduplicated    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := obs.NewMetrics(reg, "query")
	m := &metrics{
		changes: f.CounterVec("webhook_changes_total", "Webhook, address and shared-secret changes written, by operation.", "op"),
		publishFailures: f.CounterVec("webhook_publish_failures_total",
			"Changes acknowledged before their address-watch records were delivered (the reconciler publishes them), by operation.", "op"),
		deduplicated: f.Counter("webhook_creates_deduplicated_total",
			"Creates answered with the webhook an identical earlier request made (client retries)."),
	}
	for _, op := range []Op{OpCreate, OpUpdate, OpDeactivate, OpAddAddresses, OpRemoveAddresses, OpRotateSecret} {
		m.changes.WithLabelValues(string(op))
		m.publishFailures.WithLabelValues(string(op))
	}
	return m
}
