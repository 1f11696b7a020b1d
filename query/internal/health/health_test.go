package health

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/server"
)

type env struct {
	h     *Health
	srv   http.Handler
	proxy *testenv.Proxy
	kafka atomic.Value // error
	runs  atomic.Int32
	now   time.Time
}

func newEnv(t *testing.T) *env {
	t.Helper()
	chCfg, _ := testenv.ClickHouse(t) // migrated
	e := &env{now: time.Now()}
	e.proxy = testenv.StartProxy(t, chCfg.Addr)
	via := chCfg
	via.Addr = e.proxy.Addr()
	conn, err := chclient.Open(t.Context(), via, testenv.Logger(t))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	var lazy chclient.Lazy
	lazy.Set(conn)
	e.kafka.Store(errors.New(""))
	e.h, err = New(Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(), Conn: &lazy,
		Kafka: func(context.Context) error {
			e.runs.Add(1)
			if err := e.kafka.Load().(error); err.Error() != "" {
				return err
			}
			return nil
		},
		AddressWatch: func(context.Context) error { return nil },
		Now:          func() time.Time { return e.now }})
	require.NoError(t, err)
	e.srv, err = server.New(e.h.Routes(), server.Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	return e
}

func (e *env) get(t *testing.T, path string) (int, map[string]any) {
	t.Helper()
	w := httptest.NewRecorder()
	e.srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	var body map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
	return w.Code, body
}

// later moves the clock past the cache.
func (e *env) later() { e.now = e.now.Add(CacheTTL) }

func TestHealthCheck(t *testing.T) {
	e := newEnv(t)
	up := map[string]any{"status": "up"}
	code, body := e.get(t, "/v1/health-check")
	require.Equal(t, 200, code)
	all := map[string]any{"clickhouse_read": up, "clickhouse_write": up, "kafka": up, "address_watch": up}
	require.Equal(t, map[string]any{"status": "ok", "info": all, "error": map[string]any{}, "details": all}, body)
	require.Equal(t, 1.0, testutil.ToFloat64(e.h.up.WithLabelValues(ClickHouseWrite)))

	// Within the cache, no check runs again.
	for range 20 {
		code, _ = e.get(t, "/v1/health-check")
		require.Equal(t, 200, code)
	}
	require.Equal(t, int32(1), e.runs.Load())

	// Kafka down: 503, in the API's error shape and terminus's.
	e.kafka.Store(errors.New("kafka: no broker"))
	e.later()
	code, body = e.get(t, "/v1/health-check")
	require.Equal(t, 503, code)
	require.Equal(t, "error", body["status"])
	require.Equal(t, 503.0, body["statusCode"])
	require.Equal(t, "Service Unavailable", body["error"])
	require.Equal(t, []any{"kafka is down: kafka: no broker"}, body["message"])
	require.Equal(t, map[string]any{"status": "down", "message": "kafka: no broker"}, body["details"].(map[string]any)["kafka"])
	require.NotContains(t, body["info"], "kafka")
	require.Equal(t, 0.0, testutil.ToFloat64(e.h.up.WithLabelValues(Kafka)))

	// ClickHouse unreachable: reads and writes down.
	e.kafka.Store(errors.New(""))
	e.proxy.Cut()
	e.later()
	code, body = e.get(t, "/v1/health-check")
	require.Equal(t, 503, code)
	details := body["details"].(map[string]any)
	require.Equal(t, "down", details["clickhouse_read"].(map[string]any)["status"])
	require.Equal(t, "down", details["clickhouse_write"].(map[string]any)["status"])
	require.Equal(t, "up", details["kafka"].(map[string]any)["status"])
	require.Len(t, body["message"], 2)
	// The live check does not care.
	code, body = e.get(t, "/v1/live-check")
	require.Equal(t, 200, code)
	require.Equal(t, map[string]any{"status": "ok", "info": map[string]any{}, "error": map[string]any{}, "details": map[string]any{}}, body)

	// Back.
	e.proxy.Restore()
	e.later()
	require.Eventually(t, func() bool { e.later(); c, _ := e.get(t, "/v1/health-check"); return c == 200 }, 20*time.Second, 100*time.Millisecond)

	// Stopping: shutting_down, and live-check still answers.
	e.h.Stopping()
	code, body = e.get(t, "/v1/health-check")
	require.Equal(t, 503, code)
	require.Equal(t, "shutting_down", body["status"])
	code, _ = e.get(t, "/v1/live-check")
	require.Equal(t, 200, code)
}
