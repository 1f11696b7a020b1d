package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// BenchmarkNodeScaling measures a backfill bound by its nodes, as
// production backfills are: each node is a replay source of the Gunzilla
// recording whose tracer serves MORAINE_BENCH_TRACED_BPS blocks per second
// (default 40, a real node's order of magnitude), and ingest backfills the
// 1,001 blocks into Kafka from 1, 2 and 4 such nodes in turn (fresh topics
// each run), timed from ingest's start to the last block acknowledged.
// The goal is 3.5x from 1 to 4 nodes. It also reports verification's cost
// per block beside conversion's, from ingest's stage histograms.
func BenchmarkNodeScaling(b *testing.B) {
	d := gunzilla
	first, last := uint64(14000000), uint64(14100000)
	blocks, _, _ := recordingCounts(b, d)
	tracedBPS := envFloat(b, "MORAINE_BENCH_TRACED_BPS", 40)
	var addrs []string
	for range 4 {
		addr := freeAddr(b)
		start(b, "replay", "--replay.file", testenv.SharedData(b, d.recording), "--chain.id", strconv.FormatUint(d.chainID, 10),
			"--replay.mode", "backfill", "--rpc.listen-address", addr,
			"--replay.traced-blocks-per-second", strconv.FormatFloat(tracedBPS, 'f', -1, 64))
		eventually(b, time.Minute, "replay node", func() bool {
			_, err := rpcCall("http://"+addr, "eth_blockNumber")
			return err == nil
		})
		addrs = append(addrs, addr)
	}
	rates := map[int][]float64{}
	var verifySum, verifyCount, convertSum, convertCount float64
	for round := 0; b.Loop(); round++ {
		for _, n := range []int{1, 2, 4} {
			var nodes []string
			for i, a := range addrs[:n] {
				nodes = append(nodes, fmt.Sprintf(`{"url":"http://%s","name":"n%d"}`, a, i))
			}
			chainsFile := filepath.Join(b.TempDir(), fmt.Sprintf("chains-%d-%d.json", round, n))
			chain := fmt.Sprintf(`{"chains":[{"evmChainId":"%d","name":"Gunzilla","network":"mainnet","rpcUrls":[%s],
				"networkToken":{"name":"Gun","symbol":"GUN","decimals":18},"traces":true,"replay":true,"startBlock":%d}]}`,
				d.chainID, strings.Join(nodes, ","), first)
			if err := os.WriteFile(chainsFile, []byte(chain), 0o644); err != nil {
				b.Fatal(err)
			}
			kcfg := testenv.Kafka(b)
			admin := freeAddr(b)
			t0 := time.Now()
			p := start(b, "ingest", "--kafka.brokers", kcfg.Brokers, "--kafka.topic-prefix", kcfg.TopicPrefix,
				"--chains.file", chainsFile, "--ops.listen-address", admin)
			metrics := "http://" + admin + "/metrics"
			key := fmt.Sprintf(`{chain="%d"}`, d.chainID)
			eventually(b, 10*time.Minute, "last block produced", func() bool {
				return uint64(scrape(b, metrics, "moraine_ingest_last_produced_block")[key]) == last
			})
			took := time.Since(t0)
			rate := float64(blocks) / took.Seconds()
			rates[n] = append(rates[n], rate)
			fmt.Printf("nodes round %d: %d node(s) at %.0f traced blocks/s each: %d blocks in %.2fs = %.1f blocks/s\n",
				round+1, n, tracedBPS, blocks, took.Seconds(), rate)
			stage := func(suffix, s string) float64 {
				return scrape(b, metrics, "moraine_ingest_stage_duration_seconds"+suffix)[fmt.Sprintf(`{chain="%d",stage="%s"}`, d.chainID, s)]
			}
			verifySum += stage("_sum", "verify")
			verifyCount += stage("_count", "verify")
			convertSum += stage("_sum", "convert")
			convertCount += stage("_count", "convert")
			p.stop(15 * time.Second)
		}
	}
	med := func(v []float64) float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		return s[len(s)/2]
	}
	one, two, four := med(rates[1]), med(rates[2]), med(rates[4])
	fmt.Printf("nodes result: median blocks/s with 1, 2, 4 nodes: %.1f, %.1f, %.1f; 4 nodes / 1 node = %.2fx (goal 3.5x)\n",
		one, two, four, four/one)
	if verifyCount > 0 && convertCount > 0 {
		fmt.Printf("nodes verify: %.0f µs per block (receipts root, logs bloom, transactions root), conversion %.0f µs per block, over %.0f blocks\n",
			1e6*verifySum/verifyCount, 1e6*convertSum/convertCount, verifyCount)
	}
	b.ReportMetric(four/one, "x-4-nodes")
}

// BenchmarkNodeFailover measures how long a chain's head stalls when one of
// its two nodes dies (kill -9) or freezes (SIGSTOP: it accepts connections
// and never answers): a 3,000-block corpus served by two replay nodes
// releasing 10 blocks a second, ingest following the head with
// --ingest.poll-interval 500ms; for each fault, the time from the fault to
// the first block released after it being produced (against the same
// measure without a fault).
func BenchmarkNodeFailover(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "corpus")
	runTool(b, "corpus", "--out", dir, "--blocks", "3000", "--transactions", "1",
		"--shared-data", testenv.SharedData(b, "."), "--chain.id", "99914")
	type node struct {
		addr string
		args []string
		p    *proc
	}
	var nodes []*node
	var urls []string
	for i := range 2 {
		n := &node{addr: freeAddr(b)}
		n.args = []string{"--replay.file", dir, "--replay.mode", "live", "--replay.preload", "50", "--replay.rate", "10",
			"--chain.id", "99914", "--rpc.listen-address", n.addr}
		n.p = start(b, "replay", n.args...)
		nodes = append(nodes, n)
		urls = append(urls, fmt.Sprintf(`{"url":"http://%s","name":"n%d"}`, n.addr, i))
	}
	head := func() uint64 {
		var best uint64
		for _, n := range nodes {
			raw, err := rpcCall("http://"+n.addr, "eth_blockNumber")
			var h string
			if err == nil && json.Unmarshal(raw, &h) == nil {
				v, _ := strconv.ParseUint(strings.TrimPrefix(h, "0x"), 16, 64)
				best = max(best, v)
			}
		}
		return best
	}
	eventually(b, time.Minute, "replay nodes", func() bool { return head() > 0 })
	chainsFile := filepath.Join(b.TempDir(), "chains.json")
	chain := fmt.Sprintf(`{"chains":[{"evmChainId":"99914","name":"Failover","network":"mainnet","rpcUrls":[%s],
		"networkToken":{"name":"F","symbol":"F","decimals":18},"traces":true,"startBlock":1}]}`, strings.Join(urls, ","))
	if err := os.WriteFile(chainsFile, []byte(chain), 0o644); err != nil {
		b.Fatal(err)
	}
	kcfg := testenv.Kafka(b)
	admin := freeAddr(b)
	start(b, "ingest", "--kafka.brokers", kcfg.Brokers, "--kafka.topic-prefix", kcfg.TopicPrefix,
		"--chains.file", chainsFile, "--ops.listen-address", admin, "--ingest.poll-interval", "500ms")
	metrics := "http://" + admin + "/metrics"
	produced := func() uint64 {
		return uint64(scrape(b, metrics, "moraine_ingest_last_produced_block")[`{chain="99914"}`])
	}
	eventually(b, time.Minute, "at the head", func() bool { return produced()+2 >= head() })
	measure := func(what string, act func()) time.Duration {
		time.Sleep(3 * time.Second)
		h := head()
		t0 := time.Now()
		act()
		for produced() <= h {
			if time.Since(t0) > time.Minute {
				b.Fatalf("%s: no block produced for a minute", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
		d := time.Since(t0)
		fmt.Printf("failover %s: first block released after it produced %v later\n", what, d.Round(time.Millisecond))
		return d
	}
	var base, kill, freeze []float64
	for round := 0; b.Loop(); round++ {
		base = append(base, measure("none (baseline)", func() {}).Seconds())
		victim := nodes[round%2]
		kill = append(kill, measure(fmt.Sprintf("kill -9 of node n%d", round%2), func() { victim.p.kill() }).Seconds())
		// Back with the blocks the other node has, as a node restarts with
		// its database.
		resync := func(n *node) {
			n.p = start(b, "replay", append(n.args[:len(n.args):len(n.args)], "--replay.preload", strconv.FormatUint(head(), 10))...)
			eventually(b, time.Minute, "node back", func() bool {
				_, err := rpcCall("http://"+n.addr, "eth_blockNumber")
				return err == nil
			})
		}
		resync(victim)
		other := nodes[(round+1)%2]
		freeze = append(freeze, measure(fmt.Sprintf("SIGSTOP of node n%d", (round+1)%2), func() { _ = other.p.cmd.Process.Signal(syscall.SIGSTOP) }).Seconds())
		// Thawed, its release clock is behind: restart it in step.
		_ = other.p.cmd.Process.Signal(syscall.SIGCONT)
		other.p.kill()
		resync(other)
	}
	med := func(v []float64) time.Duration {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		return time.Duration(s[len(s)/2] * float64(time.Second)).Round(time.Millisecond)
	}
	fmt.Printf("failover result: medians over %d rounds: no fault %v, node killed %v, node frozen %v (until the first block released after the fault is produced)\n",
		len(base), med(base), med(kill), med(freeze))
}
