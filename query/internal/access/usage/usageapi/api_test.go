package usageapi

import (
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
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/access"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/ops/admin"
	"github.com/moraine-data/moraine/query/internal/server"
)

// d0 is a Monday, 0:00 UTC.
var d0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

// req is one logged request of the fixture.
type req struct {
	account, key, route, chain string
	at                         time.Time
	status                     uint16
	durationMs                 float64
	units                      uint32
}

// fixture: account a's requests on Monday (d0) at 10:00 (three 200s and a
// 404 at 10:05) and 11:00 (a 429, uncharged), Tuesday with its second key
// on chain 43113, and the next Monday (a 500); account b's one request;
// one keyless request.
func fixture(a, ka, ka2, b, kb string) []req {
	blocks, txs := "/v1/chains/:chainId/blocks", "/v1/chains/:chainId/transactions"
	return []req{
		{a, ka, blocks, "43114", d0.Add(10 * time.Hour), 200, 2, 10},
		{a, ka, blocks, "43114", d0.Add(10*time.Hour + time.Second), 200, 4, 10},
		{a, ka, blocks, "43114", d0.Add(10*time.Hour + 2*time.Second), 200, 6, 10},
		{a, ka, blocks, "43114", d0.Add(10*time.Hour + 5*time.Minute), 404, 1, 10},
		{a, ka, "/v1/webhooks", "", d0.Add(11 * time.Hour), 429, 0.5, 0},
		{a, ka2, txs, "43113", d0.Add(33 * time.Hour), 200, 8, 20},
		{a, ka2, txs, "43113", d0.Add(33*time.Hour + time.Minute), 200, 8, 20},
		{a, ka, blocks, "43114", d0.AddDate(0, 0, 7).Add(30 * time.Minute), 500, 3, 10},
		{b, kb, blocks, "43114", d0.Add(10*time.Hour + 30*time.Second), 200, 2, 10},
		{"", "", "/v1/chains", "", d0.Add(12 * time.Hour), 200, 1, 1},
	}
}

func insert(t *testing.T, conn driver.Conn, rs []req) {
	t.Helper()
	b, err := conn.PrepareBatch(t.Context(), `INSERT INTO api_requests (account_id, at, request_id, key_id, key_alias, route,
    operation, method, chain_id, status, duration_us, compute_units, client_ip, user_agent, host, region, kafka_partition, kafka_offset)`)
	require.NoError(t, err)
	for i, r := range rs {
		id := fmt.Sprintf("%016d", i)
		require.NoError(t, b.Append(r.account, uint64(r.at.UnixMilli()), id, r.key, "mk_"+r.key, r.route, "op", "GET", r.chain,
			r.status, uint64(r.durationMs*1000), r.units, "203.0.113.9", "agent/1", "api.example", "eu", uint32(0), uint64(i)))
	}
	require.NoError(t, b.Send())
}

type env struct {
	t       *testing.T
	api     *API
	h       http.Handler
	keys    map[string]string // name -> key
	ids     map[string]string // name -> key id
	account map[string]string // name -> account id
}

func newEnv(t *testing.T) *env {
	t.Helper()
	_, conn := testenv.ClickHouse(t)
	db, err := accountdb.Open(conn, accountdb.DefaultConfig(), prometheus.NewRegistry())
	require.NoError(t, err)
	adm := &admin.Admin{DB: db, Clock: accountdb.NewClock(nil)}
	e := &env{t: t, keys: map[string]string{}, ids: map[string]string{}, account: map[string]string{}}
	for _, acc := range []struct {
		name string
		keys []string
	}{{"a", []string{"ka", "ka2"}}, {"b", []string{"kb", "op"}}} {
		ac, err := adm.CreateAccount(t.Context(), acc.name, plan.Pro)
		require.NoError(t, err)
		e.account[acc.name] = ac.ID
		for _, k := range acc.keys {
			nk, err := adm.CreateKey(t.Context(), ac.ID)
			require.NoError(t, err)
			e.keys[k], e.ids[k] = nk.Key, nk.ID
		}
	}
	require.NoError(t, db.SetOperator(t.Context(), e.ids["op"], true, 1))
	insert(t, conn, fixture(e.account["a"], e.ids["ka"], e.ids["ka2"], e.account["b"], e.ids["kb"]))
	var lazy chclient.Lazy
	lazy.Set(conn)
	reg := prometheus.NewRegistry()
	api, err := New(Deps{Logger: testenv.Logger(t), Registerer: reg, Conn: &lazy, Timeout: 10 * time.Second, Operators: db,
		ChainID: func(p string) string {
			if p == "43114" || p == "43113" {
				return p
			}
			return ""
		},
		PageTokenKey: []byte(strings.Repeat("k", 32)), Now: func() time.Time { return d0.AddDate(0, 0, 8) }})
	require.NoError(t, err)
	e.api = api
	acc, err := access.New(access.DefaultConfig(), access.Deps{Logger: testenv.Logger(t), Registerer: reg, Keys: db, Plans: plan.Defaults()})
	require.NoError(t, err)
	e.h, err = server.New(api.Routes(), server.Deps{Logger: testenv.Logger(t), Registerer: reg, Middleware: acc.Middleware()})
	require.NoError(t, err)
	return e
}

// get calls path with key (a name of env.keys, "" for none) and decodes
// the answer into out.
func (e *env) get(key, path string, out any) int {
	e.t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	if key != "" {
		r.Header.Set("x-glacier-api-key", e.keys[key])
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	if out != nil {
		require.NoError(e.t, json.Unmarshal(w.Body.Bytes(), out), w.Body.String())
	}
	return w.Code
}

func ts(t time.Time) string { return fmt.Sprint(t.Unix()) }

// week is the fixture's range: the Monday of d0 to the next Monday.
var week = "startTimestamp=" + ts(d0.Add(7*time.Hour)) + "&endTimestamp=" + ts(d0.AddDate(0, 0, 7).Add(23*time.Hour))

// totals is what a metrics answer says, as (timestamp, group) -> value.
func totals(t *testing.T, r usageResponse) map[string]metricValue {
	t.Helper()
	out := map[string]metricValue{}
	for _, m := range r.Metrics {
		for _, v := range m.Values {
			k := fmt.Sprint(m.Timestamp)
			if v.GroupValue != nil {
				k += " " + fmt.Sprint(v.GroupValue)
			}
			out[k] = v
		}
	}
	return out
}

func TestUsageMetrics(t *testing.T) {
	e := newEnv(t)
	day := func(n int) string { return fmt.Sprint(d0.AddDate(0, 0, n).Unix()) }
	var r usageResponse
	require.Equal(t, 200, e.get("ka", "/v1/apiUsageMetrics?"+week, &r))
	require.Equal(t, "daily", r.AggregateDuration)
	require.Equal(t, e.account["a"], r.OrgID)
	got := totals(t, r)
	require.Len(t, got, 3, "days without requests are left out")
	mon := got[day(0)]
	require.Equal(t, "None", mon.GroupedBy)
	require.Equal(t, uint64(5), mon.TotalRequests)
	require.Equal(t, 60.0, mon.SuccessRatePercent)
	require.Equal(t, uint64(2), mon.InvalidRequests, "the 404 and the 429")
	require.Equal(t, uint64(40), mon.APICreditsUsed)
	require.Equal(t, uint64(10), mon.APICreditsWasted, "the 404's; the 429 was not charged")
	require.InDelta(t, 5.0/86400, mon.RequestsPerSecond, 1e-6)
	require.InDelta(t, 2, mon.MedianResponseTimeMsecs, 2.1)
	require.Equal(t, uint64(2), got[day(1)].TotalRequests)
	require.Equal(t, uint64(40), got[day(1)].APICreditsUsed)
	require.Equal(t, uint64(1), got[day(7)].TotalRequests)
	require.Equal(t, 0.0, got[day(7)].SuccessRatePercent)
	require.Equal(t, uint64(0), got[day(7)].InvalidRequests, "a 500 is not the client's")

	// Every interval.
	twoDays := "startTimestamp=" + day(0) + "&endTimestamp=" + day(1)
	for _, tc := range []struct {
		interval, rng string
		want          map[string]uint64
	}{
		// A week of minutes is the most one answer holds: two days here.
		{"minute", twoDays, map[string]uint64{ts(d0.Add(10 * time.Hour)): 3, ts(d0.Add(10*time.Hour + 5*time.Minute)): 1,
			ts(d0.Add(11 * time.Hour)): 1, ts(d0.Add(33 * time.Hour)): 1, ts(d0.Add(33*time.Hour + time.Minute)): 1}},
		{"hourly", week, map[string]uint64{ts(d0.Add(10 * time.Hour)): 4, ts(d0.Add(11 * time.Hour)): 1, ts(d0.Add(33 * time.Hour)): 2,
			ts(d0.AddDate(0, 0, 7)): 1}},
		{"weekly", week, map[string]uint64{day(0): 7, day(7): 1}},
		{"monthly", week, map[string]uint64{ts(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)): 8}},
	} {
		r = usageResponse{}
		require.Equal(t, 200, e.get("ka", "/v1/apiUsageMetrics?timeInterval="+tc.interval+"&"+tc.rng, &r), tc.interval)
		require.Equal(t, tc.interval, r.AggregateDuration)
		have := map[string]uint64{}
		for k, v := range totals(t, r) {
			have[k] = v.TotalRequests
		}
		require.Equal(t, tc.want, have, tc.interval)
	}
	r = usageResponse{}
	require.Equal(t, 200, e.get("ka", "/v1/apiUsageMetrics?timeInterval=monthly&"+week, &r))
	require.InDelta(t, 8.0/(31*86400), r.Metrics[0].Values[0].RequestsPerSecond, 1e-9)

	// Every groupBy, on Monday.
	monday := "startTimestamp=" + day(0) + "&endTimestamp=" + day(0)
	for _, tc := range []struct {
		groupBy string
		want    map[string]uint64
	}{
		{"responseCode", map[string]uint64{day(0) + " 200": 3, day(0) + " 404": 1, day(0) + " 429": 1}},
		{"requestPath", map[string]uint64{day(0) + " /v1/chains/:chainId/blocks": 4, day(0) + " /v1/webhooks": 1}},
		{"chainId", map[string]uint64{day(0) + " 43114": 4, day(0) + " ": 1}},
		{"apiKeyId", map[string]uint64{day(0) + " " + e.ids["ka"]: 5}},
		{"requestType", map[string]uint64{day(0) + " data": 5}},
	} {
		r = usageResponse{}
		require.Equal(t, 200, e.get("ka", "/v1/apiUsageMetrics?groupBy="+tc.groupBy+"&"+monday, &r), tc.groupBy)
		have := map[string]uint64{}
		for k, v := range totals(t, r) {
			require.Equal(t, tc.groupBy, v.GroupedBy)
			have[k] = v.TotalRequests
		}
		require.Equal(t, tc.want, have, tc.groupBy)
	}
	// responseCode groups are numbers.
	var raw map[string]any
	require.Equal(t, 200, e.get("ka", "/v1/apiUsageMetrics?groupBy=responseCode&"+monday, &raw))
	require.Equal(t, 200.0, raw["metrics"].([]any)[0].(map[string]any)["values"].([]any)[0].(map[string]any)["groupValue"])

	// Every filter.
	for _, tc := range []struct {
		filter string
		want   uint64
	}{
		{"chainId=43113", 2},
		{"chainId=99", 0},
		{"responseCode=404", 1},
		{"apiKeyId=" + e.ids["ka2"], 2},
		{"requestPath=/v1/chains/{chainId}/blocks", 5},
		{"requestPath=" + url.QueryEscape("/v1/chains/:chainId/blocks"), 5},
		{"requestType=data", 8},
		{"requestType=rpc", 0},
	} {
		r = usageResponse{}
		require.Equal(t, 200, e.get("ka", "/v1/apiUsageMetrics?timeInterval=monthly&"+tc.filter+"&"+week, &r), tc.filter)
		var n uint64
		for _, v := range totals(t, r) {
			n += v.TotalRequests
		}
		require.Equal(t, tc.want, n, tc.filter)
	}
}

func TestUsageScope(t *testing.T) {
	e := newEnv(t)
	monthly := "/v1/apiUsageMetrics?timeInterval=monthly&" + week
	sum := func(key, extra string) (uint64, string) {
		var r usageResponse
		require.Equal(t, 200, e.get(key, monthly+extra, &r), key+extra)
		var n uint64
		for _, v := range totals(t, r) {
			n += v.TotalRequests
		}
		return n, r.OrgID
	}
	// An account's keys see the account, whichever key asks.
	n, org := sum("ka2", "")
	require.Equal(t, uint64(8), n)
	require.Equal(t, e.account["a"], org)
	n, _ = sum("kb", "&orgId="+e.account["b"])
	require.Equal(t, uint64(1), n)
	// Another account's usage is refused to an ordinary key.
	var body struct {
		Message    string `json:"message"`
		StatusCode int    `json:"statusCode"`
	}
	require.Equal(t, 403, e.get("kb", monthly+"&orgId="+e.account["a"], &body))
	require.Contains(t, body.Message, "only an operator key reads others'")
	require.Equal(t, 403, e.get("ka", "/v1/apiLogs?orgId="+e.account["b"], nil))
	// The operator key (of account b) sees everything, or one account, or
	// the keyless requests (orgId empty).
	n, org = sum("op", "")
	require.Equal(t, uint64(10), n)
	require.Equal(t, "all", org)
	n, org = sum("op", "&orgId="+e.account["a"])
	require.Equal(t, uint64(8), n)
	require.Equal(t, e.account["a"], org)
	n, _ = sum("op", "&orgId=")
	require.Equal(t, uint64(1), n)
	// A key filter reads its account's rows only; an unknown key, none.
	n, org = sum("op", "&apiKeyId="+e.ids["ka2"])
	require.Equal(t, uint64(2), n)
	require.Equal(t, "all", org)
	n, _ = sum("op", "&apiKeyId=nope")
	require.Equal(t, uint64(0), n)
	// Grouped by key over every account.
	var byKey usageResponse
	require.Equal(t, 200, e.get("op", "/v1/apiUsageMetrics?timeInterval=monthly&groupBy=apiKeyId&"+week, &byKey))
	keys := map[string]uint64{}
	for _, v := range totals(t, byKey) {
		keys[fmt.Sprint(v.GroupValue)] += v.TotalRequests
	}
	require.Equal(t, map[string]uint64{e.ids["ka"]: 6, e.ids["ka2"]: 2, e.ids["kb"]: 1, "": 1}, keys)
	// The per-key rollup (an operator's read by key) and the per-account
	// one (the account's own) agree on every number.
	var own usageResponse
	require.Equal(t, 200, e.get("ka", "/v1/apiUsageMetrics?groupBy=apiKeyId&"+week, &own))
	require.Equal(t, 200, e.get("op", "/v1/apiUsageMetrics?groupBy=apiKeyId&"+week, &byKey))
	mine := totals(t, own)
	for k, v := range totals(t, byKey) {
		if w, ok := mine[k]; ok {
			require.Equal(t, w, v, k)
			delete(mine, k)
		}
	}
	require.Empty(t, mine)
	// No key: 401.
	require.Equal(t, 401, e.get("", monthly, nil))
	require.Equal(t, 401, e.get("", "/v1/apiLogs", nil))
}

func TestUsageValidation(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		path string
		msg  []string
	}{
		{"/v1/apiUsageMetrics?timeInterval=yearly", []string{"timeInterval must be one of the following values: minute, hourly, daily, weekly, monthly"}},
		{"/v1/apiUsageMetrics?groupBy=country", []string{"groupBy must be one of the following values: requestPath, responseCode, chainId, apiKeyId, requestType"}},
		{"/v1/apiUsageMetrics?responseCode=ok&requestType=ws", []string{"responseCode must be an HTTP status code (100 to 599)",
			"requestType must be one of the following values: data, rpc"}},
		{"/v1/apiUsageMetrics?startTimestamp=-1&endTimestamp=1.5", []string{"startTimestamp must not be less than 0", "endTimestamp must be an integer number"}},
		{"/v1/apiUsageMetrics?startTimestamp=1772496000000", []string{"startTimestamp must not be after 9999-12-31 (Unix seconds, not milliseconds)"}},
		{"/v1/apiUsageMetrics?startTimestamp=1772582400&endTimestamp=1772496000",
			[]string{"startTimestamp must not be after endTimestamp (both are rounded down to 0:00 UTC of their day)"}},
		{"/v1/apiUsageMetrics?timeInterval=minute&startTimestamp=1772409600&endTimestamp=1773014400",
			[]string{"the range from startTimestamp to endTimestamp holds 11520 minute buckets; at most 10080 are answered at once (a coarser timeInterval, or a shorter range)"}},
		{"/v1/apiLogs?pageSize=0", []string{"pageSize must not be less than 1"}},
		{"/v1/apiLogs?pageToken=abc", []string{"pageToken must be a page token returned by the previous page of this list"}},
	} {
		var body struct {
			Message    []string `json:"message"`
			StatusCode int      `json:"statusCode"`
			Error      string   `json:"error"`
		}
		require.Equal(t, 400, e.get("ka", tc.path, &body), tc.path)
		require.Equal(t, tc.msg, body.Message, tc.path)
		require.Equal(t, "Bad Request", body.Error)
	}
}

// TestUsageTooManyValues: an answer of more (bucket, group) values than
// the bound is a 400 that says why, from the per-key rollup (an operator by
// apiKeyId) and from the per-account one alike; at the bound it is served.
func TestUsageTooManyValues(t *testing.T) {
	e := newEnv(t)
	var body struct {
		Message    []string `json:"message"`
		StatusCode int      `json:"statusCode"`
	}
	// The fixture's week by hour: six (hour, key) values over every
	// account, four (hour, route) values of account a.
	byKey := "/v1/apiUsageMetrics?timeInterval=hourly&groupBy=apiKeyId&" + week
	byRoute := "/v1/apiUsageMetrics?timeInterval=hourly&groupBy=requestPath&" + week
	e.api.store.maxValues = 5
	require.Equal(t, 400, e.get("op", byKey, &body))
	require.Equal(t, []string{"the answer would hold more than 5 values (one per time bucket and group); a coarser timeInterval, a shorter range, a filter or another groupBy"}, body.Message)
	require.Equal(t, 400, body.StatusCode)
	e.api.store.maxValues = 3
	require.Equal(t, 400, e.get("ka", byRoute, &body))
	require.Len(t, body.Message, 1)
	require.Contains(t, body.Message[0], "more than 3 values")
	var r usageResponse
	e.api.store.maxValues = 6
	require.Equal(t, 200, e.get("op", byKey, &r))
	require.Len(t, totals(t, r), 6)
	e.api.store.maxValues = 4
	require.Equal(t, 200, e.get("ka", byRoute, &r))
	require.Len(t, totals(t, r), 4)
}

func TestUsageLogs(t *testing.T) {
	e := newEnv(t)
	// Every page of account a's week, two at a time, newest first.
	var logs []logEntry
	path := "/v1/apiLogs?pageSize=2&" + week
	token := ""
	for range 10 {
		var r logsResponse
		p := path
		if token != "" {
			p += "&pageToken=" + url.QueryEscape(token)
		}
		require.Equal(t, 200, e.get("ka", p, &r))
		require.Equal(t, e.account["a"], r.OrgID)
		require.LessOrEqual(t, len(r.Logs), 2)
		logs = append(logs, r.Logs...)
		if token = r.NextPageToken; token == "" {
			break
		}
	}
	require.Len(t, logs, 8)
	for i := 1; i < len(logs); i++ {
		require.Greater(t, logs[i-1].EventTimestamp, logs[i].EventTimestamp)
	}
	first := logs[0]
	require.Equal(t, uint64(d0.AddDate(0, 0, 7).Add(30*time.Minute).UnixMilli()), first.EventTimestamp)
	require.Equal(t, logEntry{OrgID: e.account["a"], LogID: first.LogID, EventTimestamp: first.EventTimestamp, APIKeyID: e.ids["ka"],
		APIKeyAlias: "mk_" + e.ids["ka"], HostRegion: "eu", RequestType: "data", RequestPath: "/v1/chains/:chainId/blocks",
		APICreditsConsumed: 10, RequestDurationMsecs: 3, ResponseCode: 500, ChainID: "43114",
		Metadata: logMetadata{IPAddress: "203.0.113.9", Host: "api.example", UserAgent: "agent/1"}}, first)
	require.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`, first.LogID)

	// A token is bound to its filters and to the key that got it.
	var r logsResponse
	require.Equal(t, 200, e.get("ka", path, &r))
	tok := url.QueryEscape(r.NextPageToken)
	require.Equal(t, 400, e.get("ka", path+"&responseCode=200&pageToken="+tok, nil))
	require.Equal(t, 400, e.get("ka2", path+"&pageToken="+tok, nil))
	require.Equal(t, 200, e.get("ka", path+"&pageToken="+tok, nil))

	// Filters.
	for _, tc := range []struct {
		filter string
		want   int
	}{
		{"responseCode=200", 5}, {"chainId=43113", 2}, {"apiKeyId=" + e.ids["ka2"], 2},
		{"requestPath=/v1/webhooks", 1}, {"requestType=rpc", 0},
	} {
		r = logsResponse{}
		require.Equal(t, 200, e.get("ka", "/v1/apiLogs?pageSize=100&"+tc.filter+"&"+week, &r), tc.filter)
		require.Len(t, r.Logs, tc.want, tc.filter)
	}
	// The operator reads every account's log; the keyless request has no
	// chainId (omitted) and no account.
	r = logsResponse{}
	require.Equal(t, 200, e.get("op", "/v1/apiLogs?pageSize=100&"+week, &r))
	require.Equal(t, "all", r.OrgID)
	require.Len(t, r.Logs, 10)
	r = logsResponse{}
	require.Equal(t, 200, e.get("op", "/v1/apiLogs?orgId=&"+week, &r))
	require.Len(t, r.Logs, 1)
	require.Equal(t, "/v1/chains", r.Logs[0].RequestPath)
	require.Empty(t, r.Logs[0].OrgID)
}
