package webhooks_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/accountdb/accountdbtest"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/guard/guardtest"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/access"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/ops/admin"
	"github.com/moraine-data/moraine/query/internal/server"
	"github.com/moraine-data/moraine/query/internal/webhooks"
	"github.com/moraine-data/moraine/query/internal/webhooks/webhookapi/webhookapitest"
)

// TestAssembly wires the parts the way internal/app does, on a route table
// with a stand-in block route: keyless reads are charged to the unauthenticated
// tier, a key's reads to its account, webhook routes work, changes reach
// the topic, and the reconciler becomes ready. (The official SDK runs
// against the whole service in internal/app TestSDKWebhooks.)
func TestAssembly(t *testing.T) {
	_, _, conn := accountdbtest.Open(t)
	k := testenv.Kafka(t)
	cc, err := chains.Parse([]byte(webhookapitest.Chains))
	require.NoError(t, err)
	plans, err := plan.Parse([]byte(`{"plans":{"unauthenticated":{"cuPerMinute":25}}}`))
	require.NoError(t, err)
	cfg := webhooks.DefaultConfig()
	cfg.Kafka, cfg.Watch = k, webhookapitest.TestWatchConfig()
	require.NoError(t, cfg.Validate())
	reg := prometheus.NewRegistry()
	db, err := accountdb.New(accountdb.DefaultConfig(), reg)
	require.NoError(t, err)
	db.SetConn(conn)
	st, err := store.New(store.DefaultConfig(), store.Deps{Logger: testenv.Logger(t), Registerer: reg, ChainIDs: []uint64{43112}})
	require.NoError(t, err)
	st.SetConn(conn)
	w, err := webhooks.New(cfg, webhooks.Deps{Logger: testenv.Logger(t), Registerer: reg, Chains: cc, DB: db, Plans: plans,
		Indexed:      webhooks.StoreIndexed{Store: st},
		PageTokenKey: webhookapitest.PageTokenKey, Resolver: guardtest.Resolver{}})
	require.NoError(t, err)
	gate, err := access.New(access.DefaultConfig(), access.Deps{Logger: testenv.Logger(t), Registerer: reg, Keys: db, Plans: plans})
	require.NoError(t, err)
	block := server.Route{Method: http.MethodGet, Path: "/v1/chains/{chainId}/blocks", Operation: "getLatestBlocks", Weight: server.WeightSmall,
		Handler: func(c *gin.Context) { c.JSON(200, gin.H{"blocks": []any{}}) }}
	r, err := server.New(append(w.Routes(), block), server.Deps{Logger: testenv.Logger(t), Registerer: reg, Middleware: gate.Middleware()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	require.Eventually(t, func() bool { return w.Ready(ctx) == nil }, 30*time.Second, 20*time.Millisecond)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)

	get := func(path, key string) *http.Response {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if key != "" {
			req.Header.Set("x-data-api-key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	// Unauthenticated: 25 CU per minute here, a block list costs 10.
	require.Equal(t, 200, get("/v1/chains/43112/blocks", "").StatusCode)
	resp := get("/v1/chains/43112/blocks", "")
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "5", resp.Header.Get("ratelimit-remaining"))
	require.Equal(t, 429, get("/v1/chains/43112/blocks", "").StatusCode)

	adm := &admin.Admin{DB: db, Clock: accountdb.NewClock(nil)}
	acc, err := adm.CreateAccount(ctx, "a", "free")
	require.NoError(t, err)
	key, err := adm.CreateKey(ctx, acc.ID)
	require.NoError(t, err)
	resp = get("/v1/chains/43112/blocks", key.Key)
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "7990", resp.Header.Get("ratelimit-remaining"))

	req, _ := http.NewRequest("POST", srv.URL+"/v1/webhooks", strings.NewReader(
		`{"eventType":"address_activity","url":"https://example.com/h","chainId":"43112","metadata":{"addresses":["0x9702230A8Ea53601f5cD2dc00fDBc13d4dF4A8c7"]}}`))
	req.Header.Set("x-data-api-key", key.Key)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 201, resp.StatusCode)
	webhookapitest.WaitAgree(t, db, k, 10*time.Second)
}
