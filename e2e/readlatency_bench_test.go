package e2e

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkDevStackReadLatency measures what MoraineQueryLatencyHigh
// (deploy/prometheus/rules.yml) judges, on the development stack's shape:
// the development chain mining a block per second with 16 transactions,
// ingest, the processor, query and delivery, all on this machine. For each
// rate of MORAINE_BENCH_READ_RATES (req/s, default "4,20") it sends reads
// open-loop for MORAINE_BENCH_READ_DURATION (default 2m) round-robin over
// six read routes (after 30 s of the same reads at the first rate, not
// measured: the stack is still settling after its start), then reads the
// query service's own latency histogram
// over that window and prints, per route, the count, p50 and p99 (as
// Prometheus interpolates them) and how many requests took over 25, 50,
// 100 and 250 ms: the shares the alert compares with its thresholds.
//
//	go test -run XXX -bench DevStackReadLatency -benchtime 1x ./e2e
func BenchmarkDevStackReadLatency(b *testing.B) {
	rates := strings.Split(envOr("MORAINE_BENCH_READ_RATES", "4,20"), ",")
	dur, err := time.ParseDuration(envOr("MORAINE_BENCH_READ_DURATION", "2m"))
	if err != nil {
		b.Fatal(err)
	}
	rpcAddr := freeAddr(b)
	start(b, "devchain", "--rpc.listen-address", rpcAddr, "--block.interval", "1s", "--traffic.tx-per-block", "16")
	rpcURL := "http://" + rpcAddr
	eventually(b, 60*time.Second, "devchain RPC", func() bool { _, err := rpcCall(rpcURL, "eth_blockNumber"); return err == nil })
	s := startServices(b, fmt.Sprintf(`{"evmChainId":"43112","name":"Development chain","network":"devnet",
		"rpcUrls":["%s"],"wsUrl":"ws://%s","networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},
		"traces":true,"webhooks":true,"startBlock":0}`, rpcURL, rpcAddr), pipelineOpts{delivery: true})
	// Blocks 1..15 to read (the chain mines one a second).
	eventually(b, 60*time.Second, "15 blocks indexed", func() bool {
		var blk map[string]any
		return getJSON(b, s.api+"/v1/chains/43112/blocks/15", &blk) == http.StatusOK
	})
	paths := []string{"/v1/chains", "/v1/chains/43112", "/v1/chains/43112/blocks?pageSize=10",
		"/v1/chains/43112/blocks/{n}", "/v1/chains/43112/blocks/{n}/transactions", "/v1/blocks"}
	// reads sends reads at rate for d, open-loop.
	reads := func(rate float64, d time.Duration) {
		var wg sync.WaitGroup
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for i, end := 0, time.Now().Add(d); time.Now().Before(end); i++ {
			<-tick.C
			p := strings.ReplaceAll(paths[i%len(paths)], "{n}", strconv.Itoa(1+rand.IntN(15)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				if resp, err := http.Get(s.api + p); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
	}
	for b.Loop() {
		for i, rs := range rates {
			rate, err := strconv.ParseFloat(rs, 64)
			if err != nil || rate <= 0 {
				b.Fatalf("MORAINE_BENCH_READ_RATES: %q", rs)
			}
			if i == 0 {
				reads(rate, 30*time.Second)
			}
			before := histogram(b, s.metrics["query"])
			reads(rate, dur)
			after := histogram(b, s.metrics["query"])
			routes := make([]string, 0, len(after))
			for r := range after {
				routes = append(routes, r)
			}
			sort.Strings(routes)
			for _, r := range routes {
				d := map[float64]float64{}
				for le, v := range after[r] {
					d[le] = v - before[r][le]
				}
				n := d[math.Inf(1)]
				if n == 0 {
					continue
				}
				fmt.Printf("reads %s/s for %s: %-50s n=%4.0f p50=%6.1fms p99=%6.1fms over 25ms=%3.0f 50ms=%3.0f 100ms=%3.0f 250ms=%3.0f\n",
					rs, dur, r, n, 1000*bucketQuantile(0.5, d), 1000*bucketQuantile(0.99, d),
					n-d[0.025], n-d[0.05], n-d[0.1], n-d[0.25])
			}
		}
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// histogram reads the query service's GET latency buckets: route to upper
// bound to cumulative count.
func histogram(tb testing.TB, url string) map[string]map[float64]float64 {
	const name = "moraine_query_http_request_duration_seconds_bucket"
	out := map[string]map[float64]float64{}
	for labels, v := range scrape(tb, url, name) {
		ls := map[string]string{}
		for _, l := range labelRe.FindAllStringSubmatch(labels, -1) {
			ls[l[1]] = l[2]
		}
		if ls["method"] != "GET" {
			continue
		}
		le, err := strconv.ParseFloat(ls["le"], 64)
		if err != nil {
			continue
		}
		if out[ls["route"]] == nil {
			out[ls["route"]] = map[float64]float64{}
		}
		out[ls["route"]][le] = v
	}
	return out
}

// bucketQuantile interpolates like Prometheus's histogram_quantile.
func bucketQuantile(q float64, b map[float64]float64) float64 {
	les := make([]float64, 0, len(b))
	for le := range b {
		les = append(les, le)
	}
	sort.Float64s(les)
	rank := q * b[math.Inf(1)]
	prevLe, prevC := 0.0, 0.0
	for _, le := range les {
		if c := b[le]; c >= rank {
			if math.IsInf(le, 1) {
				return prevLe
			}
			return prevLe + (le-prevLe)*(rank-prevC)/(c-prevC)
		}
		prevLe, prevC = le, b[le]
	}
	return math.NaN()
}
