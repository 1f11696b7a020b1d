//go:build nodes

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moraine-data/moraine/pkg/chainlog"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/rpc"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// The node fault suite (make test-nodes): one chain served by three replay
// nodes of the same corpus (a contiguous chain built from the real
// recordings, so every block verifies and parents link), ingested by the
// real binaries onto the real stack while the nodes misbehave, first during
// the backfill, then at the head:
//
//   - backfill: node b drops logs and receipts from its receipts answers
//     and truncates trace lists; node c answers 429 to half its requests;
//     node a is killed (-9) and restarted; node c is frozen (SIGSTOP);
//   - head: node a answers blocks of another fork; node c falls 100 blocks
//     (more) behind; node b is killed and node a frozen, and the time until
//     the next block is produced from another node is measured.
//
// Then every block of the corpus must be in ClickHouse exactly once with all
// its transactions, logs and internal transactions; every block record
// ingest produced to Kafka must be complete (no corrupt block produced,
// orphaned fork blocks included); the corrupt answers the nodes gave must
// have been counted by ingest against the node that gave them.
//
// MORAINE_NODE_FAULT_SEED replays a run's schedule and draws;
// MORAINE_NODES_SKIP_CHECKS (a skipChecks list, e.g.
// receiptsRoot,logsBloom,transactionsRoot,traces) turns verification off,
// to show the suite failing.
const (
	nodeCorpusBlocks = 1500
	nodePreload      = 900 // blocks the nodes hold from the start: the backfill
	nodeRate         = 8   // blocks per second after it: the head
	nodeChainID      = 99913
)

type corpusBlock struct {
	hash                string
	txs, logs, internal int
}

func TestNodeFaults(t *testing.T) {
	seed := uint64(time.Now().UnixNano() % 1_000_000)
	if s := os.Getenv("MORAINE_NODE_FAULT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("MORAINE_NODE_FAULT_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("node fault suite: seed %d (MORAINE_NODE_FAULT_SEED=%d replays it)", seed, seed)
	rnd := rand.New(rand.NewPCG(seed, 24))
	started := time.Now()

	dir := filepath.Join(t.TempDir(), "corpus")
	runTool(t, "corpus", "--out", dir, "--blocks", strconv.Itoa(nodeCorpusBlocks), "--transactions", "1",
		"--shared-data", testenv.SharedData(t, "."), "--chain.id", strconv.Itoa(nodeChainID))

	type node struct {
		name, addr string
		args       []string
		p          *proc
	}
	var nodes []*node
	var rpcURLs []string
	for i, name := range []string{"a", "b", "c"} {
		n := &node{name: name, addr: freeAddr(t)}
		n.args = []string{"--replay.file", dir, "--replay.mode", "live", "--replay.preload", strconv.Itoa(nodePreload),
			"--replay.rate", strconv.Itoa(nodeRate), "--replay.fault-control", "--replay.fault-seed", strconv.FormatUint(seed+uint64(i), 10),
			"--chain.id", strconv.Itoa(nodeChainID), "--rpc.listen-address", n.addr}
		n.p = start(t, "replay", n.args...)
		nodes = append(nodes, n)
		rpcURLs = append(rpcURLs, fmt.Sprintf(`{"url":"http://%s","name":"%s"}`, n.addr, name))
	}
	for _, n := range nodes {
		eventually(t, 30*time.Second, "replay node "+n.name, func() bool {
			_, err := rpcCall("http://"+n.addr, "eth_blockNumber")
			return err == nil
		})
	}
	setFaults := func(n *node, f map[string]any) {
		t.Helper()
		f["seed"] = seed + uint64(rnd.IntN(1000))
		if _, err := rpcCall("http://"+n.addr, "moraine_setFaults", f); err != nil {
			t.Fatalf("node %s: set faults %v: %v", n.name, f, err)
		}
		t.Logf("%5.1fs node %s: faults %v", time.Since(started).Seconds(), n.name, f)
	}
	// released is the newest block the nodes serve.
	released := func() uint64 {
		var best uint64
		for _, n := range nodes {
			raw, err := rpcCall("http://"+n.addr, "eth_blockNumber")
			var h string
			if err == nil && json.Unmarshal(raw, &h) == nil {
				if v, err := strconv.ParseUint(strings.TrimPrefix(h, "0x"), 16, 64); err == nil {
					best = max(best, v)
				}
			}
		}
		return best
	}
	// restart starts a killed node again with the blocks the others have,
	// as a node restarts with its database.
	restart := func(n *node) {
		args := append([]string(nil), n.args...)
		for i := range args {
			if args[i] == "--replay.preload" {
				args[i+1] = strconv.FormatUint(released(), 10)
			}
		}
		n.p = start(t, "replay", args...)
		eventually(t, 30*time.Second, "replay node "+n.name+" back", func() bool {
			_, err := rpcCall("http://"+n.addr, "eth_blockNumber")
			return err == nil
		})
	}

	skip := ""
	if s := os.Getenv("MORAINE_NODES_SKIP_CHECKS"); s != "" {
		quoted := []string{}
		for _, c := range strings.Split(s, ",") {
			quoted = append(quoted, strconv.Quote(strings.TrimSpace(c)))
		}
		skip = `,"skipChecks":[` + strings.Join(quoted, ",") + `]`
		t.Logf("verification relaxed: skipChecks %s (the suite should fail)", s)
	}
	chainJSON := fmt.Sprintf(`{"evmChainId":"%d","name":"Node faults","network":"mainnet","rpcUrls":[%s],
		"networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},"traces":true,"startBlock":1%s}`,
		nodeChainID, strings.Join(rpcURLs, ","), skip)
	s := startServices(t, chainJSON, pipelineOpts{noWaitIngest: true,
		// Short request timeouts and a fast poll, as an operator who wants
		// failover within seconds sets them.
		ingestArgs: []string{"--rpc.timeout", "5s", "--ingest.poll-interval", "500ms"}})
	chain := strconv.Itoa(nodeChainID)
	eventually(t, time.Minute, "ingest metrics", func() bool {
		_, err := http.Get(s.metrics["ingest"])
		return err == nil
	})
	produced := func() uint64 {
		return uint64(scrape(t, s.metrics["ingest"], "moraine_ingest_last_produced_block")[`{chain="`+chain+`"}`])
	}
	waitProduced := func(n uint64, timeout time.Duration) {
		t.Helper()
		eventually(t, timeout, fmt.Sprintf("block %d produced", n), func() bool { return produced() >= n })
	}
	a, b, c := nodes[0], nodes[1], nodes[2]

	// Backfill.
	setFaults(b, map[string]any{"dropLog": 0.3, "dropReceipt": 0.1, "truncateTraces": 0.2})
	setFaults(c, map[string]any{"rateLimit": 0.5})
	waitProduced(uint64(100+rnd.IntN(100)), 2*time.Minute)
	t.Logf("%5.1fs node a: kill -9 (backfill, block %d)", time.Since(started).Seconds(), produced())
	a.p.kill()
	time.Sleep(time.Duration(3+rnd.IntN(4)) * time.Second)
	restart(a)
	t.Logf("%5.1fs node a: restarted", time.Since(started).Seconds())
	t.Logf("%5.1fs node c: frozen (SIGSTOP, backfill, block %d)", time.Since(started).Seconds(), produced())
	_ = c.p.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(time.Duration(4+rnd.IntN(4)) * time.Second)
	_ = c.p.cmd.Process.Signal(syscall.SIGCONT)
	t.Logf("%5.1fs node c: thawed (block %d)", time.Since(started).Seconds(), produced())
	waitProduced(nodePreload, 3*time.Minute)
	backfillDone := time.Since(started)
	t.Logf("%5.1fs backfill of %d blocks done; at the head", backfillDone.Seconds(), nodePreload)

	// Head.
	// Node a (restarted with the others' blocks) is at the head: it answers
	// from another fork; node c (behind since its freeze) falls 100 more.
	setFaults(a, map[string]any{"fork": 0.3})
	setFaults(c, map[string]any{"lagBlocks": 100})
	time.Sleep(time.Duration(10+rnd.IntN(5)) * time.Second)
	setFaults(a, map[string]any{})
	setFaults(c, map[string]any{})
	// Failover at the head: the time from a node's death (or freeze) to the
	// next block produced.
	failover := func(what string, act func()) time.Duration {
		next := released() + 1
		t0 := time.Now()
		act()
		waitProduced(next, time.Minute)
		d := time.Since(t0)
		t.Logf("%5.1fs %s at the head: block %d produced %v later", time.Since(started).Seconds(), what, next, d.Round(time.Millisecond))
		return d
	}
	killTime := failover("node b killed (-9)", func() { b.p.kill() })
	time.Sleep(3 * time.Second)
	restart(b)
	freezeTime := failover("node a frozen (SIGSTOP)", func() { _ = a.p.cmd.Process.Signal(syscall.SIGSTOP) })
	time.Sleep(time.Duration(3+rnd.IntN(3)) * time.Second)
	_ = a.p.cmd.Process.Signal(syscall.SIGCONT)
	time.Sleep(5 * time.Second)
	for _, n := range nodes {
		setFaults(n, map[string]any{})
	}
	waitProduced(nodeCorpusBlocks, 4*time.Minute)
	eventually(t, 2*time.Minute, "processor wrote the last block", func() bool {
		return queryUint(t, s.conn, "SELECT count() FROM blocks FINAL WHERE chain_id = ? AND number = ? AND removed = 0", nodeChainID, nodeCorpusBlocks) == 1
	})
	t.Logf("%5.1fs every block produced and written", time.Since(started).Seconds())

	// What the corpus holds, read back from a node that has released it
	// all (a node frozen a while is behind), with its faults off.
	var full *node
	eventually(t, 2*time.Minute, "a node serving the whole corpus", func() bool {
		for _, n := range nodes {
			if raw, err := rpcCall("http://"+n.addr, "eth_blockNumber"); err == nil && string(raw) == strconv.Quote(rpc.Quantity(nodeCorpusBlocks)) {
				full = n
				return true
			}
		}
		return false
	})
	want := readCorpus(t, "http://"+full.addr)

	// Kafka: every block record complete, orphaned fork blocks included.
	events, err := chainlog.Read(t.Context(), s.kafka, s.kafka.Topic(topics.Blocks), chain)
	if err != nil {
		t.Fatal(err)
	}
	var producedBlocks, reorgs, orphaned, corrupt int
	for _, ev := range events {
		switch e := ev.Event.(type) {
		case *record.ChainEvent_Reorg:
			reorgs++
			orphaned += len(e.Reorg.Orphaned)
		case *record.ChainEvent_Block:
			producedBlocks++
			blk := e.Block
			w := want[blk.Number]
			txs, logs, internal := countRecord(blk)
			if txs != w.txs || logs != w.logs || internal != w.internal {
				corrupt++
				if corrupt <= 10 {
					t.Errorf("corrupt block produced: %d (0x%x): %d txs, %d logs, %d internal; the corpus has %d, %d, %d",
						blk.Number, blk.Hash, txs, logs, internal, w.txs, w.logs, w.internal)
				}
			}
		}
	}
	if _, _, err := chainlog.Check(events, 0, true); err != nil {
		t.Errorf("the blocks topic is not a valid chain log: %v", err)
	}
	t.Logf("Kafka: %d block records (%d blocks), %d reorg events orphaning %d fork blocks, %d corrupt", producedBlocks, nodeCorpusBlocks, reorgs, orphaned, corrupt)

	// ClickHouse: every block once, with all its rows.
	type counts struct {
		hash                string
		txs, logs, internal int
	}
	got := map[uint64]*counts{}
	for _, r := range query(t, s.conn, `SELECT toString(number) AS n, lower(hex(hash)) AS h FROM blocks FINAL WHERE chain_id = ? AND removed = 0`, nodeChainID) {
		n, _ := strconv.ParseUint(r["n"], 10, 64)
		got[n] = &counts{hash: "0x" + r["h"]}
	}
	for _, tbl := range []string{"transactions_by_block", "logs", "internal_transactions"} {
		for _, r := range query(t, s.conn, `SELECT toString(block_number) AS n, lower(hex(block_hash)) AS h, toString(count()) AS c
			FROM `+tbl+` FINAL WHERE chain_id = ? GROUP BY block_number, block_hash`, nodeChainID) {
			n, _ := strconv.ParseUint(r["n"], 10, 64)
			g := got[n]
			if g == nil || g.hash != "0x"+r["h"] {
				continue // rows of an orphaned fork block: not served
			}
			v, _ := strconv.Atoi(r["c"])
			switch tbl {
			case "transactions_by_block":
				g.txs = v
			case "logs":
				g.logs = v
			default:
				g.internal = v
			}
		}
	}
	bad := 0
	for n := uint64(1); n <= nodeCorpusBlocks; n++ {
		w, g := want[n], got[n]
		if g == nil || g.hash != w.hash || g.txs != w.txs || g.logs != w.logs || g.internal != w.internal {
			bad++
			if bad <= 10 {
				t.Errorf("ClickHouse block %d: %+v, the corpus has %+v", n, g, w)
			}
		}
	}
	if len(got) != nodeCorpusBlocks {
		t.Errorf("ClickHouse has %d canonical blocks, the corpus %d", len(got), nodeCorpusBlocks)
	}
	t.Logf("ClickHouse: %d blocks checked against the corpus, %d differ", nodeCorpusBlocks, bad)

	// The corrupt answers were counted against the node that gave them.
	failures := scrape(t, s.metrics["ingest"], "moraine_ingest_verification_failures_total")
	perNode := map[string]float64{}
	for labels, v := range failures {
		for _, n := range nodes {
			if strings.Contains(labels, `node="`+n.name+`"`) {
				perNode[n.name] += v
			}
		}
	}
	var given []string
	for _, n := range nodes {
		raw, err := rpcCall("http://"+n.addr, "moraine_faultCounts")
		if err == nil {
			given = append(given, fmt.Sprintf("%s %s", n.name, raw))
		}
	}
	t.Logf("faults the nodes gave: %s", strings.Join(given, "; "))
	t.Logf("verification failures counted per node: %v", perNode)
	if skip == "" && perNode["b"] == 0 {
		t.Error("node b's incomplete answers were not counted")
	}
	limited := 0.0
	for labels, v := range scrape(t, s.metrics["ingest"], "moraine_rpc_requests_total") {
		if strings.Contains(labels, `node="c"`) && strings.Contains(labels, `result="rate_limited"`) {
			limited += v
		}
	}
	if limited == 0 {
		t.Error("node c's 429s were not counted")
	}
	t.Logf("node c's 429s counted: %.0f; failover at the head: kill %v, freeze %v; backfill %v; suite %v",
		limited, killTime.Round(time.Millisecond), freezeTime.Round(time.Millisecond), backfillDone.Round(time.Second),
		time.Since(started).Round(time.Second))
}

// readCorpus reads every block's hash and row counts from a node.
func readCorpus(t *testing.T, url string) map[uint64]corpusBlock {
	t.Helper()
	pool, err := rpc.NewPool(rpc.PoolConfig{Chain: strconv.Itoa(nodeChainID), Nodes: []chains.Node{{URL: url}}, Timeout: 30 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out := make(map[uint64]corpusBlock, nodeCorpusBlocks)
	for lo := uint64(1); lo <= nodeCorpusBlocks; lo += 50 {
		var reqs []*rpc.Request
		hi := min(lo+50, nodeCorpusBlocks+1)
		for n := lo; n < hi; n++ {
			q := rpc.Quantity(n)
			reqs = append(reqs, &rpc.Request{Method: "eth_getBlockByNumber", Params: []any{q, false}},
				&rpc.Request{Method: "eth_getBlockReceipts", Params: []any{q}},
				&rpc.Request{Method: "debug_traceBlockByNumber", Params: []any{q, map[string]string{"tracer": "callTracer"}}})
		}
		if err := pool.Batch(ctx, reqs); err != nil {
			t.Fatal(err)
		}
		for i, n := 0, lo; n < hi; i, n = i+3, n+1 {
			for _, r := range reqs[i : i+3] {
				if r.Err != nil {
					t.Fatalf("block %d %s: %v", n, r.Method, r.Err)
				}
			}
			var blk struct {
				Hash         string
				Transactions []json.RawMessage
			}
			var receipts []struct{ Logs []json.RawMessage }
			var traces []struct{ Result *frame }
			if json.Unmarshal(reqs[i].Result, &blk) != nil || json.Unmarshal(reqs[i+1].Result, &receipts) != nil ||
				json.Unmarshal(reqs[i+2].Result, &traces) != nil {
				t.Fatalf("block %d: undecodable answers", n)
			}
			cb := corpusBlock{hash: blk.Hash, txs: len(blk.Transactions)}
			for _, r := range receipts {
				cb.logs += len(r.Logs)
			}
			for _, tr := range traces {
				cb.internal += tr.Result.count()
			}
			out[n] = cb
		}
	}
	return out
}

// frame is a callTracer frame, for counting.
type frame struct{ Calls []*frame }

func (f *frame) count() int {
	if f == nil {
		return 0
	}
	n := 1
	for _, c := range f.Calls {
		n += c.count()
	}
	return n
}

func countRecord(b *record.Block) (txs, logs, internal int) {
	for _, tx := range b.Transactions {
		txs++
		logs += len(tx.Logs)
		internal += len(tx.InternalTransactions)
	}
	return
}
