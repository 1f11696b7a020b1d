package export

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/access"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/ops/admin"
	"github.com/moraine-data/moraine/query/internal/server"
)

// instance is one query instance's export family, behind real access
// control, on the shared ClickHouse and Kafka.
type instance struct {
	e    *Export
	h    http.Handler
	stop func()
}

type cluster struct {
	t     *testing.T
	k     kafkautil.Config
	conn  driver.Conn
	db    *accountdb.DB
	key   string
	plans *plan.Set
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	k := testenv.Kafka(t)
	_, conn := testenv.ClickHouse(t)
	db, err := accountdb.Open(conn, accountdb.DefaultConfig(), prometheus.NewRegistry())
	require.NoError(t, err)
	adm := &admin.Admin{DB: db, Clock: accountdb.NewClock(nil)}
	acc, err := adm.CreateAccount(t.Context(), "exporter", plan.Free)
	require.NoError(t, err)
	nk, err := adm.CreateKey(t.Context(), acc.ID)
	require.NoError(t, err)
	return &cluster{t: t, k: k, conn: conn, db: db, key: nk.Key, plans: plan.Defaults()}
}

// start runs an instance with workers workers reading h until stop.
func (c *cluster) start(workers int, h History) *instance {
	t := c.t
	reg := prometheus.NewRegistry()
	var lazy chclient.Lazy
	lazy.Set(c.conn)
	cfg := DefaultConfig()
	cfg.Workers = workers
	cfg.RetryPause = 100 * time.Millisecond
	e, err := New(cfg, Deps{Logger: testenv.Logger(t), Registerer: reg, Kafka: c.k, Conn: &lazy, Timeout: 10 * time.Second,
		History: h, Chains: testChains, Plans: c.plans, LinkKey: []byte(strings.Repeat("l", 32)),
		Now: func() time.Time { return day0.AddDate(0, 0, 5) }})
	require.NoError(t, err)
	acc, err := access.New(access.DefaultConfig(), access.Deps{Logger: testenv.Logger(t), Registerer: reg, Keys: c.db, Plans: c.plans})
	require.NoError(t, err)
	router, err := server.New(e.Routes(), server.Deps{Logger: testenv.Logger(t), Registerer: reg, Middleware: acc.Middleware()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	in := &instance{e: e, h: router}
	var stopped bool
	in.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			require.NoError(t, <-done)
			e.Close()
		}
	}
	t.Cleanup(in.stop)
	return in
}

// do sends a request with the account's key and decodes the answer.
func (c *cluster) do(in *instance, method, path, body string, out any) int {
	c.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("x-glacier-api-key", c.key)
	w := httptest.NewRecorder()
	in.h.ServeHTTP(w, r)
	if out != nil {
		require.NoError(c.t, json.Unmarshal(w.Body.Bytes(), out), w.Body.String())
	}
	return w.Code
}

func (c *cluster) status(in *instance, id string) statusResponse {
	var s statusResponse
	require.Equal(c.t, http.StatusOK, c.do(in, "GET", "/v1/operations/"+id, "", &s))
	return s
}

// TestJobSurvivesItsWorker: an instance accepts a job and its worker dies
// mid-export (the task uncommitted); another instance's worker runs it
// again and completes it, and either instance answers its status and
// serves its file.
func TestJobSurvivesItsWorker(t *testing.T) {
	c := newCluster(t)
	stuck := newFake()
	stuck.gate = make(chan struct{}) // never opens
	a := addr(0xa)
	for _, f := range []*fakeHistory{stuck} {
		f.tx(43114, 10, time.Hour, 0, a)
	}
	ok := newFake()
	ok.tx(43114, 10, time.Hour, 0, a)
	ok.tx(43114, 11, 2*time.Hour, 1, a)

	first := c.start(1, stuck)
	body := `{"type": "TRANSACTION_EXPORT_EVM", "firstDate": "2026-03-01", "lastDate": "2026-03-02",
	  "options": {"addresses": ["0x000000000000000000000000000000000000000a"], "includeChains": ["43114"]}}`
	var created statusResponse
	require.Equal(t, http.StatusCreated, c.do(first, "POST", "/v1/operations/transactions:export", body, &created))
	require.Equal(t, statusResponse{OperationID: created.OperationID, OperationType: "TRANSACTION_EXPORT_EVM", OperationStatus: "RUNNING",
		CreatedAt: created.CreatedAt, UpdatedAt: created.CreatedAt}, created)
	// The first worker has it, stuck reading.
	require.Eventually(t, func() bool {
		o, err := first.e.db.operation(t.Context(), created.OperationID)
		return err == nil && o.Attempt == 1
	}, 30*time.Second, 50*time.Millisecond)
	first.stop()

	second := c.start(1, ok)
	require.Eventually(t, func() bool { return c.status(second, created.OperationID).OperationStatus == "COMPLETED" },
		60*time.Second, 100*time.Millisecond)
	done := c.status(first, created.OperationID) // any instance answers
	require.Equal(t, "COMPLETED", done.OperationStatus)
	require.NotNil(t, done.Metadata)
	require.Empty(t, done.Metadata.Code)
	o, err := second.e.db.operation(t.Context(), created.OperationID)
	require.NoError(t, err)
	require.Equal(t, uint32(2), o.Attempt, "the second attempt")

	// The link works without a key, on either instance.
	u, err := url.Parse(done.Metadata.DownloadURL)
	require.NoError(t, err)
	require.Equal(t, "/v1/operations/"+created.OperationID+":download", u.Path)
	for _, in := range []*instance{first, second} {
		w := httptest.NewRecorder()
		in.h.ServeHTTP(w, httptest.NewRequest("GET", u.RequestURI(), nil))
		require.Equal(t, 200, w.Code, w.Body.String())
		require.Equal(t, "text/csv; charset=utf-8", w.Header().Get("Content-Type"))
		recs := lines(t, []string{w.Body.String()})
		require.Len(t, recs, 3)
		require.Equal(t, "10", recs[1][1])
		require.Equal(t, "11", recs[2][1])
	}
	// A link of another operation, or tampered, is refused.
	w := httptest.NewRecorder()
	second.h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/operations/00000000-0000-0000-0000-000000000000:download?"+u.RawQuery, nil))
	require.Equal(t, 400, w.Code)
	// Another account does not see it.
	require.Equal(t, 404, c.do(second, "GET", "/v1/operations/nope", "", nil))
}

// brokenHistory fails every read.
type brokenHistory struct{ *fakeHistory }

func (brokenHistory) AddressList(context.Context, store.ListRequest) (store.ListPage, error) {
	return store.ListPage{}, fmt.Errorf("broken")
}

// TestJobOutcomes: a job that fails every attempt ends FAILED
// (ErrInternal); one past the plan's size COMPLETED_WITH_WARNING with
// nextDate; one whose first day is too big FAILED (ErrInvalidRequest); a
// bad request is a 400 and no job.
func TestJobOutcomes(t *testing.T) {
	c := newCluster(t)
	c.plans, _ = plan.Parse([]byte(`{"plans":{"free":{"exportTransactions":3}}}`))
	f := newFake()
	a := addr(0xa)
	for d := range 3 {
		for i := range 2 {
			f.tx(43114, uint64(100*d+i+1), time.Duration(d)*24*time.Hour+time.Duration(i)*time.Minute, 0, a)
		}
	}
	in := c.start(1, f)
	job := func(first, last string) statusResponse {
		var s statusResponse
		require.Equal(t, http.StatusCreated, c.do(in, "POST", "/v1/operations/transactions:export", `{"type": "TRANSACTION_EXPORT_EVM",
		  "firstDate": "`+first+`", "lastDate": "`+last+`", "options": {"addresses": ["0x000000000000000000000000000000000000000a"],
		  "includeChains": ["43114"]}}`, &s))
		require.Eventually(t, func() bool { s = c.status(in, s.OperationID); return s.OperationStatus != "RUNNING" },
			60*time.Second, 100*time.Millisecond)
		return s
	}
	s := job("2026-03-01", "2026-03-03")
	require.Equal(t, "COMPLETED_WITH_WARNING", s.OperationStatus)
	require.Equal(t, "WarnTruncatedExport", s.Metadata.Code)
	require.Equal(t, "2026-03-02", s.Metadata.NextDate)
	require.NotEmpty(t, s.Metadata.DownloadURL)
	require.Contains(t, s.Message, "ask again with firstDate 2026-03-02")

	c.plans, _ = plan.Parse([]byte(`{"plans":{"free":{"exportTransactions":1}}}`))
	in.stop()
	in = c.start(1, f)
	s = job("2026-03-01", "2026-03-03")
	require.Equal(t, "FAILED", s.OperationStatus)
	require.Equal(t, "ErrInvalidRequest", s.Metadata.Code)
	require.Empty(t, s.Metadata.DownloadURL)

	in.stop()
	in = c.start(1, brokenHistory{f})
	s = job("2026-03-01", "2026-03-01")
	require.Equal(t, "FAILED", s.OperationStatus)
	require.Equal(t, "ErrInternal", s.Metadata.Code)
	require.Contains(t, s.Message, "failed 3 times")

	var bad struct {
		Message []string `json:"message"`
	}
	require.Equal(t, 400, c.do(in, "POST", "/v1/operations/transactions:export", `{"type": "TRANSACTION_EXPORT_EVM",
	  "firstDate": "2026-03-03", "lastDate": "2026-03-01", "options": {"addresses": ["0x0a"], "includeChains": ["43114"]}}`, &bad))
	require.Equal(t, []string{"lastDate 2026-03-01 is before firstDate 2026-03-03", `options.addresses: "0x0a" is not an address (0x and 40 hex digits)`}, bad.Message)
}

// TestExpiredJobsDropped: operations and their files go whole days after
// --export.retention; newer ones stay.
func TestExpiredJobsDropped(t *testing.T) {
	c := newCluster(t)
	in := c.start(0, newFake())
	now := day0.AddDate(0, 0, 5) // the instances' clock
	for i, age := range []time.Duration{10 * 24 * time.Hour, 8 * 24 * time.Hour, time.Hour} {
		o := operation{ID: fmt.Sprint("op", i), Status: statusCompleted, CreatedAt: uint64(now.Add(-age).UnixMilli()), Attempt: 1, Version: 1}
		require.NoError(t, in.e.db.put(t.Context(), o))
		require.NoError(t, in.e.db.putPart(t.Context(), o, 0, []byte("x")))
	}
	in.e.dropExpired(t.Context())
	var ops, files uint64
	require.NoError(t, c.conn.QueryRow(t.Context(), "SELECT count() FROM operations").Scan(&ops))
	require.NoError(t, c.conn.QueryRow(t.Context(), "SELECT count() FROM operation_files").Scan(&files))
	require.Equal(t, [2]uint64{1, 1}, [2]uint64{ops, files}, "only the job of today's day is left")
}
