// Package health serves the hosted Health Check routes as routes of the
// table:
//
//	GET /v1/health-check  data-health-check  ClickHouse reads and writes, Kafka, the address-watch topic
//	GET /v1/live-check    live-check         the process answers HTTP
//
// Both are public (no key) and cost 1 CU. The answers have the hosted
// shape, NestJS terminus's HealthCheckResultDto: {"status": "ok",
// "info": {...}, "error": {}, "details": {...}}, one indicator per check
// ({"status": "up"}, or "down" with a "message").
//
// When a check fails, /v1/health-check answers 503. Its body is the API's
// error body ({message, statusCode, error}, what the SDK parses into its
// ServiceUnavailableError: message lists what is down) with terminus's
// status, info and details beside it (status "error"); after a stop signal
// it answers 503 with status "shutting_down". /v1/live-check answers 200 as
// long as the process serves HTTP, whatever its dependencies.
//
// # What each is for
//
// /v1/health-check is for monitoring (uptime checks, status pages): it
// tells whether every part this instance uses works. It is not the
// load balancer's check: Kafka down, or ClickHouse refusing writes (a
// replica without ZooKeeper), fails it on every instance at once, while
// reads are still served; taking every instance out of rotation would turn
// a partial outage into a whole one. A load balancer and Kubernetes'
// readiness probe use the ops server's /readyz (ClickHouse answers and the
// schema is migrated: the instance can serve reads); Kubernetes' liveness
// probe uses /v1/live-check, which proves the API listener itself answers
// (deploy/k8s/query.yaml).
//
// # Cost
//
// The checks run at most once per CacheTTL (2 s) per instance, whoever
// asks and however often: each writes a row to ClickHouse (health_checks,
// one row per instance once merged), and a flood of health checks must not
// become a flood of inserts. Every check has CheckTimeout (2 s).
//
// # Metrics
//
//	moraine_query_health_check_up{check}   1 while the check last passed, 0 after it failed (set by the first health check)
package health

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/query/internal/server"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
)

// CacheTTL is how long a health check's result is reused.
const CacheTTL = 2 * time.Second

// CheckTimeout bounds each check.
const CheckTimeout = 2 * time.Second

// Check names.
const (
	ClickHouseRead  = "clickhouse_read"
	ClickHouseWrite = "clickhouse_write"
	Kafka           = "kafka"
	AddressWatch    = "address_watch"
)

// Deps are the checks' collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Conn is ClickHouse, set once it answers.
	Conn *chclient.Lazy
	// Kafka reports whether a broker answers.
	Kafka obs.ReadyCheck
	// AddressWatch reports whether the address-watch topic has been
	// reconciled with ClickHouse (the webhook half's readiness).
	AddressWatch obs.ReadyCheck
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Health serves the health routes.
type Health struct {
	d        Deps
	instance string
	up       *prometheus.GaugeVec
	stopping atomic.Bool

	mu     sync.Mutex // one check at a time; the others reuse its result
	last   result
	lastAt time.Time
}

// result is one run of the checks: the failures by check name.
type result map[string]string

// New validates the collaborators; no I/O.
func New(d Deps) (*Health, error) {
	if d.Logger == nil || d.Registerer == nil || d.Conn == nil || d.Kafka == nil || d.AddressWatch == nil {
		return nil, errors.New("health: Deps.Logger, Registerer, Conn, Kafka and AddressWatch are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	host, _ := os.Hostname()
	var r [4]byte
	_, _ = rand.Read(r[:])
	h := &Health{d: d, instance: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(r[:])),
		up: obs.NewMetrics(d.Registerer, "query").GaugeVec("health_check_up",
			"1 while a check of GET /v1/health-check last passed, 0 after it failed (no series before the first check).", "check")}
	return h, nil
}

// Routes are the health routes of the table.
func (h *Health) Routes() []server.Route {
	return []server.Route{
		{Method: http.MethodGet, Path: "/v1/health-check", Operation: "data-health-check", Weight: server.WeightFree,
			Access: server.Public, Handler: h.healthCheck},
		{Method: http.MethodGet, Path: "/v1/live-check", Operation: "live-check", Weight: server.WeightFree,
			Access: server.Public, Handler: h.liveCheck},
	}
}

// Stopping makes /v1/health-check answer "shutting_down" from now on.
func (h *Health) Stopping() { h.stopping.Store(true) }

// indicator is a HealthIndicatorResultDto.
type indicator struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// answer is a HealthCheckResultDto; failures add the API's error fields.
type answer struct {
	Message    []string             `json:"message,omitempty"`
	StatusCode int                  `json:"statusCode,omitempty"`
	Status     string               `json:"status"`
	Info       map[string]indicator `json:"info"`
	Error      any                  `json:"error"`
	Details    map[string]indicator `json:"details"`
}

func (h *Health) liveCheck(c *gin.Context) {
	c.JSON(http.StatusOK, answer{Status: "ok", Info: map[string]indicator{}, Error: map[string]indicator{}, Details: map[string]indicator{}})
}

func (h *Health) healthCheck(c *gin.Context) {
	if h.stopping.Load() {
		c.JSON(http.StatusServiceUnavailable, answer{Message: []string{"shutting down"}, StatusCode: http.StatusServiceUnavailable,
			Status: "shutting_down", Info: map[string]indicator{}, Error: apierr.ReasonPhrase(http.StatusServiceUnavailable),
			Details: map[string]indicator{}})
		return
	}
	failed := h.check(c.Request.Context())
	a := answer{Status: "ok", Info: map[string]indicator{}, Details: map[string]indicator{}}
	down := map[string]indicator{}
	for _, name := range []string{ClickHouseRead, ClickHouseWrite, Kafka, AddressWatch} {
		in := indicator{Status: "up"}
		if msg, bad := failed[name]; bad {
			in = indicator{Status: "down", Message: msg}
			down[name] = in
			a.Message = append(a.Message, name+" is down: "+msg)
		} else {
			a.Info[name] = in
		}
		a.Details[name] = in
	}
	if len(down) == 0 {
		a.Error = map[string]indicator{}
		c.JSON(http.StatusOK, a)
		return
	}
	sort.Strings(a.Message)
	a.Status, a.StatusCode, a.Error = "error", http.StatusServiceUnavailable, apierr.ReasonPhrase(http.StatusServiceUnavailable)
	c.JSON(http.StatusServiceUnavailable, a)
}

// check runs the checks, or returns the result of a run less than
// CacheTTL old.
func (h *Health) check(ctx context.Context) result {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now := h.d.Now(); !h.lastAt.IsZero() && now.Sub(h.lastAt) < CacheTTL {
		return h.last
	}
	// Detached: a client that hangs up must not fail the run the others
	// reuse.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CheckTimeout)
	defer cancel()
	failed := result{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	run := func(name string, check func(context.Context) error) {
		defer wg.Done()
		if err := check(ctx); err != nil {
			mu.Lock()
			failed[name] = err.Error()
			mu.Unlock()
		}
	}
	wg.Add(3)
	go run("clickhouse", h.clickhouse(failed, &mu))
	go run(Kafka, h.d.Kafka)
	go run(AddressWatch, h.d.AddressWatch)
	wg.Wait()
	for _, name := range []string{ClickHouseRead, ClickHouseWrite, Kafka, AddressWatch} {
		v := 1.0
		if _, bad := failed[name]; bad {
			v = 0
		}
		h.up.WithLabelValues(name).Set(v)
	}
	h.last, h.lastAt = failed, h.d.Now()
	return failed
}

// clickhouse returns the ClickHouse check: write this instance's row, then
// read it back. It records its failures under ClickHouseWrite and
// ClickHouseRead itself (a failed write leaves the read unchecked, so it
// is tried on its own).
func (h *Health) clickhouse(failed result, mu *sync.Mutex) func(context.Context) error {
	return func(ctx context.Context) error {
		fail := func(name string, err error) {
			mu.Lock()
			failed[name] = err.Error()
			mu.Unlock()
		}
		conn, err := h.d.Conn.Get(errors.New("clickhouse: not connected yet"))
		if err != nil {
			fail(ClickHouseWrite, err)
			fail(ClickHouseRead, err)
			return nil
		}
		at := uint64(h.d.Now().UnixMilli())
		if err := write(ctx, conn, h.instance, at); err != nil {
			fail(ClickHouseWrite, err)
			at = 0 // read any row
		}
		var got uint64
		if err := conn.QueryRow(ctx, qRead, h.instance).Scan(&got); err != nil {
			fail(ClickHouseRead, fmt.Errorf("clickhouse: %w", err))
		} else if got < at {
			fail(ClickHouseRead, errors.New("clickhouse: the row just written was not read back"))
		}
		return nil
	}
}

const (
	iWrite = `INSERT INTO health_checks (instance, at)`
	qRead  = `SELECT max(at) FROM health_checks WHERE instance = ?`
)

// write inserts the probe row (context handling as pkg/accountdb's
// inserts: detached, cancelled only after its deadline).
func write(ctx context.Context, conn driver.Conn, instance string, at uint64) error {
	dl, _ := ctx.Deadline()
	ictx, cancel := context.WithDeadline(context.WithoutCancel(ctx), dl)
	defer time.AfterFunc(time.Until(dl), cancel)
	b, err := conn.PrepareBatch(ictx, iWrite)
	if err != nil {
		return fmt.Errorf("clickhouse: %w", err)
	}
	if err := b.Append(instance, at); err != nil {
		_ = b.Abort()
		return err
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("clickhouse: %w", err)
	}
	return nil
}
