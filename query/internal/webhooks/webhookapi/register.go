package webhookapi

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/guard"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/server"
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
	// Indexed says what of each chain is indexed (the bounds of replays).
	Indexed   Indexed
	Publisher Publisher
	// Locks are shared with the reconciler (reconcile.Reconciler).
	Locks  *watch.Locks
	Clock  *accountdb.Clock
	Plans  *plan.Set
	Chains *chains.Config
	// PageTokenKey signs page tokens (at least 32 bytes, the same on every
	// instance).
	PageTokenKey []byte
	Hooks        Hooks
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Resolver resolves webhook URL hosts (net.DefaultResolver when nil).
	Resolver guard.Resolver
}

// API is the webhook and shared-secret routes.
type API struct{ h *handlers }

// New validates the settings and collaborators; no I/O.
func New(cfg Config, d Deps) (*API, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Logger == nil || d.Registerer == nil || d.Store == nil || d.Indexed == nil || d.Publisher == nil ||
		d.Locks == nil || d.Clock == nil || d.Plans == nil || d.Chains == nil {
		return nil, errors.New("webhookapi: Deps.Logger, Registerer, Store, Indexed, Publisher, Locks, Clock, Plans and Chains are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	tokens, err := newTokenCodec(d.PageTokenKey, cfg.PageTokenTTL, d.Now)
	if err != nil {
		return nil, err
	}
	return &API{h: &handlers{
		svc: &service{
			cfg: cfg, store: d.Store, indexed: d.Indexed, pub: d.Publisher, locks: d.Locks, clock: d.Clock, plans: d.Plans,
			hooks: d.Hooks, chains: d.Chains, logger: d.Logger.With("component", "webhookapi"), now: d.Now,
			metrics: newMetrics(d.Registerer),
			policy:  guard.Policy{AllowPrivate: cfg.AllowPrivateTargets, Resolver: d.Resolver, ResolveTimeout: cfg.URLResolveTimeout},
		},
		chains: d.Chains, tokens: tokens, maxBody: cfg.MaxBodyBytes,
	}}, nil
}

// confirmationsProperty documents the confirmations field (a moraine
// extension, docs/webhook-stream.md) of the webhook's request and response
// schemas; updateDoc the update route's extension properties (createDoc,
// beside the replay routes, the create route's).
var (
	confirmationsProperty = fmt.Sprintf(`{"type": "integer", "minimum": 0, "maximum": %d, "default": 0, "description": "moraine extension: `+
		`how many blocks must be on top of a block before its activity is delivered. 0 delivers at once and follows a `+
		`message whose block a reorg orphans with a signed retraction; N waits for N blocks and never delivers activity `+
		`of a block orphaned before (docs/webhook-stream.md)."}`, MaxConfirmations)
	updateDoc = `{"UpdateWebhookRequest": {"confirmations": ` + confirmationsProperty +
		`}, "EVMAddressActivityResponse": {"confirmations": ` + confirmationsProperty + `}}`
)

// Routes is the webhook API's part of the route table. Every route needs
// an API key (server.Account): webhooks belong to accounts. The
// custom-method paths carry a literal colon (AIP-136).
func (a *API) Routes() []server.Route {
	h := a.h
	route := func(method, path, op string, w server.Weight, fn gin.HandlerFunc) server.Route {
		return server.Route{Method: method, Path: path, Operation: op, Weight: w, Access: server.Account, Handler: fn}
	}
	create := route(http.MethodPost, "/v1/webhooks", "createWebhook", server.WeightMedium, h.create)
	create.Properties = createDoc
	update := route(http.MethodPatch, "/v1/webhooks/{id}", "updateWebhook", server.WeightMedium, h.update)
	update.Properties = updateDoc
	return []server.Route{
		create,
		route(http.MethodGet, "/v1/webhooks", "listWebhooks", server.WeightSmall, h.list),
		route(http.MethodPost, "/v1/webhooks:generateOrRotateSharedSecret", "generateOrRotateSharedSecret", server.WeightMedium, h.rotateSecret),
		route(http.MethodGet, "/v1/webhooks:getSharedSecret", "getSharedSecret", server.WeightSmall, h.getSecret),
		route(http.MethodGet, "/v1/webhooks/{id}", "getWebhook", server.WeightSmall, h.get),
		update,
		route(http.MethodDelete, "/v1/webhooks/{id}", "deactivateWebhook", server.WeightMedium, h.deactivate),
		route(http.MethodGet, "/v1/webhooks/{id}/addresses", "getAddressesFromWebhook", server.WeightMedium, h.listAddresses),
		route(http.MethodPatch, "/v1/webhooks/{id}/addresses", "addAddressesToWebhook", server.WeightMedium, h.addAddresses),
		route(http.MethodDelete, "/v1/webhooks/{id}/addresses", "removeAddressesFromWebhook", server.WeightMedium, h.removeAddresses),
		// moraine's extension: the delivery log, priced like a list.
		{Method: http.MethodGet, Path: "/v1/webhooks/{id}/deliveries", Operation: "listWebhookDeliveries", Weight: server.WeightSmall,
			Access: server.Account, Extension: deliveriesDoc, Handler: h.listDeliveries},
		// moraine's extension: replays (docs/webhook-stream.md). Starting
		// one costs the most of any route: it reads history and sends it.
		{Method: http.MethodPost, Path: "/v1/webhooks/{id}:replay", Operation: "replayWebhook", Weight: server.WeightXXL,
			Access: server.Account, Extension: replayDoc, Handler: h.startReplay},
		{Method: http.MethodGet, Path: "/v1/webhooks/{id}/replays", Operation: "listWebhookReplays", Weight: server.WeightSmall,
			Access: server.Account, Extension: listReplaysDoc, Handler: h.listReplays},
		{Method: http.MethodGet, Path: "/v1/webhooks/{id}/replays/{replayId}", Operation: "getWebhookReplay", Weight: server.WeightSmall,
			Access: server.Account, Extension: getReplayDoc, Handler: h.getReplay},
		{Method: http.MethodPost, Path: "/v1/webhooks/{id}/replays/{replayId}:cancel", Operation: "cancelWebhookReplay", Weight: server.WeightSmall,
			Access: server.Account, Extension: cancelReplayDoc, Handler: h.cancelReplay},
	}
}

type metrics struct {
	changes         *prometheus.CounterVec
	publishFailures *prometheus.CounterVec
	deduplicated    prometheus.Counter
	replays         prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := obs.NewMetrics(reg, "query")
	m := &metrics{
		changes: f.CounterVec("webhook_changes_total", "Webhook, address and shared-secret changes written, by operation.", "op"),
		publishFailures: f.CounterVec("webhook_publish_failures_total",
			"Changes acknowledged before their address-watch records were delivered (the reconciler publishes them), by operation.", "op"),
		deduplicated: f.Counter("webhook_creates_deduplicated_total",
			"Creates answered with the webhook an identical earlier request made (client retries)."),
		replays: f.Counter("webhook_replays_created_total",
			"Webhook replays requested (POST /v1/webhooks/{id}:replay, or fromBlock on create)."),
	}
	for _, op := range []Op{OpCreate, OpUpdate, OpDeactivate, OpAddAddresses, OpRemoveAddresses, OpRotateSecret} {
		m.changes.WithLabelValues(string(op))
		m.publishFailures.WithLabelValues(string(op))
	}
	return m
}
