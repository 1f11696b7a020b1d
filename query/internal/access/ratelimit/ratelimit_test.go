package ratelimit

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/query/internal/access/plan"
)

func TestPolicy(t *testing.T) {
	free, _ := plan.Defaults().Get(plan.Free)
	require.Equal(t, "8000;w=60, 2000000;w=86400", PolicyFor(free, 1).Header())
	// Three instances: each enforces a third, rounded up.
	require.Equal(t, "2667;w=60, 666667;w=86400", PolicyFor(free, 3).Header())
	require.Empty(t, PolicyFor(plan.Plan{}, 1).Windows)
}

func TestMemoryFixedWindows(t *testing.T) {
	m := NewMemory()
	p := Policy{Windows: []Window{{Quota: 30, Length: time.Minute}, {Quota: 50, Length: time.Hour}}}
	t0 := time.Unix(1_700_000_020, 0) // 40 s into a minute
	take := func(at time.Time, cost int64) Decision {
		d, err := m.Take(t.Context(), "s", p, cost, at)
		require.NoError(t, err)
		return d
	}
	d := take(t0, 20)
	require.True(t, d.Allowed)
	require.Equal(t, Decision{Allowed: true, Limit: 30, Remaining: 10, Reset: 20 * time.Second}, d)
	// Over the minute budget: refused, not charged, reset at the minute.
	d = take(t0.Add(time.Second), 20)
	require.False(t, d.Allowed)
	require.Equal(t, 19*time.Second, d.Reset)
	require.Equal(t, int64(10), d.Remaining)
	d = take(t0.Add(time.Second), 10)
	require.True(t, d.Allowed)
	require.Equal(t, int64(0), d.Remaining)
	// Next minute: the minute window starts over, the hour window (20 left)
	// is now the closer one.
	d = take(t0.Add(25*time.Second), 10)
	require.True(t, d.Allowed)
	require.Equal(t, int64(50), d.Limit)
	require.Equal(t, int64(10), d.Remaining)
	// The hour is exhausted: refused until the hour ends.
	d = take(t0.Add(30*time.Second), 20)
	require.False(t, d.Allowed)
	hourEnd := time.Unix((t0.Unix()/3600+1)*3600, 0)
	require.Equal(t, hourEnd.Sub(t0.Add(30*time.Second)), d.Reset)
	// Another subject has its own budget.
	d2, _ := m.Take(t.Context(), "other", p, 20, t0)
	require.True(t, d2.Allowed)

	require.Equal(t, 2, m.Sweep(t0.Add(time.Minute), time.Hour))
	require.Equal(t, 0, m.Sweep(t0.Add(3*time.Hour), time.Hour))
}

func TestMiddleware(t *testing.T) {
	gin.SetMode(gin.TestMode)
	plans, err := plan.Parse([]byte(`{"plans":{"free":{"cuPerMinute":45,"cuPerDay":1000}}}`))
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	now := time.Unix(1_700_000_000, 0)
	mw, err := Middleware(DefaultConfig(), Deps{
		Logger: slog.New(slog.DiscardHandler), Registerer: reg, Limiter: NewMemory(), Plans: plans,
		Subject: func(c *gin.Context) (Subject, bool) { return Subject{Key: "acc", Plan: plan.Free}, true },
		// A block's transactions cost 20 (medium).
		Weight: func(c *gin.Context) int64 { return 20 },
		Now:    func() time.Time { return now },
	})
	require.NoError(t, err)
	r := gin.New()
	var charged []int64
	record := func(c *gin.Context) { c.Next(); charged = append(charged, Charged(c)) }
	r.GET("/v1/chains/:id/blocks/:b/transactions", record, mw, func(c *gin.Context) { c.JSON(200, gin.H{}) })

	do := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/chains/1/blocks/2/transactions", nil))
		return w
	}
	w := do()
	require.Equal(t, 200, w.Code)
	require.Equal(t, "45;w=60, 1000;w=86400", w.Header().Get(HeaderPolicy))
	require.Equal(t, "45", w.Header().Get(HeaderLimit))
	require.Equal(t, "25", w.Header().Get(HeaderRemaining))
	require.Empty(t, w.Header().Get(HeaderRetryAfter))
	require.Equal(t, 200, do().Code)
	w = do()
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	require.Equal(t, "5", w.Header().Get(HeaderRemaining))
	require.Equal(t, "40", w.Header().Get(HeaderRetryAfter)) // 1_700_000_000 is 20 s into its minute
	require.Equal(t, "40", w.Header().Get(HeaderReset))
	var body struct {
		Message    string `json:"message"`
		StatusCode int    `json:"statusCode"`
		Error      string `json:"error"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
	require.Equal(t, 429, body.StatusCode)
	require.Equal(t, "Too Many Requests", body.Error)
	require.Contains(t, body.Message, "Rate limit exceeded")
	require.Equal(t, 1.0, testutil.ToFloat64(newMetricsProbe(reg, "free", "limited")))
	// What each request was charged (usage accounting): the refused one
	// nothing.
	require.Equal(t, []int64{20, 20, 0}, charged)
}

// newMetricsProbe reads back one series of the middleware's counter.
func newMetricsProbe(reg *prometheus.Registry, planName, result string) prometheus.Collector {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "moraine_query_ratelimit_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var p, r string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "plan":
					p = l.GetValue()
				case "result":
					r = l.GetValue()
				}
			}
			if p == planName && r == result {
				g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "probe"})
				g.Set(m.GetCounter().GetValue())
				return g
			}
		}
	}
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: "probe"})
}
