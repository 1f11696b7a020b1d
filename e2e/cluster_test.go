//go:build cluster

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/chainlog"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/topics"
)

// The cluster fault suite (make test-cluster). It runs two instances of
// every service on the local cluster of deploy/stack (three Kafka brokers,
// two ClickHouse replicas with ZooKeeper, nginx in front of the query
// instances) over the development chain's traffic of every kind with
// reorgs and webhooks on busy addresses, and SIGKILLs (then restarts) on a
// seeded random schedule a Kafka broker, a ClickHouse replica, the active
// ingest, a processor, a delivery worker and a query instance, each at
// least once. Then it checks against ledgers computed from the node:
//
//   - every canonical block is in ClickHouse with all its rows exactly once
//     (counts with FINAL equal the node's), orphaned blocks are marked
//     removed and the API does not serve them;
//   - the API answered through the surviving query instances;
//   - every expected (webhook, transaction) message arrived at least once,
//     duplicates with the same messageId, including those whose first
//     attempt failed and waited on a retry level across the kills;
//   - with replays in progress through the faults (a replay of a live
//     webhook's history, and a webhook created with fromBlock 1), which
//     the processors' kills and partition moves hand over: both end, every
//     webhook's sequence has no gap, a replayed message repeats a sequence
//     with the same messageId only, and the fromBlock webhook received the
//     chain's whole activity.
//
// It prints, and writes to MORAINE_FAULT_REPORT when set, the figures:
// ingest takeover time, head lag and API errors during each kind of fault,
// duplicates delivered.
//
// Environment: the cluster's addresses (`stack.sh cluster env`, which
// make test-cluster evaluates), MORAINE_FAULT_SEED (random when unset; the
// seed is printed so a failure can be replayed) and MORAINE_FAULT_DURATION
// (the schedule's length, default 4m).

// clusterEnv is the local cluster the suite runs on.
type clusterEnv struct {
	stack      string // deploy/stack/stack.sh
	brokers    string
	chAddr     string
	chCluster  string
	apiURL     string   // nginx
	queryAddrs []string // the query instances nginx forwards to
}

func loadClusterEnv(t *testing.T) clusterEnv {
	t.Helper()
	e := clusterEnv{
		stack:     filepath.Join(repoRoot(t), "deploy", "stack", "stack.sh"),
		brokers:   os.Getenv("MORAINE_KAFKA_BROKERS"),
		chAddr:    os.Getenv("MORAINE_CLICKHOUSE_ADDR"),
		chCluster: os.Getenv("MORAINE_CLICKHOUSE_CLUSTER"),
		apiURL:    os.Getenv("MORAINE_CLUSTER_API_URL"),
	}
	if e.chCluster == "" || e.apiURL == "" || !strings.Contains(e.brokers, ",") || !strings.Contains(e.chAddr, ",") {
		t.Fatal("the local cluster's environment is missing: run `make test-cluster`, or `deploy/stack/stack.sh cluster start` and `eval $(deploy/stack/stack.sh cluster env)`")
	}
	for _, a := range strings.Split(os.Getenv("MORAINE_CLUSTER_QUERY_ADDRS"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			e.queryAddrs = append(e.queryAddrs, a)
		}
	}
	if len(e.queryAddrs) < 2 {
		t.Fatal("MORAINE_CLUSTER_QUERY_ADDRS must list the two query addresses nginx forwards to (stack.sh cluster env)")
	}
	for _, a := range e.queryAddrs {
		if c, err := net.DialTimeout("tcp", a, 200*time.Millisecond); err == nil {
			c.Close()
			t.Fatalf("%s is taken (make cluster's query instances?): run `make cluster-down` first", a)
		}
	}
	return e
}

// node runs `stack.sh cluster VERB NODE`.
func (e clusterEnv) node(t *testing.T, verb, node string) {
	t.Helper()
	out, err := exec.Command("bash", e.stack, "cluster", verb, node).CombinedOutput()
	if err != nil {
		t.Fatalf("stack.sh cluster %s %s: %v\n%s", verb, node, err, out)
	}
}

// instance is one service process of the suite's pipeline.
type instance struct {
	name  string // e.g. ingest-2
	bin   string
	flags []string
	admin string
	p     *proc
}

func (in *instance) metrics() string { return "http://" + in.admin + "/metrics" }
func (in *instance) ready() string   { return "http://" + in.admin + "/readyz" }

// metric reads one series (name{labels}) of the instance, or -1.
func (in *instance) metric(t testing.TB, name, labels string) float64 {
	v, ok := scrape(t, in.metrics(), name)[labels]
	if !ok {
		return -1
	}
	return v
}

type clusterPipeline struct {
	t         *testing.T
	env       clusterEnv
	instances map[string]*instance
	mu        sync.Mutex
}

func (cp *clusterPipeline) start(name, bin string, flags ...string) *instance {
	cp.t.Helper()
	in := &instance{name: name, bin: bin, admin: freeAddr(cp.t)}
	in.flags = append(append([]string(nil), flags...), "--ops.listen-address", in.admin)
	in.p = start(cp.t, bin, in.flags...)
	cp.mu.Lock()
	cp.instances[name] = in
	cp.mu.Unlock()
	return in
}

func (cp *clusterPipeline) get(name string) *instance {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.instances[name]
}

// restart starts a killed instance again with its flags and admin address.
func (cp *clusterPipeline) restart(in *instance) {
	cp.t.Helper()
	in.p = start(cp.t, in.bin, in.flags...)
}

// faultKinds are what the schedule kills, each at least once; ingest
// twice, once killed and once frozen.
var faultKinds = []string{"kafka", "clickhouse", "ingest", "ingest", "processor", "delivery", "query"}

type fault struct {
	kind   string
	target string        // node or instance
	pause  bool          // ingest: SIGSTOP (cut off, still alive) instead of SIGKILL
	gap    time.Duration // wait before the kill
	down   time.Duration // how long it stays down
}

// schedule draws the faults: every kind once in a random order, then random
// kinds while the duration lasts; one fault at a time, so that a Kafka
// broker and a ClickHouse replica are never down together (the cluster
// tolerates one loss of each).
func schedule(rng *rand.Rand, duration time.Duration) []fault {
	kinds := append([]string(nil), faultKinds...)
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	var out []fault
	var total time.Duration
	for i := 0; total < duration || i < len(faultKinds); i++ {
		k := faultKinds[rng.IntN(len(faultKinds))]
		if i < len(kinds) {
			k = kinds[i]
		}
		f := fault{kind: k, gap: time.Duration(5+rng.IntN(10)) * time.Second}
		switch k {
		case "kafka":
			f.target = fmt.Sprintf("kafka-%d", 1+rng.IntN(3))
			f.down = time.Duration(5+rng.IntN(15)) * time.Second
		case "clickhouse":
			f.target = fmt.Sprintf("clickhouse-%d", 1+rng.IntN(2))
			f.down = time.Duration(5+rng.IntN(15)) * time.Second
		case "ingest":
			f.target = "active" // resolved when it happens
			f.down = time.Duration(2+rng.IntN(8)) * time.Second
			// Every other ingest fault freezes the active instance past its
			// lease's session timeout instead: partitioned away but alive, it
			// must be fenced when it wakes with its batch in flight.
			if f.pause = rng.IntN(2) == 0; f.pause {
				f.down = time.Duration(10+rng.IntN(6)) * time.Second
			}
		default:
			f.target = fmt.Sprintf("%s-%d", k, 1+rng.IntN(2))
			f.down = time.Duration(1+rng.IntN(6)) * time.Second
		}
		out = append(out, f)
		total += f.gap + f.down
	}
	return out
}

// probe is one API request of the prober.
type probe struct {
	at      time.Time
	ok      bool
	status  int
	err     string
	apiHead uint64
	lag     int64 // node head - API head, blocks
}

// window is the time a fault lasted, plus a settling period.
type window struct {
	f          fault
	from, to   time.Time
	takeover   time.Duration // ingest: kill to the standby's next block
	takeoverOK bool
}

func TestClusterFaults(t *testing.T) {
	env := loadClusterEnv(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MORAINE_FAULT_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("MORAINE_FAULT_SEED: %v", err)
		}
	}
	duration := 4 * time.Minute
	if s := os.Getenv("MORAINE_FAULT_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("MORAINE_FAULT_DURATION: %v", err)
		}
		duration = d
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	plan := schedule(rng, duration)
	t.Logf("fault suite: seed %d (MORAINE_FAULT_SEED to replay), %d faults over about %s", seed, len(plan), duration)
	started := time.Now()

	// Isolation from earlier runs: a fresh topic prefix and database.
	kcfg := testenv.Kafka(t)
	ccfg := testenv.ClickHouseConfig(t)

	// The chain: blocks every 500 ms with traffic of every kind; reorgs
	// come from the test.
	rpcAddr := freeAddr(t)
	start(t, "devchain", "--rpc.listen-address", rpcAddr, "--block.interval", "500ms", "--traffic.tx-per-block", "12")
	rpcURL := "http://" + rpcAddr
	eventually(t, 60*time.Second, "devchain RPC", func() bool {
		_, err := rpcCall(rpcURL, "eth_blockNumber")
		return err == nil
	})
	chainsFile := filepath.Join(t.TempDir(), "chains.json")
	chain := fmt.Sprintf(`{"chains":[{"evmChainId":"43112","name":"Development chain","network":"devnet",
		"rpcUrls":["%s"],"wsUrl":"ws://%s","networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},
		"traces":true,"webhooks":true,"startBlock":0}]}`, rpcURL, rpcAddr)
	if err := os.WriteFile(chainsFile, []byte(chain), 0o644); err != nil {
		t.Fatal(err)
	}

	cp := &clusterPipeline{t: t, env: env, instances: map[string]*instance{}}
	common := []string{"--kafka.brokers", env.brokers, "--kafka.topic-prefix", kcfg.TopicPrefix, "--chains.file", chainsFile}
	chArgs := []string{"--clickhouse.addr", env.chAddr, "--clickhouse.cluster", env.chCluster,
		"--clickhouse.database", ccfg.Database, "--clickhouse.compression", "none"}
	with := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for i := 1; i <= 2; i++ {
		// Each matcher has its own transactional id, kept across restarts.
		cp.start(fmt.Sprintf("processor-%d", i), "processor", with(common, chArgs,
			[]string{"--matcher.transactional-id", fmt.Sprintf("suite-matcher-%d", i)})...)
	}
	// Replays paced slowly enough to be in progress through several
	// faults (the account's plan is growth).
	plansFile := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(plansFile, []byte(`{"plans":{"growth":{"replayMessagesPerSecond":15}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		cp.start(fmt.Sprintf("query-%d", i), "query", with(common, chArgs, []string{"--plans.file", plansFile,
			"--http.listen-address", env.queryAddrs[i-1],
			// Page tokens from one instance must work on the other.
			"--api.page-token-secret", strings.Repeat("cluster-suite-", 3),
			"--ratelimit.enabled=false", "--log.level", "warn",
			// The receiver is on loopback, which the URL policy refuses by default.
			"--delivery.allow-private-targets"})...)
	}
	for i := 1; i <= 2; i++ {
		cp.start(fmt.Sprintf("delivery-%d", i), "delivery", with(common, chArgs, []string{"--delivery.allow-private-targets",
			// Compressed so that retries happen, and are pending, during the run.
			"--delivery.retry-schedule", "2s,3s,5s,8s,13s,21s,30s,30s,30s"})...)
	}
	for _, n := range []string{"processor-1", "processor-2", "query-1", "query-2", "delivery-1", "delivery-2"} {
		in := cp.get(n)
		waitReady(t, in.p, in.ready(), 3*time.Minute)
	}

	// Webhooks on the traffic's busiest parties, through nginx.
	var contracts struct {
		USD, WMOR, NFT, Items, Factory string
		Relays                         []string
	}
	raw, err := rpcCall(rpcURL, "moraine_contracts")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(raw, &contracts)
	var accounts []string
	raw, err = rpcCall(rpcURL, "moraine_accounts")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(raw, &accounts)
	if len(accounts) < 3 || contracts.USD == "" || len(contracts.Relays) == 0 {
		t.Fatalf("devchain contracts %+v / accounts %v", contracts, accounts)
	}
	recv := newFlakyReceiver(t, "/flaky")
	specs := []webhookSpec{
		{path: "/tokens", addresses: []string{accounts[0], accounts[1], contracts.USD, contracts.NFT, contracts.Items}, logs: true, internal: true},
		{path: "/relays", addresses: []string{contracts.Relays[len(contracts.Relays)-1], contracts.Factory}, internal: true},
		// Every message's first attempt fails: each waits on a retry level.
		{path: "/flaky", addresses: []string{accounts[2], contracts.WMOR}, logs: true},
	}
	out, err := exec.Command(filepath.Join(binaries(t), "moraine-admin"), "dev-key", "--out", filepath.Join(t.TempDir(), "key"),
		"--plan", "growth", "--clickhouse.addr", env.chAddr, "--clickhouse.cluster", env.chCluster,
		"--clickhouse.database", ccfg.Database).Output()
	if err != nil {
		t.Fatalf("moraine-admin dev-key: %v", err)
	}
	key := strings.TrimSpace(string(out))
	if code := call(t, "POST", env.apiURL+"/v1/webhooks:generateOrRotateSharedSecret", key, nil, nil); code != http.StatusCreated {
		t.Fatalf("generate secret: %d", code)
	}
	for _, sp := range specs {
		if code := call(t, "POST", env.apiURL+"/v1/webhooks", key, map[string]any{
			"url": recv.srv.URL + sp.path, "chainId": "43112", "eventType": "address_activity",
			"metadata": map[string]any{"addresses": sp.addresses}, "includeLogs": sp.logs, "includeInternalTxs": sp.internal,
		}, nil); code != http.StatusCreated {
			t.Fatalf("create webhook %s: %d", sp.path, code)
		}
	}

	for i := 1; i <= 2; i++ {
		cp.start(fmt.Sprintf("ingest-%d", i), "ingest", common...)
	}
	for _, n := range []string{"ingest-1", "ingest-2"} {
		in := cp.get(n)
		waitReady(t, in.p, in.ready(), 3*time.Minute)
	}
	if w := activeIngest(t, cp); w == nil {
		t.Fatal("no ingest instance writes the chain")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	probes := runProber(ctx, env.apiURL, rpcURL)
	var reorgMu sync.Mutex
	orphaned := map[string]uint64{} // hash -> number
	reorgsDone := make(chan struct{})
	go func() {
		defer close(reorgsDone)
		// A reorg of depth 1..4 every 15-25 s, until the schedule's last
		// half minute, so that the end state is settled.
		rr := rand.New(rand.NewPCG(seed+1, seed))
		began := time.Now()
		for time.Since(began) < duration-30*time.Second {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(15+rr.IntN(10)) * time.Second):
			}
			var res struct {
				Removed []string `json:"removed"`
				OldHead struct {
					Number uint64 `json:"number"`
				} `json:"oldHead"`
			}
			raw, err := rpcCall(rpcURL, "moraine_reorg", 1+rr.IntN(4))
			if err != nil || json.Unmarshal(raw, &res) != nil {
				t.Logf("moraine_reorg: %v", err)
				continue
			}
			reorgMu.Lock()
			for i, h := range res.Removed {
				orphaned[lower(h)] = res.OldHead.Number - uint64(len(res.Removed)-1-i)
			}
			reorgMu.Unlock()
		}
	}()

	// Replays in progress through the faults: once the chain has history,
	// a replay of /tokens from block 1 and a webhook starting at block 1.
	backfill := webhookSpec{path: "/backfill", addresses: []string{contracts.Relays[len(contracts.Relays)-1], accounts[2]}, internal: true}
	type startedReplay struct{ webhook, id string }
	replays := make(chan []startedReplay, 1)
	go func() {
		var out []startedReplay
		defer func() { replays <- out }()
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(duration/4, 60*time.Second)):
		}
		var hooks struct {
			Webhooks []struct {
				ID  string `json:"id"`
				URL string `json:"url"`
			} `json:"webhooks"`
		}
		if code := call(t, "GET", env.apiURL+"/v1/webhooks", key, nil, &hooks); code != http.StatusOK {
			t.Errorf("list webhooks: %d", code)
			return
		}
		for _, w := range hooks.Webhooks {
			if strings.HasSuffix(w.URL, "/tokens") {
				var j struct {
					ReplayID string `json:"replayId"`
				}
				// Through nginx: a query instance may be down; retry.
				for i := 0; i < 20 && j.ReplayID == ""; i++ {
					if call(t, "POST", env.apiURL+"/v1/webhooks/"+w.ID+":replay", key, map[string]any{"fromBlock": 1}, &j) != http.StatusAccepted {
						time.Sleep(time.Second)
					}
				}
				out = append(out, startedReplay{w.ID, j.ReplayID})
			}
		}
		var w struct {
			ID       string `json:"id"`
			ReplayID string `json:"replayId"`
		}
		for i := 0; i < 20 && w.ReplayID == ""; i++ {
			if call(t, "POST", env.apiURL+"/v1/webhooks", key, map[string]any{
				"url": recv.srv.URL + backfill.path, "chainId": "43112", "eventType": "address_activity",
				"metadata": map[string]any{"addresses": backfill.addresses}, "includeInternalTxs": backfill.internal, "fromBlock": 1,
			}, &w) != http.StatusCreated {
				time.Sleep(time.Second)
			}
		}
		out = append(out, startedReplay{w.ID, w.ReplayID})
		t.Logf("%6.1fs replays started: %+v", time.Since(started).Seconds(), out)
	}()

	// The schedule.
	var windows []*window
	for _, f := range plan {
		time.Sleep(f.gap)
		w := &window{f: f, from: time.Now()}
		switch f.kind {
		case "kafka", "clickhouse":
			env.node(t, "kill", f.target)
			t.Logf("%6.1fs killed %s for %s", time.Since(started).Seconds(), f.target, f.down)
			time.Sleep(f.down)
			env.node(t, "start", f.target)
		case "ingest":
			active := activeIngest(t, cp)
			if active == nil {
				t.Fatal("no ingest instance writes the chain before the fault")
			}
			w.f.target = active.name
			other := cp.get(map[string]string{"ingest-1": "ingest-2", "ingest-2": "ingest-1"}[active.name])
			before := other.metric(t, "moraine_ingest_last_produced_block", `{chain="43112"}`)
			last := active.metric(t, "moraine_ingest_last_produced_block", `{chain="43112"}`)
			how := "killed"
			if f.pause {
				// Freeze it in the middle of its work: a burst of blocks (as
				// after an outage of the node) keeps it fetching and producing,
				// so that it wakes up with a transaction in flight, which must
				// then fail as fenced.
				if _, err := rpcCall(rpcURL, "moraine_mine", 100); err != nil {
					t.Logf("moraine_mine: %v", err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			hit := time.Now()
			if f.pause {
				how = "froze"
				_ = active.p.cmd.Process.Signal(syscall.SIGSTOP)
			} else {
				active.p.kill()
			}
			t.Logf("%6.1fs %s the active ingest %s (last produced block %.0f)", time.Since(started).Seconds(), how, active.name, last)
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) {
				if v := other.metric(t, "moraine_ingest_last_produced_block", `{chain="43112"}`); v > max(last, before) {
					w.takeover, w.takeoverOK = time.Since(hit), true
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("%6.1fs %s took over in %s", time.Since(started).Seconds(), other.name, w.takeover.Round(10*time.Millisecond))
			time.Sleep(max(f.down-time.Since(hit), 0))
			if f.pause {
				_ = active.p.cmd.Process.Signal(syscall.SIGCONT)
			} else {
				cp.restart(active)
			}
		default:
			in := cp.get(f.target)
			in.p.kill()
			t.Logf("%6.1fs killed %s for %s", time.Since(started).Seconds(), f.target, f.down)
			time.Sleep(f.down)
			cp.restart(in)
		}
		w.to = time.Now().Add(10 * time.Second) // settling counts too
		windows = append(windows, w)
	}
	cancel()
	<-reorgsDone
	started2 := <-replays
	specs = append(specs, backfill)

	// Everything back, then the ledger up to the node's head now.
	for _, in := range cp.instances {
		waitReady(t, in.p, in.ready(), 3*time.Minute)
	}
	head := nodeHead(t, rpcURL)
	eventually(t, 3*time.Minute, fmt.Sprintf("the API to serve block %d", head), func() bool {
		var page struct {
			Blocks []struct {
				BlockNumber string `json:"blockNumber"`
			} `json:"blocks"`
		}
		if getJSON(t, env.apiURL+"/v1/chains/43112/blocks?pageSize=1", &page) != http.StatusOK || len(page.Blocks) == 0 {
			return false
		}
		n, _ := strconv.ParseUint(page.Blocks[0].BlockNumber, 10, 64)
		return n >= head
	})
	allProbes := probes.stop()

	conn := openCluster(t, env, ccfg.Database)
	checkChainLog(t, kcfg, rpcURL, head)
	checkBlocks(t, conn, rpcURL, head, orphaned, env.apiURL)
	ledger := rpcTxs(t, rpcURL, 1, head) // genesis has no transactions
	want := map[string]bool{}
	for hash, g := range ledger {
		for _, sp := range specs {
			set := map[string]bool{}
			for _, a := range sp.addresses {
				set[lower(a)] = true
			}
			if g.matches(set, sp.internal, nil) {
				want[sp.path+" "+hash] = true
			}
		}
	}
	missing := func() []string {
		seen := map[string]bool{}
		for _, m := range recv.snapshot() {
			if m.code >= 300 {
				continue
			}
			hash, _, _ := payloadTx(m.body)
			seen[m.path+" "+hash] = true
		}
		var out []string
		for k := range want {
			if !seen[k] {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return out
	}
	deadline := time.Now().Add(3 * time.Minute)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if m := missing(); len(m) > 0 {
		t.Fatalf("timed out after 3m0s waiting for %d expected messages up to block %d; %d never arrived:\n%s",
			len(want), head, len(m), undelivered(t, m, ledger, recv.snapshot(), started, cp))
	}
	// The replays end (they survive the kills, moving with the chain's
	// partition), done.
	if len(started2) != 2 || started2[0].id == "" || started2[1].id == "" {
		t.Fatalf("the replays were not started: %+v", started2)
	}
	for _, r := range started2 {
		var j struct {
			Status, Error        string
			NextBlock, ToBlock   uint64
			Messages             struct{ Retransmitted, Renumbered, Delivered, Failed uint64 }
			MessagesPerSecond    uint32
			CreatedAt, UpdatedAt uint64
		}
		eventuallyShowing(t, 5*time.Minute, "replay "+r.id+" done", func() bool {
			return call(t, "GET", env.apiURL+"/v1/webhooks/"+r.webhook+"/replays/"+r.id, key, nil, &j) == http.StatusOK &&
				(j.Status == "done" || j.Status == "failed")
		}, func() string {
			return fmt.Sprintf("%s, next block %d of %d, messages %+v, created %s ago", j.Status, j.NextBlock, j.ToBlock, j.Messages,
				time.Since(time.UnixMilli(int64(j.CreatedAt))).Round(time.Second))
		})
		if j.Status != "done" {
			t.Errorf("replay %s: %s (%s)", r.id, j.Status, j.Error)
		}
		t.Logf("replay %s of webhook %s: %+v, blocks to %d in %s at %d messages/s", r.id, r.webhook, j.Messages, j.ToBlock,
			time.UnixMilli(int64(j.UpdatedAt)).Sub(time.UnixMilli(int64(j.CreatedAt))).Round(time.Second), j.MessagesPerSecond)
	}
	// A replayed message that repeats a sequence is the same message.
	bySeq := map[string]received{} // path seq -> the first message
	describe := func(m received) string {
		hash, block, id := payloadTx(m.body)
		return fmt.Sprintf("%s (%s, replay %q, block %d, tx %s, arrived %s)", id, m.kind, m.replay, block, hash,
			m.at.Sub(started).Round(time.Millisecond))
	}
	for _, m := range recv.snapshot() {
		if m.code >= 300 || m.seq == 0 {
			continue
		}
		k := fmt.Sprintf("%s %d", m.path, m.seq)
		if prev, ok := bySeq[k]; ok {
			if messageIDOf(prev) != messageIDOf(m) {
				t.Errorf("%s: sequence %d names two messages, %s and %s", m.path, m.seq, describe(prev), describe(m))
			}
			continue
		}
		bySeq[k] = m
	}
	ids := map[string]string{}
	dups, retried := 0, 0
	canonical := map[string]bool{}
	for h := range ledger {
		canonical[h] = true
	}
	// Every activity delivered for a block that a reorg orphaned is
	// followed by its retraction, and each webhook's sequence has no gap
	// (docs/webhook-stream.md); retractions may still be in flight.
	eventually(t, 2*time.Minute, "a retraction of every delivered message of an orphaned block, and no sequence gap", func() bool {
		unretracted, gaps := streamProblems(recv.snapshot(), orphaned)
		return len(unretracted) == 0 && len(gaps) == 0
	})
	unretracted, gaps := streamProblems(recv.snapshot(), orphaned)
	for _, u := range unretracted {
		t.Errorf("delivered without its retraction: %s", u)
	}
	for path, g := range gaps {
		t.Errorf("%s: sequence gaps %v", path, g)
	}
	retractions := 0
	for _, m := range recv.snapshot() {
		if m.kind == "retraction" {
			if m.code < 300 {
				retractions++
			}
			continue // checked by streamProblems
		}
		hash, block, id := payloadTx(m.body)
		k := m.path + " " + hash
		if m.code >= 300 {
			retried++
			continue
		}
		if prev, ok := ids[k]; ok {
			dups++
			if prev != id {
				t.Errorf("%s delivered twice with different messageIds %s and %s", k, prev, id)
			}
		}
		ids[k] = id
		blockHash := payloadBlockHash(m.body)
		_, wasOrphaned := orphaned[blockHash]
		if block <= head && !want[k] && canonical[hash] {
			t.Errorf("unexpected message %s (block %d)", k, block)
		}
		if block <= head && !canonical[hash] && !wasOrphaned {
			t.Errorf("message %s for a transaction in block %s that is neither canonical nor orphaned by a reorg", k, blockHash)
		}
	}
	if len(want) < 50 || retried == 0 {
		t.Errorf("the run exercised too little: %d expected messages, %d failed first attempts", len(want), retried)
	}
	t.Logf("%d retractions delivered", retractions)

	report := summarize(t, windows, allProbes, seed, head, len(want), dups, retried, time.Since(started))
	t.Log("\n" + report)
	if p := os.Getenv("MORAINE_FAULT_REPORT"); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = f.WriteString(report + "\n")
			f.Close()
		}
	}
	for _, w := range windows {
		if w.f.kind == "ingest" && !w.takeoverOK {
			t.Errorf("the standby did not take the chain over within 60 s of killing %s", w.f.target)
		}
		if w.f.kind == "query" {
			for _, p := range allProbes {
				if !p.ok && !p.at.Before(w.from) && p.at.Before(w.to) {
					t.Errorf("an API request failed (status %d) at %s while %s was down: the surviving query instance must answer",
						p.status, p.at.Format(time.TimeOnly), w.f.target)
					break
				}
			}
		}
	}
}

// activeIngest is the ingest instance that writes the chain now.
func activeIngest(t *testing.T, cp *clusterPipeline) *instance {
	var active *instance
	deadline := time.Now().Add(60 * time.Second)
	for active == nil && time.Now().Before(deadline) {
		for _, n := range []string{"ingest-1", "ingest-2"} {
			if in := cp.get(n); in != nil && in.metric(t, "moraine_ingest_chain_writer", `{chain="43112"}`) == 1 {
				active = in
			}
		}
		if active == nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return active
}

func nodeHead(t *testing.T, rpcURL string) uint64 {
	t.Helper()
	raw, err := rpcCall(rpcURL, "eth_blockNumber")
	if err != nil {
		t.Fatal(err)
	}
	var h string
	_ = json.Unmarshal(raw, &h)
	return hexToBig(h).Uint64()
}

// prober asks the API (through nginx) for the newest block every 100 ms and
// compares it with the node's head.
type prober struct {
	mu     sync.Mutex
	probes []probe
	done   chan struct{}
}

func runProber(ctx context.Context, apiURL, rpcURL string) *prober {
	p := &prober{done: make(chan struct{})}
	client := &http.Client{Timeout: 5 * time.Second}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var nodeHead uint64
			if raw, err := rpcCall(rpcURL, "eth_blockNumber"); err == nil {
				var h string
				_ = json.Unmarshal(raw, &h)
				nodeHead = hexToBig(h).Uint64()
			}
			pr := probe{at: time.Now()}
			resp, err := client.Get(apiURL + "/v1/chains/43112/blocks?pageSize=1")
			if err != nil {
				pr.err = err.Error()
			}
			if err == nil {
				pr.status = resp.StatusCode
				var page struct {
					Blocks []struct {
						BlockNumber string `json:"blockNumber"`
					} `json:"blocks"`
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				// An answer is a success; an empty list (nothing indexed yet,
				// at the start) just has no head to compare.
				pr.ok = resp.StatusCode == http.StatusOK && json.Unmarshal(b, &page) == nil
				if pr.ok && len(page.Blocks) == 1 {
					pr.apiHead, _ = strconv.ParseUint(page.Blocks[0].BlockNumber, 10, 64)
					pr.lag = int64(nodeHead) - int64(pr.apiHead)
				}
			}
			p.mu.Lock()
			p.probes = append(p.probes, pr)
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *prober) stop() []probe {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]probe(nil), p.probes...)
}

// flakyReceiver records every request; on its flaky path it answers 503 to
// the first attempt of every message.
type flakyReceiver struct {
	srv   *httptest.Server
	flaky string
	mu    sync.Mutex
	seen  map[string]bool
	log   []received
}

func messageIDOf(m received) string {
	_, _, id := payloadTx(m.body)
	return id
}

type received struct {
	path string
	body []byte
	code int
	// kind, seq and replay are the stream headers (moraine-message-kind,
	// moraine-sequence, moraine-replay); at is when it arrived.
	kind, replay string
	seq          uint64
	at           time.Time
}

func newFlakyReceiver(t *testing.T, flaky string) *flakyReceiver {
	r := &flakyReceiver{flaky: flaky, seen: map[string]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		code := http.StatusOK
		r.mu.Lock()
		if req.URL.Path == r.flaky {
			_, _, id := payloadTx(body)
			if !r.seen[id] {
				r.seen[id] = true
				code = http.StatusServiceUnavailable
			}
		}
		seq, _ := strconv.ParseUint(req.Header.Get("moraine-sequence"), 10, 64)
		r.log = append(r.log, received{path: req.URL.Path, body: body, code: code, kind: req.Header.Get("moraine-message-kind"), seq: seq,
			replay: req.Header.Get("moraine-replay"), at: time.Now()})
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// undelivered describes expected messages that no 2xx answered (keys "path
// txHash"): each one's block and the attempts the receiver answered with an
// error, then what the delivery instances count of retries, drops and
// deactivations, so a failed run tells a lost message from a late one.
func undelivered(t *testing.T, keys []string, ledger map[string]*goldenTx, got []received, started time.Time, cp *clusterPipeline) string {
	failed := map[string][]time.Duration{}
	for _, m := range got {
		if m.code >= 300 {
			hash, _, _ := payloadTx(m.body)
			failed[m.path+" "+hash] = append(failed[m.path+" "+hash], m.at.Sub(started).Round(time.Millisecond))
		}
	}
	var b strings.Builder
	for i, k := range keys {
		if i == 20 {
			fmt.Fprintf(&b, "  ... and %d more\n", len(keys)-i)
			break
		}
		path, hash, _ := strings.Cut(k, " ")
		block := ""
		if g := ledger[hash]; g != nil {
			block = g.tx["BLOCKNUMBER"]
		}
		fmt.Fprintf(&b, "  %s tx %s (block %s): failed attempts at %v\n", path, hash, block, failed[k])
	}
	for _, n := range []string{"delivery-1", "delivery-2"} {
		in := cp.get(n)
		if in == nil {
			continue
		}
		for _, name := range []string{"moraine_delivery_retries_pending", "moraine_delivery_messages_dropped_total",
			"moraine_delivery_webhooks_deactivated_total", "moraine_delivery_attempts_total", "moraine_delivery_in_flight",
			"moraine_delivery_deferred_total", "moraine_delivery_retries_scheduled_total"} {
			fmt.Fprintf(&b, "  %s %s %v\n", n, name, scrape(t, in.metrics(), name))
		}
	}
	return b.String()
}

func (r *flakyReceiver) snapshot() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.log...)
}

// streamProblems lists the activity messages delivered (2xx) for an
// orphaned block that no retraction names, and each webhook's missing
// sequence numbers below its highest.
func streamProblems(got []received, orphaned map[string]uint64) (unretracted []string, gaps map[string][]uint64) {
	retracted := map[string]bool{} // path messageId blockHash
	seqs := map[string]map[uint64]bool{}
	for _, m := range got {
		if m.code >= 300 {
			continue
		}
		if seqs[m.path] == nil {
			seqs[m.path] = map[uint64]bool{}
		}
		seqs[m.path][m.seq] = true
		if m.kind == "retraction" {
			var r struct {
				Event struct {
					RetractedMessageID string `json:"retractedMessageId"`
					BlockHash          string `json:"blockHash"`
				} `json:"event"`
			}
			_ = json.Unmarshal(m.body, &r)
			retracted[m.path+" "+r.Event.RetractedMessageID+" "+lower(r.Event.BlockHash)] = true
		}
	}
	for _, m := range got {
		if m.code >= 300 || m.kind == "retraction" {
			continue
		}
		bh := payloadBlockHash(m.body)
		if _, ok := orphaned[bh]; !ok {
			continue
		}
		if _, _, id := payloadTx(m.body); !retracted[m.path+" "+id+" "+bh] {
			unretracted = append(unretracted, m.path+" "+id+" of block "+bh)
		}
	}
	gaps = map[string][]uint64{}
	for path, set := range seqs {
		var hi uint64
		for s := range set {
			hi = max(hi, s)
		}
		for s := uint64(1); s <= hi; s++ {
			if !set[s] {
				gaps[path] = append(gaps[path], s)
			}
		}
		if len(gaps[path]) == 0 {
			delete(gaps, path)
		}
	}
	return unretracted, gaps
}

func payloadBlockHash(body []byte) string {
	var p struct {
		Event struct {
			Transaction struct {
				BlockHash string `json:"blockHash"`
			} `json:"transaction"`
		} `json:"event"`
	}
	_ = json.Unmarshal(body, &p)
	return lower(p.Event.Transaction.BlockHash)
}

// checkBlocks compares ClickHouse (FINAL) with the node for blocks 0..head:
// each canonical block once, with the node's transaction, log and call-frame
// counts; every block orphaned by a reorg that was indexed is marked
// removed (block_hashes), and the API answers 404 for it.
func checkBlocks(t *testing.T, conn driver.Conn, rpcURL string, head uint64, orphaned map[string]uint64, apiURL string) {
	t.Helper()
	type counts struct{ txs, logs, frames int }
	nodeHash := map[uint64]string{}
	nodeCounts := map[uint64]counts{}
	for n := uint64(0); n <= head; n++ {
		num := fmt.Sprintf("0x%x", n)
		var block struct {
			Hash         string            `json:"hash"`
			Transactions []json.RawMessage `json:"transactions"`
		}
		var receipts []struct {
			Logs []json.RawMessage `json:"logs"`
		}
		var traces []struct {
			Result json.RawMessage `json:"result"`
		}
		for _, c := range []struct {
			method string
			params []any
			into   any
		}{
			{"eth_getBlockByNumber", []any{num, false}, &block},
			{"eth_getBlockReceipts", []any{num}, &receipts},
			{"debug_traceBlockByNumber", []any{num, map[string]string{"tracer": "callTracer"}}, &traces},
		} {
			if n == 0 && c.method == "debug_traceBlockByNumber" {
				continue // genesis has no transactions, and is not traceable
			}
			raw, err := rpcCall(rpcURL, c.method, c.params...)
			if err != nil || json.Unmarshal(raw, c.into) != nil {
				t.Fatalf("%s %d: %v", c.method, n, err)
			}
		}
		c := counts{txs: len(block.Transactions)}
		for _, r := range receipts {
			c.logs += len(r.Logs)
		}
		for _, tr := range traces {
			var v any
			_ = json.Unmarshal(tr.Result, &v)
			c.frames += countFrames(v)
		}
		nodeHash[n], nodeCounts[n] = lower(block.Hash), c
	}

	stored := map[uint64]string{}
	for _, r := range query(t, conn, "SELECT toString(number) AS n, lower(hex(hash)) AS h FROM blocks FINAL WHERE chain_id = 43112 AND removed = 0 AND number <= ?", head) {
		n, _ := strconv.ParseUint(r["n"], 10, 64)
		if prev, ok := stored[n]; ok {
			t.Errorf("block %d stored twice as canonical: %s and %s", n, prev, r["h"])
		}
		stored[n] = "0x" + r["h"]
	}
	got := map[string]counts{}
	for _, q := range []struct {
		sql string
		set func(*counts, int)
	}{
		{"SELECT toString(block_number) AS n, lower(hex(block_hash)) AS h, toString(count()) AS rows, toString(uniqExact(hash)) AS keys FROM transactions_by_block FINAL WHERE chain_id = 43112 AND block_number <= ? GROUP BY block_number, block_hash",
			func(c *counts, v int) { c.txs = v }},
		{"SELECT toString(block_number) AS n, lower(hex(block_hash)) AS h, toString(count()) AS rows, toString(uniqExact(log_index)) AS keys FROM logs FINAL WHERE chain_id = 43112 AND block_number <= ? GROUP BY block_number, block_hash",
			func(c *counts, v int) { c.logs = v }},
		{"SELECT toString(block_number) AS n, lower(hex(block_hash)) AS h, toString(count()) AS rows, toString(uniqExact(tx_index, trace_position)) AS keys FROM internal_transactions FINAL WHERE chain_id = 43112 AND block_number <= ? GROUP BY block_number, block_hash",
			func(c *counts, v int) { c.frames = v }},
	} {
		for _, r := range query(t, conn, q.sql, head) {
			if r["rows"] != r["keys"] {
				t.Errorf("block %s (%s): %s rows, %s distinct keys: a row stored twice", r["n"], r["h"], r["rows"], r["keys"])
			}
			v, _ := strconv.Atoi(r["rows"])
			k := r["n"] + " 0x" + r["h"]
			c := got[k]
			q.set(&c, v)
			got[k] = c
		}
	}
	missing, wrong := 0, 0
	for n := uint64(0); n <= head; n++ {
		if stored[n] != nodeHash[n] {
			missing++
			if missing <= 5 {
				t.Errorf("block %d: ClickHouse has %q as canonical, the node %s", n, stored[n], nodeHash[n])
			}
			continue
		}
		if c := got[fmt.Sprintf("%d %s", n, nodeHash[n])]; c != nodeCounts[n] {
			wrong++
			if wrong <= 5 {
				t.Errorf("block %d: ClickHouse holds %+v rows, the node %+v", n, c, nodeCounts[n])
			}
		}
	}
	if missing+wrong > 0 {
		t.Errorf("%d of %d blocks missing or not canonical, %d with wrong row counts", missing, head+1, wrong)
	}

	removed := 0
	for h, n := range orphaned {
		if n > head {
			continue
		}
		// blocks is keyed by number, where the replacing block's row
		// supersedes the orphan's; block_hashes keeps every hash with its
		// removed flag (what GET /blocks/{hash} reads).
		rows := query(t, conn, "SELECT toString(removed) AS removed FROM block_hashes FINAL WHERE chain_id = 43112 AND hash = unhex(?) AND number = ?", strings.TrimPrefix(h, "0x"), n)
		if len(rows) == 0 {
			continue // orphaned before ingest read it
		}
		if rows[0]["removed"] != "1" {
			t.Errorf("orphaned block %d %s is not marked removed", n, h)
			continue
		}
		removed++
		if code := getJSON(t, apiURL+"/v1/chains/43112/blocks/"+h, nil); code != http.StatusNotFound {
			t.Errorf("the API answers %d for orphaned block %s", code, h)
		}
	}
	if len(orphaned) > 0 && removed == 0 {
		t.Errorf("%d blocks were orphaned by reorgs and none was found marked removed", len(orphaned))
	}
	t.Logf("ledger: blocks 0..%d canonical with the node's rows; %d orphaned blocks, %d of them indexed and marked removed", head, len(orphaned), removed)
}

// checkChainLog checks the blocks topic as consumers read it: the chain's
// events form one valid log (no block produced twice or out of order, which
// a second writer would leave, counts that add up, reorgs that orphan what
// was produced), and its blocks 0..head are the node's canonical ones.
func checkChainLog(t *testing.T, kcfg kafkautil.Config, rpcURL string, head uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	events, err := chainlog.Read(ctx, kcfg, kcfg.Topic(topics.Blocks), "43112")
	if err != nil {
		t.Fatal(err)
	}
	chain, reorgs, err := chainlog.Check(events, 0, true)
	if err != nil {
		t.Fatalf("the blocks topic breaks the log's rules: %v", err)
	}
	if len(chain) == 0 || chain[0].Number != 0 || chain[len(chain)-1].Number < head {
		t.Fatalf("the blocks topic holds blocks %d..%d, want 0..%d", chain[0].Number, chain[len(chain)-1].Number, head)
	}
	for _, b := range chain {
		if b.Number > head {
			break
		}
		raw, err := rpcCall(rpcURL, "eth_getBlockByNumber", fmt.Sprintf("0x%x", b.Number), false)
		if err != nil {
			t.Fatal(err)
		}
		var nb struct {
			Hash string `json:"hash"`
		}
		_ = json.Unmarshal(raw, &nb)
		if got := fmt.Sprintf("0x%x", b.Hash); got != lower(nb.Hash) {
			t.Fatalf("the blocks topic's block %d is %s, the node's %s", b.Number, got, nb.Hash)
		}
	}
	t.Logf("blocks topic: %d events, one valid log of blocks 0..%d with %d reorgs", len(events), chain[len(chain)-1].Number, len(reorgs))
}

// summarize renders the figures of the run.
func summarize(t *testing.T, windows []*window, probes []probe, seed, head uint64, expected, dups, retried int, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster fault suite: seed %d, %s, %d faults, blocks 0..%d, %d expected webhook messages, %d duplicates delivered, %d first attempts failed and retried\n",
		seed, took.Round(time.Second), len(windows), head, expected, dups, retried)
	fmt.Fprintf(&b, "%-11s %-13s %6s %10s %13s %12s %10s\n", "fault", "target", "down", "takeover", "API requests", "API errors", "max lag")
	for _, w := range windows {
		n, errs, lag := 0, 0, int64(0)
		for _, p := range probes {
			if p.at.Before(w.from) || !p.at.Before(w.to) {
				continue
			}
			n++
			if !p.ok {
				errs++
			} else if p.lag > lag {
				lag = p.lag
			}
		}
		take := "-"
		kind := w.f.kind
		if w.f.pause {
			kind = "ingest-stop"
		}
		if w.f.kind == "ingest" {
			take = "none"
			if w.takeoverOK {
				take = w.takeover.Round(10 * time.Millisecond).String()
			}
		}
		fmt.Fprintf(&b, "%-11s %-13s %6s %10s %13d %12d %10d\n", kind, w.f.target, w.f.down, take, n, errs, lag)
	}
	total, errs := len(probes), 0
	var lags []int64
	for _, p := range probes {
		if !p.ok {
			errs++
		} else {
			lags = append(lags, p.lag)
		}
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	p99 := int64(0)
	if len(lags) > 0 {
		p99 = lags[len(lags)*99/100]
	}
	fmt.Fprintf(&b, "whole run: %d API requests through nginx, %d failed (%.2f%%), head lag p99 %d blocks\n",
		total, errs, 100*float64(errs)/float64(max(total, 1)), p99)
	shown := 0
	for _, p := range probes {
		if !p.ok && shown < 5 {
			shown++
			fmt.Fprintf(&b, "  failed request at %s: status %d %s\n", p.at.Format("15:04:05.000"), p.status, p.err)
		}
	}
	return b.String()
}

// openCluster opens the suite's database on the cluster's replicas, in
// order, as the services do.
func openCluster(t *testing.T, env clusterEnv, db string) driver.Conn {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: strings.Split(env.chAddr, ","),
		ConnOpenStrategy: clickhouse.ConnOpenInOrder, Auth: clickhouse.Auth{Database: db}, ReadTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
