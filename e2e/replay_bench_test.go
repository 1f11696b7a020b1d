package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// latencyReceiver keeps, for latency, the arrival and block of the
// messages to one path, and only counts the others (a large replay's
// bodies are not kept).
type latencyReceiver struct {
	mu     sync.Mutex
	path   string
	got    []delivered
	counts map[string]int
	last   map[string]time.Time
	srv    *httptest.Server
}

func newLatencyReceiver(t testing.TB, path string) *latencyReceiver {
	r := &latencyReceiver{path: path, counts: map[string]int{}, last: map[string]time.Time{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		now := time.Now()
		r.mu.Lock()
		r.counts[req.URL.Path]++
		r.last[req.URL.Path] = now
		if req.URL.Path == r.path {
			r.got = append(r.got, delivered{path: req.URL.Path, body: body, hdr: req.Header.Clone(), at: now})
		}
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *latencyReceiver) count(path string) (int, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[path], r.last[path]
}

// latencies are the head-to-webhook latencies of the receiver's messages
// that arrived in [from, to), against when their block appeared at the node
// (soak's headWatcher, which forgets blocks after ten minutes).
func latencies(h *headWatcher, r *latencyReceiver, from, to time.Time) []time.Duration {
	r.mu.Lock()
	got := append([]delivered(nil), r.got...)
	r.mu.Unlock()
	var out []time.Duration
	for _, m := range got {
		if m.at.Before(from) || !m.at.Before(to) {
			continue
		}
		_, block, _ := payloadTx(m.body)
		if at, ok := h.at(block); ok {
			out = append(out, m.at.Sub(at))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[int(q*float64(len(d)-1))]
}

// BenchmarkWebhookReplay measures a large replay and what it does to live
// deliveries. Two chains run through one pipeline (ingest, processor,
// query, delivery): a corpus chain of MORAINE_BENCH_REPLAY_BLOCKS blocks
// (20,000 by default) built by bin/corpus from the recordings and
// backfilled first, and the development chain, mining a block every 500 ms
// with a webhook on 5 busy accounts (logs and internal transactions) whose
// head-to-webhook latency is measured as BenchmarkWebhookLatency does.
// Then a webhook is created on the corpus's busiest address with fromBlock
// at its first block: its replay's messages per second, produced (job
// created to done) and delivered (to the last arrival at a loopback
// receiver), and the live webhook's p50 and p99 before and during the
// replay. The account's plan is lifted to 1,000,000 replayed messages per
// second: the replay runs as fast as moraine can, the worst case for the
// live deliveries beside it.
func BenchmarkWebhookReplay(b *testing.B) {
	for b.Loop() {
		blocks := 20000
		if v := os.Getenv("MORAINE_BENCH_REPLAY_BLOCKS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				b.Fatal(err)
			}
			blocks = n
		}
		const corpusChain = 99915
		dir := filepath.Join(b.TempDir(), "corpus")
		runTool(b, "corpus", "--out", dir, "--blocks", strconv.Itoa(blocks), "--transactions", "1",
			"--shared-data", testenv.SharedData(b, "."), "--chain.id", strconv.Itoa(corpusChain))
		raw, err := os.ReadFile(filepath.Join(dir, "corpus.json"))
		if err != nil {
			b.Fatal(err)
		}
		var meta corpusMeta
		if err := json.Unmarshal(raw, &meta); err != nil {
			b.Fatal(err)
		}
		corpusAddr := freeAddr(b)
		start(b, "replay", "--replay.file", dir, "--replay.mode", "backfill", "--chain.id", strconv.Itoa(corpusChain),
			"--rpc.listen-address", corpusAddr)
		devAddr := freeAddr(b)
		start(b, "devchain", "--rpc.listen-address", devAddr, "--block.interval", "500ms", "--traffic.tx-per-block", "12")
		devURL := "http://" + devAddr
		eventually(b, 60*time.Second, "chain sources", func() bool {
			_, err1 := rpcCall(devURL, "eth_blockNumber")
			_, err2 := rpcCall("http://"+corpusAddr, "eth_blockNumber")
			return err1 == nil && err2 == nil
		})
		var accounts []string
		raw, err = rpcCall(devURL, "moraine_accounts")
		if err != nil {
			b.Fatal(err)
		}
		_ = json.Unmarshal(raw, &accounts)
		plans := filepath.Join(b.TempDir(), "plans.json")
		if err := os.WriteFile(plans, []byte(`{"plans":{"custom":{"replayBlocks":100000000,"replayMessagesPerSecond":1000000}}}`), 0o644); err != nil {
			b.Fatal(err)
		}
		recv := newLatencyReceiver(b, "/lat")
		var key string
		s := startServices(b, fmt.Sprintf(`{"evmChainId":"43112","name":"Development chain","network":"devnet",
			"rpcUrls":["%s"],"wsUrl":"ws://%s","networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},
			"traces":true,"webhooks":true,"startBlock":0},
			{"evmChainId":"%d","name":"Corpus","network":"mainnet","rpcUrls":["http://%s"],
			"networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},"traces":true,"webhooks":true,"startBlock":%d}`,
			devURL, devAddr, corpusChain, corpusAddr, meta.First), pipelineOpts{delivery: true,
			queryArgs: []string{"--plans.file", plans},
			beforeIngest: func(s *stackUp) {
				key = strings.TrimSpace(runTool(b, "moraine-admin", "dev-key", "--plan", "custom", "--out", filepath.Join(b.TempDir(), "key"),
					"--clickhouse.addr", s.ch.Addr, "--clickhouse.database", s.ch.Database))
				if code := call(b, "POST", s.api+"/v1/webhooks", key, map[string]any{
					"url": recv.srv.URL + "/lat", "chainId": "43112", "eventType": "address_activity",
					"metadata": map[string]any{"addresses": accounts[:5]}, "includeLogs": true, "includeInternalTxs": true,
				}, nil); code != http.StatusCreated {
					b.Fatalf("create webhook: %d", code)
				}
			}})
		indexed := func() uint64 {
			var n uint64
			_ = s.conn.QueryRow(context.Background(), "SELECT number FROM chain_heads FINAL WHERE chain_id = ?", uint64(corpusChain)).Scan(&n)
			return n
		}
		eventually(b, 20*time.Minute, fmt.Sprintf("the corpus indexed to block %d", meta.Last), func() bool { return indexed() >= meta.Last })
		var busiest string
		var busiestTxs uint64
		if err := s.conn.QueryRow(context.Background(), `SELECT lower(hex(a)), count() AS c FROM (
			SELECT from_address AS a FROM transactions_by_block WHERE chain_id = ? UNION ALL
			SELECT to_address AS a FROM transactions_by_block WHERE chain_id = ? AND to_address != '')
			GROUP BY a ORDER BY c DESC LIMIT 1`, uint64(corpusChain), uint64(corpusChain)).Scan(&busiest, &busiestTxs); err != nil {
			b.Fatal(err)
		}

		heads := &headWatcher{seen: map[uint64]time.Time{}}
		hctx, stopHeads := context.WithCancel(context.Background())
		headsDone := make(chan struct{})
		go func() { defer close(headsDone); heads.run(hctx, devURL) }()
		defer func() { stopHeads(); <-headsDone }()
		time.Sleep(3 * time.Second) // ingest at the development chain's head
		before := time.Now()
		time.Sleep(20 * time.Second)
		created := time.Now()
		quiet := latencies(heads, recv, before, created)
		var w struct {
			ID       string `json:"id"`
			ReplayID string `json:"replayId"`
		}
		if code := call(b, "POST", s.api+"/v1/webhooks", key, map[string]any{
			"url": recv.srv.URL + "/replay", "chainId": strconv.Itoa(corpusChain), "eventType": "address_activity",
			"metadata": map[string]any{"addresses": []string{"0x" + busiest}}, "fromBlock": meta.First,
		}, &w); code != http.StatusCreated {
			b.Fatalf("create the replayed webhook: %d", code)
		}
		var job replayJob
		eventually(b, 30*time.Minute, "the replay done", func() bool {
			call(b, "GET", s.api+"/v1/webhooks/"+w.ID+"/replays/"+w.ReplayID, key, nil, &job)
			if job.Status == "failed" {
				b.Fatalf("replay failed: %s", job.Error)
			}
			return job.Status == "done"
		})
		produced := time.Since(created)
		want := int(job.Messages.Renumbered)
		eventually(b, 30*time.Minute, fmt.Sprintf("%d replayed messages delivered", want), func() bool {
			n, _ := recv.count("/replay")
			return n >= want
		})
		_, lastAt := recv.count("/replay")
		delivered := lastAt.Sub(created)
		time.Sleep(2 * time.Second) // the live messages of the last blocks
		during := latencies(heads, recv, created, lastAt)
		if want < 1000 || len(quiet) < 20 || len(during) < 20 {
			b.Fatalf("too little measured: %d replayed messages, %d and %d live ones", want, len(quiet), len(during))
		}
		b.ReportMetric(float64(want)/produced.Seconds(), "replay-produced-msg/s")
		b.ReportMetric(float64(want)/delivered.Seconds(), "replay-delivered-msg/s")
		b.ReportMetric(float64(quantile(during, 0.99).Microseconds())/1000, "live-p99-ms")
		fmt.Printf("replay throughput: %d messages (blocks %d-%d of the corpus, address 0x%s in %d transactions): produced in %s (%.0f msg/s), delivered in %s (%.0f msg/s)\n",
			want, job.FromBlock, job.ToBlock, busiest, busiestTxs, produced.Round(time.Millisecond), float64(want)/produced.Seconds(),
			delivered.Round(time.Millisecond), float64(want)/delivered.Seconds())
		fmt.Printf("replay live latency: without the replay %d messages, p50 %s, p99 %s; during it %d messages, p50 %s, p99 %s, max %s\n",
			len(quiet), quantile(quiet, 0.5).Round(time.Millisecond), quantile(quiet, 0.99).Round(time.Millisecond),
			len(during), quantile(during, 0.5).Round(time.Millisecond), quantile(during, 0.99).Round(time.Millisecond),
			during[len(during)-1].Round(time.Millisecond))
	}
}
