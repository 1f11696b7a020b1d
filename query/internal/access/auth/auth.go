package auth

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
)

// Request headers that carry the key. The official SDKs send
// x-glacier-api-key; SEED.md names x-data-api-key. Both are accepted.
const (
	HeaderDataAPIKey    = "x-data-api-key"
	HeaderGlacierAPIKey = "x-glacier-api-key"
)

var (
	// ErrInvalidKey: malformed, unknown or revoked key, or an account that
	// no longer exists.
	ErrInvalidKey = errors.New("auth: invalid API key")
)

// Store is what authentication reads; *accountdb.DB implements it.
type Store interface {
	KeyByHash(ctx context.Context, hash string) (accountdb.Key, error)
	Account(ctx context.Context, id string) (accountdb.Account, error)
}

// Config tunes the key cache.
type Config struct {
	// CacheTTL is how long a lookup (found or not) is reused: a revoked key
	// keeps working, and a plan change takes effect, within this time.
	CacheTTL time.Duration
	// CacheSize bounds the cached keys.
	CacheSize int
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config { return Config{CacheTTL: 5 * time.Second, CacheSize: 100_000} }

// RegisterFlags adds the --auth.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.DurationVar(&c.CacheTTL, "auth.cache-ttl", d.CacheTTL, "how long an API-key lookup is cached; revocations and plan changes take effect within it (0: no cache)")
	fs.IntVar(&c.CacheSize, "auth.cache-size", d.CacheSize, "most API keys cached")
}

// Validate checks the values.
func (c Config) Validate() error {
	if c.CacheTTL < 0 {
		return errors.New("auth: --auth.cache-ttl must not be negative")
	}
	if c.CacheSize < 1 {
		return errors.New("auth: --auth.cache-size must be positive")
	}
	return nil
}

// Deps are the authenticator's collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Store      Store
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Principal is an authenticated caller.
type Principal struct {
	Account accountdb.Account
	KeyID   string
	// KeyPrefix is the key's printable start (its alias in request logs).
	KeyPrefix string
}

// Authenticator resolves API keys to accounts, with a short cache.
type Authenticator struct {
	cfg    Config
	store  Store
	logger *slog.Logger
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]cached

	results *prometheus.CounterVec
	lookups *prometheus.CounterVec
}

type cached struct {
	p       Principal
	invalid bool
	expires time.Time
}

// New validates and allocates; it does no I/O.
func New(cfg Config, d Deps) (*Authenticator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Logger == nil || d.Registerer == nil || d.Store == nil {
		return nil, errors.New("auth: Deps.Logger, Registerer and Store are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	f := obs.NewMetrics(d.Registerer, "query")
	a := &Authenticator{
		cfg: cfg, store: d.Store, logger: d.Logger, now: d.Now, cache: map[string]cached{},
		results: f.CounterVec("auth_requests_total",
			"Requests by authentication result: ok, none (no key), invalid (malformed, unknown, revoked or mismatched key), error (lookup failed).",
			"result"),
		lookups: f.CounterVec("auth_key_lookups_total", "API-key lookups by source: cache or clickhouse.", "source"),
	}
	for _, r := range []string{"ok", "none", "invalid", "error"} {
		a.results.WithLabelValues(r)
	}
	a.lookups.WithLabelValues("cache")
	a.lookups.WithLabelValues("clickhouse")
	return a, nil
}

// Authenticate resolves key: ErrInvalidKey for a malformed, unknown or
// revoked key; an error wrapping accountdb.ErrUnavailable when the lookup
// could not be made.
func (a *Authenticator) Authenticate(ctx context.Context, key string) (Principal, error) {
	if !WellFormed(key) {
		return Principal{}, ErrInvalidKey
	}
	hash := HashKey(key)
	now := a.now()
	if a.cfg.CacheTTL > 0 {
		a.mu.Lock()
		c, ok := a.cache[hash]
		a.mu.Unlock()
		if ok && now.Before(c.expires) {
			a.lookups.WithLabelValues("cache").Inc()
			if c.invalid {
				return Principal{}, ErrInvalidKey
			}
			return c.p, nil
		}
	}
	a.lookups.WithLabelValues("clickhouse").Inc()
	p, err := a.lookup(ctx, hash)
	switch {
	case errors.Is(err, ErrInvalidKey):
		a.put(hash, cached{invalid: true, expires: now.Add(a.cfg.CacheTTL)})
	case err == nil:
		a.put(hash, cached{p: p, expires: now.Add(a.cfg.CacheTTL)})
	}
	return p, err
}

func (a *Authenticator) lookup(ctx context.Context, hash string) (Principal, error) {
	k, err := a.store.KeyByHash(ctx, hash)
	if errors.Is(err, accountdb.ErrNotFound) {
		return Principal{}, ErrInvalidKey
	}
	if err != nil {
		return Principal{}, err
	}
	if k.Revoked() {
		return Principal{}, ErrInvalidKey
	}
	acc, err := a.store.Account(ctx, k.AccountID)
	if errors.Is(err, accountdb.ErrNotFound) {
		return Principal{}, ErrInvalidKey
	}
	if err != nil {
		return Principal{}, err
	}
	return Principal{Account: acc, KeyID: k.ID, KeyPrefix: k.Prefix}, nil
}

func (a *Authenticator) put(hash string, c cached) {
	if a.cfg.CacheTTL <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= a.cfg.CacheSize {
		now := a.now()
		for k, v := range a.cache {
			if !now.Before(v.expires) {
				delete(a.cache, k)
			}
		}
		// Still full: drop arbitrary entries (map order is random).
		for k := range a.cache {
			if len(a.cache) < a.cfg.CacheSize {
				break
			}
			delete(a.cache, k)
		}
	}
	a.cache[hash] = c
}

// Identity is what Identify learned about a request.
type Identity struct {
	// Principal is set when a valid key was sent.
	Principal *Principal
	// ClientIP charges keyless requests.
	ClientIP string
	// Err is set when a key was sent but cannot be accepted (401), or could
	// not be checked (503); RejectInvalid answers it.
	Err *apierr.Error
}

const identityKey = "moraine.auth.identity"

// From returns the request's identity (zero before Identify ran).
func From(c *gin.Context) Identity {
	v, _ := c.Get(identityKey)
	id, _ := v.(Identity)
	return id
}

// Unauthorized is the contract's 401.
func Unauthorized() *apierr.Error { return apierr.New(http.StatusUnauthorized, "Unauthorized") }

// Identify reads the API key headers and records the caller's Identity. It
// never aborts, so the rate limiter can charge a bad key's client IP
// before RejectInvalid answers 401.
func (a *Authenticator) Identify() gin.HandlerFunc {
	return func(c *gin.Context) {
		id := Identity{ClientIP: c.ClientIP()}
		data, hasData := header(c, HeaderDataAPIKey)
		glacier, hasGlacier := header(c, HeaderGlacierAPIKey)
		key := data
		if hasGlacier {
			key = glacier
		}
		switch {
		case !hasData && !hasGlacier:
			a.results.WithLabelValues("none").Inc()
		case hasData && hasGlacier && data != glacier:
			a.results.WithLabelValues("invalid").Inc()
			id.Err = Unauthorized()
		default:
			p, err := a.Authenticate(c.Request.Context(), key)
			switch {
			case err == nil:
				a.results.WithLabelValues("ok").Inc()
				id.Principal = &p
			case errors.Is(err, ErrInvalidKey):
				a.results.WithLabelValues("invalid").Inc()
				id.Err = Unauthorized()
			default:
				a.results.WithLabelValues("error").Inc()
				id.Err = apierr.Unavailable("Service Unavailable", err)
			}
		}
		c.Set(identityKey, id)
	}
}

// header returns a header's value and whether it was sent (non-empty).
func header(c *gin.Context, name string) (string, bool) {
	v := c.GetHeader(name)
	return v, v != ""
}

// RejectInvalid answers a request whose key was refused: 401 for a bad
// key, 503 when it could not be checked. Keyless requests pass.
func RejectInvalid() gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := From(c).Err; err != nil {
			apierr.Write(c, err)
		}
	}
}

// RequireKey answers 401 to a request that carries no key (routes that
// need an account; a refused key is RejectInvalid's). It runs before the
// rate limiter: a keyless caller has nothing to spend on such a route, and
// a 429 would hide what is wrong.
func RequireKey() gin.HandlerFunc {
	return func(c *gin.Context) {
		id := From(c)
		if id.Principal == nil && id.Err == nil {
			apierr.Write(c, Unauthorized())
		}
	}
}

// Subject is whom the rate limiter charges: the account under its plan, or
// the client IP under the unauthenticated tier (also for a refused key).
func Subject(c *gin.Context) (key, planName string) {
	id := From(c)
	if id.Principal != nil {
		return "account:" + id.Principal.Account.ID, id.Principal.Account.Plan
	}
	return "ip:" + id.ClientIP, plan.Unauthenticated
}
