package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/moraine-data/moraine/pkg/kafkautil"
)

// BenchmarkSoak runs the pipeline at the head of the development chain for
// MORAINE_SOAK_DURATION (30m; make soak): a block a second with
// MORAINE_SOAK_TX_PER_BLOCK (200) transactions, 1,000 webhooks watching
// 100,000 addresses between them (100 each), of which
// MORAINE_SOAK_HOT_WEBHOOKS (20) also watch one of the chain's busy
// accounts each, signed deliveries to a local receiver.
//
// Every MORAINE_SOAK_REPORT (5m) it prints a "soak" window: the latency
// from a block's appearance at the node (its newHeads announcement) to each
// of its webhook messages' arrival at the receiver (p50, p99, max; goal p99
// at most 300 ms in every window), messages per second, each process's
// resident memory and goroutines, every consumer group's lag, ClickHouse's
// active parts and the delivery log's rows. The summary compares the first
// and the last window: memory and goroutines should stay flat.
func BenchmarkSoak(b *testing.B) {
	for b.Loop() {
		runSoak(b)
	}
}

// soakReceiver answers every POST with 200 and keeps, per message, the
// block it is about and when it arrived (not the bodies: a 30-minute run
// delivers hundreds of thousands).
type soakReceiver struct {
	mu       sync.Mutex
	arrivals []soakArrival
	srv      *httptest.Server
}

type soakArrival struct {
	block uint64
	at    time.Time
}

func newSoakReceiver(tb testing.TB) *soakReceiver {
	r := &soakReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(req.Body)
		_, block, _ := payloadTx(body)
		r.mu.Lock()
		r.arrivals = append(r.arrivals, soakArrival{block: block, at: at})
		r.mu.Unlock()
	}))
	tb.Cleanup(r.srv.Close)
	return r
}

// take returns the arrivals since the last take.
func (r *soakReceiver) take() []soakArrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.arrivals
	r.arrivals = nil
	return out
}

// headWatcher records when each block number first appears at the node.
type headWatcher struct {
	mu   sync.Mutex
	seen map[uint64]time.Time
}

// newest is the highest block number seen so far (0: none).
func (h *headWatcher) newest() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var n uint64
	for k := range h.seen {
		n = max(n, k)
	}
	return n
}

// run records the heads the node announces on its newHeads subscription
// (the WebSocket at rpcURL's address), subscribing again after an error. A
// subscription times each block when the node has it, without the load that
// polling the node often enough to time blocks to the millisecond would add
// to the machine being measured.
func (h *headWatcher) run(ctx context.Context, rpcURL string) {
	wsURL := "ws" + strings.TrimPrefix(rpcURL, "http")
	for ctx.Err() == nil {
		h.follow(ctx, wsURL)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// follow records heads until the subscription or ctx ends.
func (h *headWatcher) follow(ctx context.Context, wsURL string) {
	c, err := rpc.DialContext(ctx, wsURL)
	if err != nil {
		return
	}
	defer c.Close()
	type head struct {
		Number hexutil.Uint64 `json:"number"`
	}
	heads := make(chan head, 64)
	sub, err := c.EthSubscribe(ctx, heads, "newHeads")
	if err != nil {
		return
	}
	defer sub.Unsubscribe()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.Err():
			return
		case hd := <-heads:
			h.saw(uint64(hd.Number), time.Now())
		}
	}
}

// saw records block n's first appearance at now and forgets blocks older
// than ten minutes, which are not waited for any more.
func (h *headWatcher) saw(n uint64, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.seen[n]; !ok {
		h.seen[n] = now
	}
	for k, t := range h.seen {
		if now.Sub(t) > 10*time.Minute {
			delete(h.seen, k)
		}
	}
}

func (h *headWatcher) at(n uint64) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.seen[n]
	return t, ok
}

// soakWindow is what one report interval measured.
type soakWindow struct {
	messages      int
	p50, p99, max time.Duration
	rss           map[string]uint64
	goroutines    map[string]float64
	// heap is the Go heap in use (go_memstats_heap_inuse_bytes): unlike
	// resident memory, it does not include what the garbage collector has
	// not returned yet, so growth there is what a leak looks like.
	heap map[string]float64
}

func runSoak(b *testing.B) {
	duration := envDuration(b, "MORAINE_SOAK_DURATION", 30*time.Minute)
	report := envDuration(b, "MORAINE_SOAK_REPORT", 5*time.Minute)
	txPerBlock := int(envFloat(b, "MORAINE_SOAK_TX_PER_BLOCK", 200))
	webhooks := int(envFloat(b, "MORAINE_SOAK_WEBHOOKS", 1000))
	perWebhook := int(envFloat(b, "MORAINE_SOAK_ADDRESSES_PER_WEBHOOK", 100))
	hot := int(envFloat(b, "MORAINE_SOAK_HOT_WEBHOOKS", 20))

	rpcAddr := freeAddr(b)
	// On disk: the node keeps every block of the run (archive mode).
	chain := start(b, "devchain", "--rpc.listen-address", rpcAddr, "--block.interval", "1s",
		"--traffic.tx-per-block", strconv.Itoa(txPerBlock), "--traffic.accounts", "32", "--datadir", b.TempDir())
	rpcURL := "http://" + rpcAddr
	eventually(b, 2*time.Minute, "devchain RPC", func() bool {
		_, err := rpcCall(rpcURL, "eth_blockNumber")
		return err == nil
	})
	var accounts []string
	raw, err := rpcCall(rpcURL, "moraine_accounts")
	if err != nil || json.Unmarshal(raw, &accounts) != nil || len(accounts) == 0 {
		b.Fatalf("moraine_accounts: %v %s", err, raw)
	}
	recv := newSoakReceiver(b)
	var created time.Duration
	s := startServices(b, fmt.Sprintf(`{"evmChainId":"43112","name":"Development chain","network":"devnet",
		"rpcUrls":["%s"],"wsUrl":"ws://%s","networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},
		"traces":true,"webhooks":true,"startBlock":0}`, rpcURL, rpcAddr), pipelineOpts{delivery: true,
		beforeIngest: func(s *stackUp) {
			t0 := time.Now()
			createSoakWebhooks(b, s, recv.srv.URL, accounts, webhooks, perWebhook, hot)
			created = time.Since(t0)
		}})
	s.procs["devchain"], s.pids["devchain"] = chain, chain.cmd.Process.Pid
	for name, pid := range stackPIDs(b) {
		s.pids[name] = pid
	}
	fmt.Printf("\nsoak: %d webhooks watching %d addresses (%d of them hot: one of the chain's %d busy accounts each), created in %s; "+
		"development chain at 1 block/s with %d transactions a block; %s, a report every %s; database %s, topic prefix %s\n",
		webhooks, webhooks*perWebhook, hot, len(accounts), created.Round(time.Millisecond), txPerBlock, duration, report, s.ch.Database, s.kafka.TopicPrefix)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	heads := &headWatcher{seen: map[uint64]time.Time{}}
	go heads.run(ctx, rpcURL)
	kcl, err := kafkautil.NewClient(ctx, testLogger(), s.kafka.BaseOpts(testLogger(), "bench-soak")...)
	if err != nil {
		b.Fatal(err)
	}
	defer kcl.Close()
	adm := kadm.NewClient(kcl)

	// Let ingest reach the head and the first messages through.
	time.Sleep(30 * time.Second)
	recv.take()
	budget := newLatencyBudget(b, s)
	start := time.Now()
	var windows []soakWindow
	var unmatched int
	for w := 1; time.Since(start) < duration; w++ {
		time.Sleep(min(report, duration-time.Since(start)))
		got := recv.take()
		var lat []time.Duration
		for _, a := range got {
			if t, ok := heads.at(a.block); ok {
				lat = append(lat, a.at.Sub(t))
			} else {
				unmatched++
			}
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		win := soakWindow{messages: len(got), rss: map[string]uint64{}, goroutines: map[string]float64{}, heap: map[string]float64{}}
		if len(lat) > 0 {
			q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
			win.p50, win.p99, win.max = q(0.5), q(0.99), lat[len(lat)-1]
		}
		for name, pid := range s.pids {
			win.rss[name] = procRSS(pid)
			if url, ok := s.metrics[name]; ok {
				for _, v := range scrape(b, url, "go_goroutines") {
					win.goroutines[name] = v
				}
				for _, v := range scrape(b, url, "go_memstats_heap_inuse_bytes") {
					win.heap[name] = v
				}
			}
		}
		windows = append(windows, win)
		goal := "met"
		if win.p99 > 300*time.Millisecond || len(lat) == 0 {
			goal = "MISSED"
		}
		elapsed := time.Since(start).Round(time.Second)
		fmt.Printf("soak window %d (to %s): %d messages (%.0f/s), head to webhook p50 %s p99 %s max %s (goal p99 <= 300ms: %s)\n",
			w, elapsed, len(got), float64(len(got))/report.Seconds(), win.p50.Round(time.Millisecond), win.p99.Round(time.Millisecond),
			win.max.Round(time.Millisecond), goal)
		heapMB := map[string]float64{}
		for n, v := range win.heap {
			heapMB[n] = v / (1 << 20)
		}
		fmt.Printf("soak window %d: rss MB %s; Go heap in use MB %s; goroutines %s\n", w, rssLine(win.rss), goroutineLine(heapMB), goroutineLine(win.goroutines))
		fmt.Printf("soak window %d: mean time per step: %s\n", w, budget.window())
		fmt.Printf("soak window %d: consumer lag %s\n", w, groupLags(adm, s.kafka.TopicPrefix))
		var parts uint64
		for _, t := range tableSizes(b, s.conn, s.ch.Database) {
			parts += t.parts
		}
		fmt.Printf("soak window %d: clickhouse active parts %d, delivery log %d rows; retries pending %s\n", w, parts,
			queryUint(b, s.conn, "SELECT count() FROM deliveries"), metricValue(b, s.metrics["delivery"], "moraine_delivery_retries_pending"))
	}
	stop()
	first, last := windows[0], windows[len(windows)-1]
	missed := 0
	for _, w := range windows {
		if w.p99 > 300*time.Millisecond || w.messages == 0 {
			missed++
		}
	}
	fmt.Printf("\nsoak summary: %d windows of %s; p99 over 300 ms in %d of them; %d messages about blocks not seen at the node by the watcher\n",
		len(windows), report, missed, unmatched)
	names := make([]string, 0, len(first.rss))
	for n := range first.rss {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Printf("soak summary: %-10s rss %4d MB -> %4d MB, Go heap in use %4.0f MB -> %4.0f MB, goroutines %4.0f -> %4.0f (first window -> last)\n", n,
			first.rss[n]>>20, last.rss[n]>>20, first.heap[n]/(1<<20), last.heap[n]/(1<<20), first.goroutines[n], last.goroutines[n])
	}
	for _, p := range s.procs {
		p.stop(15 * time.Second)
	}
}

// createSoakWebhooks creates the soak's webhooks through the API, eight at
// a time, on an enterprise account (1,000 webhooks of up to 100,000
// addresses).
func createSoakWebhooks(b *testing.B, s *stackUp, url string, accounts []string, n, perWebhook, hot int) {
	key := strings.TrimSpace(runTool(b, "moraine-admin", "dev-key", "--plan", "enterprise", "--out", filepath.Join(b.TempDir(), "key"),
		"--clickhouse.addr", s.ch.Addr, "--clickhouse.database", s.ch.Database))
	rng := rand.New(rand.NewPCG(13, 13))
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	bodies := make([]map[string]any, n)
	for i := range n {
		addrs := make([]string, 0, perWebhook)
		if i < hot {
			addrs = append(addrs, accounts[i%len(accounts)])
		}
		for len(addrs) < perWebhook {
			addrs = append(addrs, fmt.Sprintf("0x%016x%016x%08x", rng.Uint64(), rng.Uint64(), rng.Uint32()))
		}
		bodies[i] = map[string]any{"url": url + "/hook/" + strconv.Itoa(i), "chainId": "43112", "eventType": "address_activity",
			"name": fmt.Sprintf("soak %d", i), "metadata": map[string]any{"addresses": addrs},
			"includeLogs": i < hot, "includeInternalTxs": i < hot}
	}
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				if code := call(b, "POST", s.api+"/v1/webhooks", key, bodies[i], nil); code != http.StatusCreated {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("webhook %d: %d", i, code))
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if len(failed) > 0 {
		b.Fatalf("creating webhooks: %d failed, first: %s", len(failed), failed[0])
	}
}

// groupLags is every consumer group of the run (its topic prefix) with its
// total lag.
func groupLags(adm *kadm.Client, prefix string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return "? (" + err.Error() + ")"
	}
	var names []string
	for _, g := range listed.Groups() {
		if strings.HasPrefix(g, prefix) {
			names = append(names, g)
		}
	}
	lags, err := adm.Lag(ctx, names...)
	if err != nil {
		return "? (" + err.Error() + ")"
	}
	var parts []string
	for _, l := range lags.Sorted() {
		parts = append(parts, fmt.Sprintf("%s %d", strings.TrimPrefix(l.Group, prefix), l.Lag.Total()))
	}
	return strings.Join(parts, ", ")
}

func goroutineLine(g map[string]float64) string {
	names := make([]string, 0, len(g))
	for n := range g {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.0f", n, g[n]))
	}
	return strings.Join(parts, ", ")
}

// metricValue is the sum of a metric's series at url, as text.
func metricValue(tb testing.TB, url, name string) string {
	v, n := 0.0, 0
	for _, x := range scrape(tb, url, name) {
		v += x
		n++
	}
	if n == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// latencyBudget reads, per window, the mean time of the steps a block takes
// from the node to a webhook, from the services' histograms (the change of
// _sum over the change of _count): ingest's fetch of a span of blocks, its
// produce, the matcher's batch (catch-up, match, payloads, Kafka
// transaction), delivery's attempt (the POST).
type latencyBudget struct {
	tb    testing.TB
	steps []budgetStep
}

type budgetStep struct {
	name, url, metric, labels string
	sum, count                float64
}

func newLatencyBudget(tb testing.TB, s *stackUp) *latencyBudget {
	lb := &latencyBudget{tb: tb, steps: []budgetStep{
		{name: "ingest fetch", url: s.metrics["ingest"], metric: "moraine_ingest_stage_duration_seconds", labels: `stage="fetch"`},
		{name: "ingest produce", url: s.metrics["ingest"], metric: "moraine_ingest_stage_duration_seconds", labels: `stage="produce"`},
		{name: "matcher batch", url: s.metrics["processor"], metric: "moraine_processor_match_batch_duration_seconds", labels: `stage="total"`},
		{name: "matcher transaction", url: s.metrics["processor"], metric: "moraine_processor_match_batch_duration_seconds", labels: `stage="transaction"`},
		{name: "delivery attempt", url: s.metrics["delivery"], metric: "moraine_delivery_attempt_duration_seconds"},
	}}
	lb.window()
	return lb
}

// window returns the means since the last call.
func (lb *latencyBudget) window() string {
	var parts []string
	for i := range lb.steps {
		st := &lb.steps[i]
		sum, count := 0.0, 0.0
		for labels, v := range scrape(lb.tb, st.url, st.metric+"_sum") {
			if strings.Contains(labels, st.labels) {
				sum += v
			}
		}
		for labels, v := range scrape(lb.tb, st.url, st.metric+"_count") {
			if strings.Contains(labels, st.labels) {
				count += v
			}
		}
		if d := count - st.count; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", st.name, time.Duration((sum-st.sum)/d*float64(time.Second)).Round(100*time.Microsecond)))
		}
		st.sum, st.count = sum, count
	}
	return strings.Join(parts, ", ")
}
