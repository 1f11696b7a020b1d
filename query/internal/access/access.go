// Package access is what every API request passes before its handler: the
// API key is read into its account (package auth), the request is charged
// its route's compute-unit weight against the plan's budgets (packages plan
// and ratelimit), and a request a route does not allow is refused.
//
// The rules, in order, for every route of the table and for unmatched
// requests (server.RouteOf):
//
//  1. The key headers are read (auth.Identify); a lookup never aborts here.
//  2. A route that needs an account (server.Account) answers 401 to a
//     keyless request before charging it: the caller has nothing to spend
//     and a 429 would hide what is wrong.
//  3. The request is charged the route's Weight: an account under its plan,
//     anyone else (keyless, or with a refused key) by client IP under the
//     unauthenticated tier, so guessing keys is throttled like any keyless
//     use. Over budget: 429 with the rate-limit headers.
//  4. A refused key answers 401 (503 when the key store cannot answer).
//
// Unmatched requests are public and cost the lowest weight, so their 404
// carries the rate-limit headers like every other answer.
package access

import (
	"context"
	"errors"
	"flag"
	"log/slog"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/query/internal/access/auth"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/access/ratelimit"
	"github.com/moraine-data/moraine/query/internal/server"
)

// Config gathers the settings of the parts.
type Config struct {
	Auth      auth.Config
	RateLimit ratelimit.Config
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	return Config{Auth: auth.DefaultConfig(), RateLimit: ratelimit.DefaultConfig()}
}

// RegisterFlags adds the --auth.* and --ratelimit.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Auth.RegisterFlags(fs)
	c.RateLimit.RegisterFlags(fs)
}

// Validate checks every part.
func (c Config) Validate() error { return errors.Join(c.Auth.Validate(), c.RateLimit.Validate()) }

// Deps are access control's collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Keys finds API keys and their accounts (the account store).
	Keys auth.Store
	// Plans are the budgets (shared with the webhook API's limits).
	Plans *plan.Set
	// Limiter counts compute units (a ratelimit.Memory when nil).
	Limiter ratelimit.Limiter
}

// Access is the assembled access control.
type Access struct {
	mw     []gin.HandlerFunc
	memory *ratelimit.Memory
	reg    prometheus.Registerer
}

// New builds the middleware; no I/O.
func New(cfg Config, d Deps) (*Access, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Logger == nil || d.Registerer == nil || d.Keys == nil || d.Plans == nil {
		return nil, errors.New("access: Deps.Logger, Registerer, Keys and Plans are required")
	}
	a := &Access{reg: d.Registerer}
	if d.Limiter == nil {
		a.memory = ratelimit.NewMemory()
		d.Limiter = a.memory
	}
	authn, err := auth.New(cfg.Auth, auth.Deps{Logger: d.Logger.With("component", "auth"), Registerer: d.Registerer, Store: d.Keys})
	if err != nil {
		return nil, err
	}
	limit, err := ratelimit.Middleware(cfg.RateLimit, ratelimit.Deps{
		Logger: d.Logger.With("component", "ratelimit"), Registerer: d.Registerer, Limiter: d.Limiter, Plans: d.Plans,
		Subject: func(c *gin.Context) (ratelimit.Subject, bool) {
			k, p := auth.Subject(c)
			return ratelimit.Subject{Key: k, Plan: p}, true
		},
		Weight: func(c *gin.Context) int64 { return int64(server.RouteOf(c).Weight) },
	})
	if err != nil {
		return nil, err
	}
	requireKey := auth.RequireKey()
	accountOnly := func(c *gin.Context) {
		if server.RouteOf(c).Access == server.Account {
			requireKey(c)
		}
	}
	a.mw = []gin.HandlerFunc{authn.Identify(), accountOnly, limit, auth.RejectInvalid()}
	return a, nil
}

// Middleware is the chain every request runs before its handler
// (server.Deps.Middleware).
func (a *Access) Middleware() []gin.HandlerFunc { return append([]gin.HandlerFunc(nil), a.mw...) }

// Run forgets idle rate-limit counters until ctx ends.
func (a *Access) Run(ctx context.Context) error {
	if a.memory != nil {
		ratelimit.RunSweeper(ctx, a.memory, a.reg)
	}
	return nil
}
