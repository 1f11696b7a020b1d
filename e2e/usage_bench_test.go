package e2e

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// BenchmarkUsageOutage measures what an outage of ClickHouse costs the
// request log: the C-Chain blocks 1..100 indexed through the real
// pipeline, then open-loop reads of random blocks at MORAINE_BENCH_OUTAGE_RATE
// (default 500 req/s) for 30 s, then with ClickHouse unreachable from
// query and the processor for MORAINE_BENCH_OUTAGE (default 60s: a proxy in
// front of ClickHouse closes every connection and refuses new ones; the
// shared local stack's ClickHouse keeps running for everyone else), then
// 30 s more once it is back. Every answer's x-request-id must then be in
// api_requests exactly once: it prints how many were answered (and how many
// 503 during the outage), logged, lost and logged twice, and how long after
// ClickHouse came back the log had them all. (make bench: bench/usage.sh.)
//
//	go test -run XXX -bench UsageOutage -benchtime 1x ./e2e
func BenchmarkUsageOutage(b *testing.B) {
	rate := 500.0
	if v := os.Getenv("MORAINE_BENCH_OUTAGE_RATE"); v != "" {
		fmt.Sscanf(v, "%g", &rate)
	}
	outage, err := time.ParseDuration(envOr("MORAINE_BENCH_OUTAGE", "60s"))
	if err != nil {
		b.Fatal(err)
	}
	proxy := testenv.StartProxy(b, os.Getenv("MORAINE_CLICKHOUSE_ADDR"))
	via := []string{"--clickhouse.addr", proxy.Addr()}
	s := runPipeline(b, cchain, 1, pipelineOpts{processorArgs: via, queryArgs: via})
	eventually(b, 120*time.Second, "block 100 indexed", func() bool {
		var blk map[string]any
		return getJSON(b, s.api+"/v1/chains/43114/blocks/100", &blk) == http.StatusOK
	})
	agent := fmt.Sprintf("usage-outage-%d", time.Now().UnixNano())
	var (
		mu       sync.Mutex
		answered = map[string]bool{}
		codes    = map[int]int{}
		failed   int
		wg       sync.WaitGroup
	)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	slots := make(chan struct{}, 256)
	load := func(d time.Duration) {
		interval := time.Duration(float64(time.Second) / rate)
		start := time.Now()
		for i := 0; time.Since(start) < d; i++ {
			if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
				time.Sleep(wait)
			}
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/chains/43114/blocks/%d", s.api, 1+rand.IntN(100)), nil)
				req.Header.Set("User-Agent", agent)
				resp, err := client.Do(req)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				codes[resp.StatusCode]++
				answered[strings.ReplaceAll(resp.Header.Get("x-request-id"), "-", "")] = true
			}()
		}
	}
	b.ResetTimer()
	load(30 * time.Second)
	proxy.Cut()
	load(outage)
	proxy.Restore()
	back := time.Now()
	load(30 * time.Second)
	wg.Wait()
	b.StopTimer()

	// Every answered request, in the log once (read directly, not through
	// the proxy); five minutes for the log to catch up, then what is
	// missing is lost.
	var logged, distinct uint64
	lost := len(answered)
	caughtUp := time.Duration(-1)
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		rows, err := s.conn.Query(b.Context(), "SELECT lower(hex(request_id)) FROM api_requests WHERE user_agent = ?", agent)
		if err != nil {
			continue
		}
		seen := map[string]int{}
		for rows.Next() {
			var id string
			if rows.Scan(&id) == nil {
				seen[id]++
			}
		}
		rows.Close()
		logged, distinct, lost = 0, uint64(len(seen)), len(answered)
		for id, n := range seen {
			logged += uint64(n)
			if answered[id] {
				lost--
			}
		}
		if lost == 0 {
			caughtUp = time.Since(back)
			break
		}
	}
	if lost > 0 {
		b.Errorf("%d answered requests never reached the request log", lost)
	}
	total := 60*time.Second + outage
	fmt.Printf("usage-outage: %d requests answered over %s (open loop at %.0f req/s, %.0f achieved) with ClickHouse unreachable for %s in the middle (%d answered 503, %d not answered); logged %d, lost %d, logged twice %d; the log had them all %s after ClickHouse came back\n",
		len(answered), total, rate, float64(len(answered)+failed)/total.Seconds(), outage, codes[503], failed, distinct, lost,
		logged-distinct, caughtUp.Round(time.Second))
}
