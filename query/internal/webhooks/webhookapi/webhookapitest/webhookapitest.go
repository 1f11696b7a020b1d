// Package webhookapitest runs the webhook API in-process for tests: a gin
// router with the auth and rate-limit middleware and the webhook routes, on
// a fresh ClickHouse database and fresh Kafka topics of the real local
// services (pkg/testenv), with the address-watch reconciler running.
package webhookapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/accountdb/accountdbtest"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/guard"
	"github.com/moraine-data/moraine/pkg/guard/guardtest"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/pkg/watch/watchtest"
	"github.com/moraine-data/moraine/query/internal/access"
	"github.com/moraine-data/moraine/query/internal/access/auth"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/access/ratelimit"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/ops/admin"
	"github.com/moraine-data/moraine/query/internal/server"
	"github.com/moraine-data/moraine/query/internal/webhooks"
	"github.com/moraine-data/moraine/query/internal/webhooks/reconcile"
	"github.com/moraine-data/moraine/query/internal/webhooks/webhookapi"
)

// Chains is the test chain file: 43112 and 43113 have webhooks and traces,
// 4337 webhooks without traces, 99999 no webhooks.
const Chains = `{"chains": [
 {"evmChainId": "43112", "name": "Dev", "network": "devnet", "rpcUrls": ["http://127.0.0.1:1"],
  "networkToken": {"name": "Avalanche", "symbol": "AVAX", "decimals": 18}, "traces": true, "webhooks": true},
 {"evmChainId": "43113", "blockchainId": "yH8D7ThNJkxmtkuv2jgBa4P1Rn3Qpr4pPr7QYNfcdoS6k6HWp", "name": "Fuji", "network": "fuji",
  "rpcUrls": ["http://127.0.0.1:1"], "networkToken": {"name": "Avalanche", "symbol": "AVAX", "decimals": 18}, "traces": true, "webhooks": true},
 {"evmChainId": "4337", "name": "Beam", "network": "mainnet", "rpcUrls": ["http://127.0.0.1:1"],
  "networkToken": {"name": "Beam", "symbol": "BEAM", "decimals": 18}, "traces": false, "webhooks": true},
 {"evmChainId": "99999", "name": "Plain", "network": "devnet", "rpcUrls": ["http://127.0.0.1:1"],
  "networkToken": {"name": "Plain", "symbol": "PLN", "decimals": 18}, "traces": false, "webhooks": false}
]}`

// Options adjust Start.
type Options struct {
	Plans *plan.Set
	Hooks webhookapi.Hooks
	// Watch zero: fast test settings (reconcile every 200 ms, grace 300 ms).
	Watch reconcile.Config
	// WrapPublisher injects faults between the API and Kafka.
	WrapPublisher func(webhookapi.Publisher) webhookapi.Publisher
	// RateLimit zero: the defaults.
	RateLimit ratelimit.Config
	// Webhooks zero: the defaults.
	Webhooks webhookapi.Config
	// CH and Kafka reuse a database and topics (a restarted process);
	// nil: fresh ones.
	CH    *chclient.Config
	Kafka *kafkautil.Config
	// NoReconciler leaves the reconciler stopped (Publish still works).
	NoReconciler bool
	// Logger nil: through t.Log.
	Logger *slog.Logger
	// Resolver nil: guardtest.Resolver (example.com and friends resolve
	// to a public address, nothing else resolves).
	Resolver guard.Resolver
	// Indexed nil: the data store on the test database (what replays may
	// cover).
	Indexed webhookapi.Indexed
}

// Env is a running webhook API.
type Env struct {
	URL string
	DB  *accountdb.DB
	CH  chclient.Config
	// Conn is the test database's connection (the tests write indexed
	// blocks with it, for replays).
	Conn     driver.Conn
	Kafka    kafkautil.Config
	Watch    *reconcile.Reconciler
	Admin    *admin.Admin
	Registry *prometheus.Registry
	Handler  http.Handler
}

// TestWatchConfig is quick enough for tests: reconcile every 200 ms,
// grace 300 ms.
func TestWatchConfig() reconcile.Config {
	return reconcile.Config{
		Config: watch.Config{ProduceTimeout: 3 * time.Second}, ReconcileInterval: 200 * time.Millisecond,
		FullReconcileInterval: 2 * time.Second, Lookback: time.Minute, Grace: 300 * time.Millisecond,
	}
}

// PageTokenKey is the fixed test key.
var PageTokenKey = []byte("webhookapitest-page-token-key-0123456789")

// Start runs the API until the test ends.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	gin.SetMode(gin.ReleaseMode)
	logger := o.Logger
	if logger == nil {
		logger = testenv.Logger(t)
	}
	e := &Env{Registry: prometheus.NewRegistry()}
	if o.CH == nil {
		e.DB, e.CH, e.Conn = accountdbtest.Open(t)
	} else {
		e.CH = *o.CH
		e.DB, e.Conn = accountdbtest.Connect(t, e.CH)
	}
	if o.Kafka == nil {
		e.Kafka = testenv.Kafka(t)
	} else {
		e.Kafka = *o.Kafka
	}
	if o.Plans == nil {
		o.Plans = plan.Defaults()
	}
	if o.Watch == (reconcile.Config{}) {
		o.Watch = TestWatchConfig()
	}
	if o.RateLimit == (ratelimit.Config{}) {
		o.RateLimit = ratelimit.DefaultConfig()
	}
	if o.Webhooks == (webhookapi.Config{}) {
		o.Webhooks = webhookapi.DefaultConfig()
	}
	if o.Resolver == nil {
		o.Resolver = guardtest.Resolver{}
	}
	chainCfg, err := chains.Parse([]byte(Chains))
	if err != nil {
		t.Fatal(err)
	}
	clock := accountdb.NewClock(nil)
	e.Admin = &admin.Admin{DB: e.DB, Clock: clock}
	locks := watch.NewLocks()
	e.Watch, err = reconcile.New(o.Watch, reconcile.Deps{Logger: logger, Registerer: e.Registry, Kafka: e.Kafka, Store: e.DB, Locks: locks})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if o.NoReconciler {
		close(done)
	} else {
		go func() {
			defer close(done)
			_ = e.Watch.Run(ctx)
		}()
	}
	t.Cleanup(func() {
		cancel()
		<-done
		e.Watch.Close()
	})

	acc, err := access.New(access.Config{Auth: auth.DefaultConfig(), RateLimit: o.RateLimit},
		access.Deps{Logger: logger, Registerer: e.Registry, Keys: e.DB, Plans: o.Plans})
	if err != nil {
		t.Fatal(err)
	}
	var pub webhookapi.Publisher = e.Watch
	if o.WrapPublisher != nil {
		pub = o.WrapPublisher(pub)
	}
	if o.Indexed == nil {
		var ids []uint64
		for _, c := range chainCfg.Chains {
			ids = append(ids, c.ID())
		}
		st, err := store.New(store.DefaultConfig(), store.Deps{Logger: logger, Registerer: e.Registry, ChainIDs: ids})
		if err != nil {
			t.Fatal(err)
		}
		st.SetConn(e.Conn)
		o.Indexed = webhooks.StoreIndexed{Store: st}
	}
	api, err := webhookapi.New(o.Webhooks, webhookapi.Deps{
		Logger: logger, Registerer: e.Registry, Store: e.DB, Indexed: o.Indexed, Publisher: pub, Locks: locks, Clock: clock,
		Plans: o.Plans, Chains: chainCfg, PageTokenKey: PageTokenKey, Hooks: o.Hooks, Resolver: o.Resolver,
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := server.New(api.Routes(), server.Deps{Logger: logger, Registerer: e.Registry, Middleware: acc.Middleware()})
	if err != nil {
		t.Fatal(err)
	}
	e.Handler = r
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	e.URL = srv.URL
	return e
}

// NewAccount creates an account on planName with one key.
func (e *Env) NewAccount(t testing.TB, planName string) (accountdb.Account, string) {
	t.Helper()
	acc, err := e.Admin.CreateAccount(context.Background(), "test-"+planName, planName)
	if err != nil {
		t.Fatal(err)
	}
	k, err := e.Admin.CreateKey(context.Background(), acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	return acc, k.Key
}

// Response is an HTTP response read whole.
type Response struct {
	Code   int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic value.
func (r Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
	return m
}

// Do sends a request with key in x-glacier-api-key ("" for none); body is
// marshalled unless it is a string or []byte.
func (e *Env) Do(t testing.TB, method, path, key string, body any) Response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, e.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(auth.HeaderGlacierAPIKey, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return Response{Code: resp.StatusCode, Header: resp.Header, Body: b}
}

// Entry is the last record of one address-watch key.
type Entry = watchtest.Entry

// TopicState reads the address-watch topic's last record of every key
// (watchtest.TopicState).
func TopicState(t testing.TB, k kafkautil.Config) map[string]Entry {
	t.Helper()
	return watchtest.TopicState(t, k)
}

// Live returns the keys of state whose last record is not a tombstone.
func Live(state map[string]Entry) map[string]Entry { return watchtest.Live(state) }

// ClickHouseState is what the topic must hold according to ClickHouse.
func ClickHouseState(t testing.TB, db *accountdb.DB) map[string]uint64 {
	t.Helper()
	return watchtest.ClickHouseState(t, db)
}

// Disagreement describes how the topic differs from ClickHouse ("" when
// they agree).
func Disagreement(t testing.TB, db *accountdb.DB, k kafkautil.Config) string {
	t.Helper()
	return watchtest.Disagreement(t, db, k)
}

// WaitAgree waits until the topic agrees with ClickHouse.
func WaitAgree(t testing.TB, db *accountdb.DB, k kafkautil.Config, timeout time.Duration) {
	t.Helper()
	watchtest.WaitAgree(t, db, k, timeout)
}
