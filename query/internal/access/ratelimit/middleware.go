package ratelimit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
)

// Response headers (IETF RateLimit header fields draft, lower case as the
// hosted service sends them).
const (
	HeaderPolicy     = "ratelimit-policy"
	HeaderLimit      = "ratelimit-limit"
	HeaderRemaining  = "ratelimit-remaining"
	HeaderReset      = "ratelimit-reset"
	HeaderRetryAfter = "retry-after"
)

// Config is the rate limiter's settings.
type Config struct {
	Enabled bool
	// Instances is how many query instances share the traffic; each divides
	// every budget by it (see the package doc).
	Instances int
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config { return Config{Enabled: true, Instances: 1} }

// RegisterFlags adds the --ratelimit.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.BoolVar(&c.Enabled, "ratelimit.enabled", d.Enabled, "enforce the plans' compute-unit budgets (429 when exceeded); false: no limits and no ratelimit headers")
	fs.IntVar(&c.Instances, "ratelimit.instances", d.Instances, "number of query instances behind the load balancer; every budget is divided by it because each instance counts on its own")
}

// Validate checks the values.
func (c Config) Validate() error {
	if c.Instances < 1 {
		return errors.New("ratelimit: --ratelimit.instances must be at least 1")
	}
	return nil
}

// Subject identifies who is charged and under which plan.
type Subject struct {
	// Key groups requests: an account id, or the client IP for keyless
	// requests.
	Key string
	// Plan is the plan name (plan.Unauthenticated for keyless requests).
	Plan string
}

// Deps are the middleware's collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Limiter    Limiter
	Plans      *plan.Set
	// Subject says whom to charge; ok false skips limiting (the request is
	// answered by an earlier middleware).
	Subject func(c *gin.Context) (s Subject, ok bool)
	// Weight returns a request's cost in compute units (its route's).
	Weight func(c *gin.Context) int64
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Middleware charges every request its route's weight, sets the ratelimit
// headers, and answers 429 (with ratelimit-reset and retry-after, in
// seconds) when a budget is exhausted. A failing Limiter lets the request
// through: an outage of the counter store must not take the API down.
func Middleware(cfg Config, d Deps) (gin.HandlerFunc, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Logger == nil || d.Registerer == nil || d.Limiter == nil || d.Plans == nil || d.Subject == nil || d.Weight == nil {
		return nil, errors.New("ratelimit: Deps.Logger, Registerer, Limiter, Plans, Subject and Weight are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	m := newMetrics(d.Registerer)
	policies := map[string]Policy{}
	for _, p := range d.Plans.All() {
		policies[p.Name] = PolicyFor(p, cfg.Instances)
	}
	policyOf := func(name string) Policy {
		if p, ok := policies[name]; ok {
			return p
		}
		return PolicyFor(d.Plans.GetOrFree(name), cfg.Instances)
	}
	return func(c *gin.Context) {
		if !cfg.Enabled {
			// Not enforced, still what the request costs.
			c.Set(chargedKey, d.Weight(c))
			return
		}
		s, ok := d.Subject(c)
		if !ok {
			return
		}
		p := policyOf(s.Plan)
		if len(p.Windows) == 0 {
			c.Set(chargedKey, d.Weight(c))
			return
		}
		cost := d.Weight(c)
		dec, err := d.Limiter.Take(c.Request.Context(), s.Key, p, cost, d.Now())
		if err != nil {
			m.requests.WithLabelValues(s.Plan, "error").Inc()
			d.Logger.Warn("rate limiter failed; request let through", "err", err)
			c.Set(chargedKey, cost)
			return
		}
		h := c.Writer.Header()
		h.Set(HeaderPolicy, p.Header())
		h.Set(HeaderLimit, strconv.FormatInt(dec.Limit, 10))
		h.Set(HeaderRemaining, strconv.FormatInt(dec.Remaining, 10))
		if dec.Allowed {
			m.requests.WithLabelValues(s.Plan, "allowed").Inc()
			m.units.WithLabelValues(s.Plan).Add(float64(cost))
			c.Set(chargedKey, cost)
			return
		}
		m.requests.WithLabelValues(s.Plan, "limited").Inc()
		secs := strconv.FormatInt(int64((dec.Reset+time.Second-1)/time.Second), 10)
		h.Set(HeaderReset, secs)
		h.Set(HeaderRetryAfter, secs)
		apierr.Write(c, apierr.New(http.StatusTooManyRequests,
			fmt.Sprintf("Rate limit exceeded: this request costs %d compute units and the budget of plan %s is used up; retry in %s seconds", cost, s.Plan, secs)))
	}, nil
}

const chargedKey = "moraine.ratelimit.charged"

// Charged is what the request was charged in compute units: its route's
// weight once the middleware let it through (also when limits are off or
// the limiter failed: what it costs), 0 when it was refused (429) or never
// reached the middleware (a 401 before charging).
func Charged(c *gin.Context) int64 {
	v, _ := c.Get(chargedKey)
	n, _ := v.(int64)
	return n
}

// RunSweeper forgets idle subjects of m every minute until ctx ends.
func RunSweeper(ctx context.Context, m *Memory, reg prometheus.Registerer) {
	g := obs.NewMetrics(reg, "query").Gauge("ratelimit_subjects",
		"Accounts and client IPs with live rate-limit counters in this instance.")
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			// A day window is the longest: a subject idle for longer has
			// nothing left to count.
			g.Set(float64(m.Sweep(now, 24*time.Hour+time.Minute)))
		}
	}
}

type metrics struct {
	requests *prometheus.CounterVec
	units    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := obs.NewMetrics(reg, "query")
	m := &metrics{
		requests: f.CounterVec("ratelimit_requests_total",
			"Rate-limited requests by plan and result (allowed, limited, error).", "plan", "result"),
		units: f.CounterVec("ratelimit_compute_units_total", "Compute units charged, by plan.", "plan"),
	}
	for _, p := range append([]string{plan.Unauthenticated}, plan.Names...) {
		for _, r := range []string{"allowed", "limited", "error"} {
			m.requests.WithLabelValues(p, r)
		}
		m.units.WithLabelValues(p)
	}
	return m
}
