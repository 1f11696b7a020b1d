package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRequestLogEndToEnd: requests answered by the query binary reach the
// request log through Kafka and the processor binary's usage sink, each
// exactly once (the processor killed with -9 in the middle), and come back
// through getApiLogs (logId = the answer's x-request-id) and
// getApiUsageMetrics; an operator key sees the keyless requests too.
func TestRequestLogEndToEnd(t *testing.T) {
	// The sink writes every second (the default is 30 s), so the kill
	// falls between writes: some records are in ClickHouse before it, the
	// rest are read again after it.
	s := runPipeline(t, cchain, 1, pipelineOpts{processorArgs: []string{"--usage.flush-interval", "1s"}})
	key := devKey(t, s)
	admin := func(args ...string) string {
		out, err := exec.Command(filepath.Join(binaries(t), "moraine-admin"), append(args, "--clickhouse.addr", s.ch.Addr,
			"--clickhouse.database", s.ch.Database)...).Output()
		if err != nil {
			t.Fatalf("moraine-admin %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	op := admin("account", "create", "--name", "operators", "--plan", "enterprise")
	opKey := admin("key", "create", "--account", op, "--operator")

	get := func(path, key string) (int, string) {
		req, _ := http.NewRequest("GET", s.api+path, nil)
		if key != "" {
			req.Header.Set("x-glacier-api-key", key)
		}
		req.Header.Set("User-Agent", "e2e-request-log")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("x-request-id")
	}
	type sent struct {
		route  string
		status int
		units  int
	}
	want := map[string]sent{} // x-request-id -> what it was
	keyless := 0
	send := func(n int) {
		for i := range n {
			for _, r := range []struct {
				path, route string
				units       int
			}{
				{"/v1/chains/43114/blocks?pageSize=2", "/v1/chains/:chainId/blocks", 10},
				{fmt.Sprintf("/v1/chains/43114/blocks/%d", 1+i%100), "/v1/chains/:chainId/blocks/:blockId", 10},
				{"/v1/chains/43114/blocks?pageSize=500", "/v1/chains/:chainId/blocks", 10},
				{"/v1/no-such-route", "unmatched", 1},
			} {
				code, id := get(r.path, key)
				if id == "" {
					t.Fatalf("%s: no x-request-id", r.path)
				}
				want[id] = sent{r.route, code, r.units}
			}
			if code, _ := get("/v1/chains", ""); code != 200 {
				t.Fatalf("keyless /v1/chains: %d", code)
			}
			keyless++
		}
	}
	send(10)
	s.crash("processor") // kill -9, and back
	send(10)

	// Every request of the key's account, once, through getApiLogs.
	day := time.Now().UTC().Truncate(24 * time.Hour).Unix()
	rng := fmt.Sprintf("startTimestamp=%d&endTimestamp=%d", day, day)
	type logEntry struct {
		LogID              string `json:"logId"`
		RequestPath        string `json:"requestPath"`
		ResponseCode       int    `json:"responseCode"`
		APICreditsConsumed int    `json:"apiCreditsConsumed"`
		ChainID            string `json:"chainId"`
		Metadata           struct {
			UserAgent string `json:"userAgent"`
		} `json:"metadata"`
	}
	read := func() map[string]logEntry {
		got := map[string]logEntry{}
		token := ""
		for {
			var page struct {
				NextPageToken string     `json:"nextPageToken"`
				Logs          []logEntry `json:"logs"`
			}
			path := "/v1/apiLogs?pageSize=100&" + rng
			if token != "" {
				path += "&pageToken=" + url.QueryEscape(token)
			}
			if code := call(t, "GET", s.api+path, key, nil, &page); code != 200 {
				t.Fatalf("getApiLogs: %d", code)
			}
			for _, l := range page.Logs {
				if _, dup := got[l.LogID]; dup {
					t.Fatalf("request %s logged twice", l.LogID)
				}
				got[l.LogID] = l
			}
			if token = page.NextPageToken; token == "" {
				return got
			}
		}
	}
	var got map[string]logEntry
	eventually(t, 60*time.Second, "every request in the log", func() bool {
		got = read()
		n := 0
		for id := range want {
			if _, ok := got[id]; ok {
				n++
			}
		}
		return n == len(want)
	})
	for id, w := range want {
		l := got[id]
		if l.RequestPath != w.route || l.ResponseCode != w.status || l.APICreditsConsumed != w.units || l.Metadata.UserAgent != "e2e-request-log" {
			t.Errorf("request %s logged as %+v, sent %+v", id, l, w)
		}
		if w.route != "unmatched" && l.ChainID != "43114" {
			t.Errorf("request %s: chainId %q", id, l.ChainID)
		}
	}
	// The getApiLogs calls themselves are logged too: nothing else.
	for id, l := range got {
		if _, ok := want[id]; !ok && l.RequestPath != "/v1/apiLogs" {
			t.Errorf("unexpected request in the log: %+v", l)
		}
	}

	// Usage metrics agree, by route and by status.
	var usage struct {
		Metrics []struct {
			Values []struct {
				GroupValue    any `json:"groupValue"`
				TotalRequests int `json:"totalRequests"`
			} `json:"values"`
		} `json:"metrics"`
	}
	if code := call(t, "GET", s.api+"/v1/apiUsageMetrics?groupBy=responseCode&"+rng, key, nil, &usage); code != 200 {
		t.Fatalf("getApiUsageMetrics: %d", code)
	}
	byCode := map[string]int{}
	for _, m := range usage.Metrics {
		for _, v := range m.Values {
			byCode[fmt.Sprint(v.GroupValue)] += v.TotalRequests
		}
	}
	if byCode["400"] != 20 || byCode["404"] != 20 || byCode["200"] < 40 {
		t.Errorf("requests by status %v, want 20 400s, 20 404s and at least 40 200s", byCode)
	}

	// The operator key sees the keyless requests (orgId empty).
	var keylessUsage struct {
		OrgID   string `json:"orgId"`
		Metrics []struct {
			Values []struct {
				TotalRequests int `json:"totalRequests"`
			} `json:"values"`
		} `json:"metrics"`
	}
	if code := call(t, "GET", s.api+"/v1/apiUsageMetrics?orgId=&requestPath=/v1/chains&"+rng, opKey, nil, &keylessUsage); code != 200 {
		t.Fatalf("getApiUsageMetrics as the operator: %d", code)
	}
	n := 0
	for _, m := range keylessUsage.Metrics {
		for _, v := range m.Values {
			n += v.TotalRequests
		}
	}
	if n != keyless {
		t.Errorf("keyless requests to /v1/chains: %d logged, %d sent", n, keyless)
	}
}
