package usage

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/access/auth"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/access/ratelimit"
	"github.com/moraine-data/moraine/query/internal/server"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// router serves two routes behind the recorder and a stand-in for access
// control: a request with the header "key: k1" is account a1's and charged
// its route's weight, one with "refuse: 1" is refused 401 before charging.
func router(t *testing.T, rec *Recorder) http.Handler {
	t.Helper()
	ok := func(c *gin.Context) { c.JSON(200, gin.H{}) }
	routes := []server.Route{
		{Method: "GET", Path: "/v1/chains/{chainId}/blocks", Operation: "getLatestBlocks", Weight: server.WeightSmall, Handler: ok},
		{Method: "GET", Path: "/v1/chains", Operation: "supportedChains", Weight: server.WeightFree, Handler: ok},
	}
	// The rate limiter with limits off charges the weight.
	limit, err := ratelimit.Middleware(ratelimit.Config{Enabled: false, Instances: 1}, ratelimit.Deps{
		Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(), Limiter: ratelimit.NewMemory(), Plans: plan.Defaults(),
		Subject: func(*gin.Context) (ratelimit.Subject, bool) { return ratelimit.Subject{}, true },
		Weight:  func(c *gin.Context) int64 { return int64(server.RouteOf(c).Weight) },
	})
	require.NoError(t, err)
	chain := []gin.HandlerFunc{rec.Middleware(), func(c *gin.Context) {
		if c.GetHeader("refuse") != "" {
			c.AbortWithStatusJSON(401, gin.H{})
			return
		}
		if c.GetHeader("key") != "" {
			c.Set("moraine.auth.identity", auth.Identity{Principal: &auth.Principal{
				Account: accountdb.Account{ID: "a1"}, KeyID: "k1", KeyPrefix: "mk_k1"}})
		}
		limit(c)
	}}
	r, err := server.New(routes, server.Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(), Middleware: chain})
	require.NoError(t, err)
	return r
}

func newRecorder(t *testing.T, cfg Config, k kafkautil.Config) (*Recorder, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec, err := New(cfg, Deps{Logger: testenv.Logger(t), Registerer: reg, Kafka: k,
		ChainID: func(p string) string {
			if p == "c-chain" {
				return "43114"
			}
			return p
		}})
	require.NoError(t, err)
	return rec, reg
}

// TestRecordsReachTheTopic: every /v1 request, answered or refused, known
// route or not, becomes one record on the topic with what it was; other
// paths none. (Real broker.)
func TestRecordsReachTheTopic(t *testing.T) {
	k := testenv.Kafka(t)
	rec, _ := newRecorder(t, Config{Enabled: true, BufferRecords: 100, BufferBytes: 1 << 20, Region: "eu-1"}, k)
	h := router(t, rec)
	do := func(path string, hdr ...string) string {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("User-Agent", "test-agent")
		for i := 0; i < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Header().Get(RequestIDHeader)
	}
	ids := []string{
		do("/v1/chains/c-chain/blocks", "key", "1"),
		do("/v1/chains"),
		do("/v1/chains/43114/blocks", "refuse", "1"),
		do("/v1/nothing"),
	}
	require.Empty(t, do("/api-json"))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	rec.Close(ctx)
	require.Eventually(t, func() bool { return testutil.ToFloat64(rec.records.WithLabelValues("produced")) == 4 },
		5*time.Second, 10*time.Millisecond)

	cl, err := kgo.NewClient(append(k.BaseOpts(testenv.Logger(t), "test"), kgo.ConsumeTopics(k.Topic(topics.APIRequests)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	require.NoError(t, err)
	defer cl.Close()
	got := map[string]*record.ApiRequest{}
	for len(got) < 4 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "records never arrived")
		fs.EachRecord(func(r *kgo.Record) {
			require.Equal(t, codec.APIRequestSchema, string(r.Headers[0].Value))
			a, err := codec.DecodeAPIRequest(r.Value)
			require.NoError(t, err)
			got[uuid.UUID(a.Id).String()] = a
		})
	}
	for _, id := range ids {
		require.Contains(t, got, id)
		a := got[id]
		require.InDelta(t, time.Now().UnixMilli(), int64(a.At), 60_000)
		require.Equal(t, "GET", a.Method)
		require.Equal(t, "192.0.2.1", a.ClientIp)
		require.Equal(t, "test-agent", a.UserAgent)
		require.Equal(t, "example.com", a.Host)
		require.Equal(t, "eu-1", a.Region)
		a.Id, a.At, a.DurationMicros, a.Method, a.ClientIp, a.UserAgent, a.Host, a.Region = nil, 0, 0, "", "", "", "", ""
	}
	want := []*record.ApiRequest{
		{AccountId: "a1", KeyId: "k1", KeyAlias: "mk_k1", Route: "/v1/chains/:chainId/blocks", Operation: "getLatestBlocks",
			ChainId: "43114", Status: 200, ComputeUnits: 10},
		{Route: "/v1/chains", Operation: "supportedChains", Status: 200, ComputeUnits: 1},
		// Refused before charging: recorded, 0 CU.
		{Route: "/v1/chains/:chainId/blocks", Operation: "getLatestBlocks", ChainId: "43114", Status: 401},
		{Route: "unmatched", Status: 404, ComputeUnits: 1},
	}
	for i, id := range ids {
		require.Equal(t, want[i].String(), got[id].String(), "request %d", i)
	}
	require.Equal(t, 11.0, testutil.ToFloat64(rec.units.WithLabelValues("/v1/chains/:chainId/blocks"))+
		testutil.ToFloat64(rec.units.WithLabelValues("/v1/chains")))
}

// TestKafkaDownBoundsTheBuffer: with no broker, requests are answered at
// once, the buffer holds at most --usage.buffer-records, and the rest are
// dropped and counted; shutdown drops what is still buffered.
func TestKafkaDownBoundsTheBuffer(t *testing.T) {
	// A port nothing listens on.
	rec, _ := newRecorder(t, Config{Enabled: true, BufferRecords: 10, BufferBytes: 1 << 20}, kafkautil.Config{Brokers: "127.0.0.1:1"})
	h := router(t, rec)
	start := time.Now()
	for range 50 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/v1/chains", nil))
		require.Equal(t, 200, w.Code)
	}
	require.Less(t, time.Since(start), 5*time.Second, "requests waited for Kafka")
	require.Equal(t, int64(10), rec.cl.BufferedProduceRecords())
	// Promises run on franz-go's promise goroutine.
	require.Eventually(t, func() bool { return testutil.ToFloat64(rec.records.WithLabelValues("buffer_full")) == 40 },
		5*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	rec.Close(ctx)
	require.Eventually(t, func() bool { return testutil.ToFloat64(rec.records.WithLabelValues("shutdown")) == 10 },
		5*time.Second, 10*time.Millisecond)
	require.Zero(t, testutil.ToFloat64(rec.records.WithLabelValues("produced")))
}
