package usagesink

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// produce writes n request records of account acc, every one a request id
// of its own, at base + i seconds.
func produce(t *testing.T, k kafkautil.Config, acc string, n int, base time.Time) {
	t.Helper()
	cl, err := kgo.NewClient(k.ProducerOpts(testenv.Logger(t), "test")...)
	require.NoError(t, err)
	defer cl.Close()
	var rs []*kgo.Record
	for i := range n {
		id := uuid.New()
		v, err := codec.EncodeAPIRequest(&record.ApiRequest{Id: id[:], At: uint64(base.Add(time.Duration(i) * time.Second).UnixMilli()),
			AccountId: acc, KeyId: "k-" + acc, Route: "/v1/chains/:chainId/blocks", Operation: "getLatestBlocks", Method: "GET",
			ChainId: "43114", Status: uint32(200 + 200*(i%5/4)), DurationMicros: uint64(1000 + i), ComputeUnits: 10})
		require.NoError(t, err)
		rs = append(rs, &kgo.Record{Topic: k.Topic(topics.APIRequests), Value: v})
	}
	require.NoError(t, cl.ProduceSync(t.Context(), rs...).FirstErr())
}

func newSink(t *testing.T, cfg Config, k kafkautil.Config, ch chclient.Config) *Sink {
	t.Helper()
	s, err := New(cfg, Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(), Kafka: k, ClickHouse: ch, Health: obs.NewHealth()})
	require.NoError(t, err)
	return s
}

// run runs s until the test ends.
func run(t *testing.T, s *Sink) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

func count(t *testing.T, conn driver.Conn, q string) uint64 {
	t.Helper()
	var n uint64
	require.NoError(t, conn.QueryRow(t.Context(), q).Scan(&n))
	return n
}

func testConfig() Config {
	c := DefaultConfig()
	c.FlushInterval = 100 * time.Millisecond
	return c
}

// TestRecordsWrittenOnceThroughAnOutage: records produced while ClickHouse
// is unreachable are written once it answers again, each exactly once (an
// insert cut mid-way is not repeated), with their rollups; a second group
// reading the same records from the start writes none of them again.
func TestRecordsWrittenOnceThroughAnOutage(t *testing.T) {
	k := testenv.Kafka(t)
	chCfg, conn := testenv.ClickHouse(t)
	proxy := testenv.StartProxy(t, chCfg.Addr)
	viaProxy := chCfg
	viaProxy.Addr = proxy.Addr()
	s := newSink(t, testConfig(), k, viaProxy)
	run(t, s)
	base := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	produce(t, k, "acc-a", 100, base)
	require.Eventually(t, func() bool { return count(t, conn, "SELECT count() FROM api_requests") == 100 }, 30*time.Second, 50*time.Millisecond)

	// ClickHouse goes away; records keep coming; it comes back.
	proxy.Cut()
	produce(t, k, "acc-a", 150, base.Add(100*time.Second))
	produce(t, k, "acc-b", 50, base.Add(time.Hour))
	time.Sleep(2 * time.Second) // some inserts fail
	proxy.Restore()
	require.Eventually(t, func() bool { return count(t, conn, "SELECT count() FROM api_requests") >= 300 }, 60*time.Second, 100*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, uint64(300), count(t, conn, "SELECT count() FROM api_requests"))
	require.Equal(t, uint64(300), count(t, conn, "SELECT uniqExact(request_id) FROM api_requests"))
	// The rollups count each request once.
	for _, tbl := range []string{"api_usage_minutes", "api_usage_hours", "api_usage_days", "api_usage_global_minutes", "api_usage_global_hours", "api_usage_global_days", "api_usage_key_hours", "api_usage_key_days"} {
		require.Eventually(t, func() bool { return count(t, conn, "SELECT countMerge(requests) FROM "+tbl) >= 300 }, 10*time.Second, 50*time.Millisecond)
		require.Equal(t, uint64(300), count(t, conn, "SELECT countMerge(requests) FROM "+tbl), tbl)
		units := "compute_units"
		if strings.HasPrefix(tbl, "api_usage_key_") {
			units = "units"
		}
		require.Equal(t, uint64(3000), count(t, conn, "SELECT sumMerge("+units+") FROM "+tbl), tbl)
	}
	require.Equal(t, uint64(50), count(t, conn, "SELECT countMerge(requests) FROM api_usage_minutes WHERE account_id = 'acc-a' AND status = 400"))
	require.Equal(t, uint64(2), count(t, conn, "SELECT count() FROM (SELECT bucket FROM api_usage_hours GROUP BY bucket)"))

	// Another group from the start: everything is already there.
	cfg2 := testConfig()
	cfg2.Group = "moraine-usage-again"
	s2 := newSink(t, cfg2, k, chCfg)
	run(t, s2)
	require.Eventually(t, func() bool { return testutil.ToFloat64(s2.m.records.WithLabelValues("duplicate")) == 300 },
		30*time.Second, 50*time.Millisecond)
	require.Zero(t, testutil.ToFloat64(s2.m.records.WithLabelValues("written")))
	require.Equal(t, uint64(300), count(t, conn, "SELECT count() FROM api_requests"))
	require.InDelta(t, float64(base.Add(time.Hour+49*time.Second).Unix()), testutil.ToFloat64(s.m.lastWritten), 1)
}

// TestRetentionDropsWholeMonths: months of the log and the minute rollup
// past --usage.log-retention go, the hour and day rollups stay until
// --usage.metrics-retention.
func TestRetentionDropsWholeMonths(t *testing.T) {
	k := testenv.Kafka(t)
	chCfg, conn := testenv.ClickHouse(t)
	// Run's own pass (at start only) sees January, which drops nothing;
	// the pass below sees June 15.
	var now atomic.Pointer[time.Time]
	jan, june := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 6, 15, 0, 0, 0, 0, time.UTC)
	now.Store(&jan)
	cfg := testConfig()
	cfg.LogRetention, cfg.MetricsRetention = 60*24*time.Hour, 120*24*time.Hour
	cfg.RetentionInterval = time.Hour
	s, err := New(cfg, Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(), Kafka: k, ClickHouse: chCfg,
		Health: obs.NewHealth(), Now: func() time.Time { return *now.Load() }})
	require.NoError(t, err)
	for _, m := range []time.Month{1, 2, 3, 4, 5, 6} {
		produce(t, k, "acc", 2, time.Date(2026, m, 10, 0, 0, 0, 0, time.UTC))
	}
	run(t, s)
	require.Eventually(t, func() bool { return count(t, conn, "SELECT count() FROM api_requests") == 12 }, 30*time.Second, 50*time.Millisecond)
	now.Store(&june)
	require.NoError(t, s.retentionPass(t.Context(), conn, testenv.Logger(t)))
	// Log: cutoff April 16: January to March go. Metrics: cutoff February
	// 15: January goes.
	require.Equal(t, uint64(6), count(t, conn, "SELECT count() FROM api_requests"))
	require.Equal(t, uint64(6), count(t, conn, "SELECT countMerge(requests) FROM api_usage_minutes"))
	require.Equal(t, uint64(10), count(t, conn, "SELECT countMerge(requests) FROM api_usage_hours"))
	require.Equal(t, uint64(10), count(t, conn, "SELECT countMerge(requests) FROM api_usage_days"))
	require.Equal(t, 18.0, testutil.ToFloat64(s.m.dropped), "3 months of the log and of the minute rollups, 1 of the hour and day rollups")
}

// TestTopAccounts: the gauges name the accounts with the most requests
// and compute units in the last hour, with their names and errors.
func TestTopAccounts(t *testing.T) {
	k := testenv.Kafka(t)
	chCfg, conn := testenv.ClickHouse(t)
	now := time.Now()
	s, err := New(testConfig(), Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(), Kafka: k, ClickHouse: chCfg,
		Health: obs.NewHealth(), Now: func() time.Time { return now }})
	require.NoError(t, err)
	b, err := conn.PrepareBatch(t.Context(), "INSERT INTO accounts (id, name, plan, created_at, version)")
	require.NoError(t, err)
	require.NoError(t, b.Append("big", "Big Co", "pro", uint64(1), uint64(1)))
	require.NoError(t, b.Send())
	produce(t, k, "big", 30, now.Add(-30*time.Minute))
	produce(t, k, "", 12, now.Add(-20*time.Minute))
	produce(t, k, "old", 50, now.Add(-3*time.Hour))
	for i := range 12 {
		produce(t, k, fmt.Sprintf("small-%02d", i), 1, now.Add(-time.Minute))
	}
	run(t, s)
	// The views' rows land just after the log's.
	require.Eventually(t, func() bool { return count(t, conn, "SELECT countMerge(requests) FROM api_usage_minutes") == 104 },
		30*time.Second, 50*time.Millisecond)
	require.NoError(t, s.refreshTop(t.Context(), conn))
	require.Equal(t, 30.0, testutil.ToFloat64(s.m.topRequests.WithLabelValues("big", "Big Co")))
	require.Equal(t, 6.0, testutil.ToFloat64(s.m.topErrors.WithLabelValues("big", "Big Co")))
	require.Equal(t, 300.0, testutil.ToFloat64(s.m.topUnits.WithLabelValues("big", "Big Co")))
	require.Equal(t, 12.0, testutil.ToFloat64(s.m.topRequests.WithLabelValues("none", "keyless requests")))
	require.Equal(t, topN, testutil.CollectAndCount(s.m.topRequests))
	require.Equal(t, topN, testutil.CollectAndCount(s.m.topUnits))
	require.Zero(t, testutil.CollectAndCount(s.m.topRequests, "old"))
}
