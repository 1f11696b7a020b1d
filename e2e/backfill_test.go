package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/moraine-data/moraine/pkg/kafkautil"
)

// corpusMeta is the part of a corpus's corpus.json the benchmark reads
// (deploy/replay.CorpusMeta).
type corpusMeta struct {
	ChainID      uint64 `json:"chainId"`
	First        uint64 `json:"first"`
	Last         uint64 `json:"last"`
	Blocks       uint64 `json:"blocks"`
	Transactions uint64 `json:"transactions"`
	Logs         uint64 `json:"logs"`
	CallFrames   uint64 `json:"callFrames"`
}

// envDuration reads a duration from the environment, or def.
func envDuration(tb testing.TB, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		tb.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

func envFloat(tb testing.TB, name string, def float64) float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		tb.Fatalf("%s=%q: %v", name, v, err)
	}
	return f
}

// BenchmarkBackfillCorpus backfills a corpus (make corpus) end to end:
// replay source serving it from disk -> ingest -> Kafka -> processor (sink
// and matcher) -> ClickHouse, with the query service answering reads while
// it writes. make bench-backfill runs it once (-benchtime 1x) with
// MORAINE_BENCH_CORPUS naming the corpus directory.
//
// Every MORAINE_BENCH_REPORT (10 s) it prints a "backfill" line: blocks,
// transactions and call frames indexed and their rates over the interval and
// since the start, the CPU microseconds per transaction written in the
// interval of each process (from /proc), what ClickHouse inserted and merged
// (system.events), each process's resident memory, Kafka's and ClickHouse's
// disk, ClickHouse's active parts and running merges, the interval's read
// latency and the development chain's webhook latency, each judged against
// its goal. While it runs, `querybench load` reads at
// MORAINE_BENCH_READ_RATE (200 req/s; 0: no reads) the newest blocks, random
// blocks and random blocks' transactions of what is indexed so far, and,
// unless MORAINE_BENCH_DEVCHAIN=0, the development chain mines a block every
// 500 ms beside the backfill with a webhook on five of its busy accounts
// (devchainWebhooks). MORAINE_BENCH_INDEXING_NICE (0: none) lowers ingest's,
// the processor's and the replay source's CPU weight: each process is a
// session of its own (start), and the value is written as its autogroup's
// nice, as an operator of a machine that serves and indexes weighs them.
// MORAINE_BENCH_HEAD_INGEST=1 follows the development chain with an ingest
// instance of its own ("ingest-head", not lowered), the corpus with the
// other.
// At the end it prints the summary ("backfill summary"
// lines): rates per quarter of the run, peak memory, CPU per transaction and
// CPU seconds per process over the run, ClickHouse's rows merged per row
// inserted, the windows that met the reads' and the webhooks' goals, bytes
// stored per transaction in ClickHouse (per table) and in Kafka, the reads'
// latency; then the query goals on the
// database it built: MORAINE_BENCH_AFTER_RATE (500) req/s for
// MORAINE_BENCH_AFTER_DURATION (30 s) on the newest blocks and on random
// blocks, after a warm-up of MORAINE_BENCH_AFTER_WARMUP (60 s), then random
// blocks' transactions and the chain's latest transactions at
// MORAINE_BENCH_AFTER_TX_RATE (200) req/s, each with the CPU per read of
// ClickHouse and the query service, and the serving phase's read mix at
// each rate of MORAINE_BENCH_CAPACITY_RATES (e.g. "500,1000,1500,2000"; none
// by default) for as long, with its served rate, latency and CPU per read;
// and what other column types and codecs would store (columnStudy).
func BenchmarkBackfillCorpus(b *testing.B) {
	dir := os.Getenv("MORAINE_BENCH_CORPUS")
	if dir == "" {
		b.Fatal("MORAINE_BENCH_CORPUS is not set: build a corpus with `make corpus` and name its directory (make bench-backfill does)")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "corpus.json"))
	if err != nil {
		b.Fatalf("corpus: %v (build one with `make corpus`)", err)
	}
	var meta corpusMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		b.Fatalf("corpus.json: %v", err)
	}
	for b.Loop() {
		runBackfill(b, dir, meta)
	}
}

// backfillSample is the pipeline's state at one instant of the run.
type backfillSample struct {
	at                        time.Duration
	block                     uint64 // highest block written to ClickHouse
	blocks, txs, frames, logs uint64 // rows in ClickHouse
	chBytes, kafkaBytes       uint64
	parts, merges             uint64
	rss                       map[string]uint64
	// cpu is each process's CPU seconds (user + system) since it started.
	cpu map[string]float64
	// events are ClickHouse's cumulative counters (system.events): the
	// whole server's, other tenants' work included.
	events map[string]uint64
}

func runBackfill(b *testing.B, dir string, meta corpusMeta) {
	report := envDuration(b, "MORAINE_BENCH_REPORT", 10*time.Second)
	readRate := envFloat(b, "MORAINE_BENCH_READ_RATE", 200)
	rpcAddr := freeAddr(b)
	chain := strconv.FormatUint(meta.ChainID, 10)
	replay := start(b, "replay", "--replay.file", dir, "--rpc.listen-address", rpcAddr)
	eventually(b, time.Minute, "replay source", func() bool {
		_, err := rpcCall("http://"+rpcAddr, "eth_blockNumber")
		return err == nil
	})
	// A contiguous chain: ingest checks every parent link, as on a node.
	chains := fmt.Sprintf(`{"evmChainId":"%s","name":"Corpus","network":"mainnet","rpcUrls":["http://%s"],
		"wsUrl":"ws://%s","networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},"traces":true,"webhooks":true,"startBlock":%d}`,
		chain, rpcAddr, rpcAddr, meta.First)
	opts := pipelineOpts{noWaitIngest: true, ingestArgs: strings.Fields(os.Getenv("MORAINE_BENCH_INGEST_ARGS"))}
	// The development chain at its head beside the backfill, with webhooks
	// on its busy accounts: what their receivers see while another chain
	// backfills.
	var dev *devchainWebhooks
	if os.Getenv("MORAINE_BENCH_DEVCHAIN") != "0" {
		dev = startDevchainWebhooks(b)
		chains += "," + dev.chainJSON
		opts.delivery, opts.beforeIngest = true, dev.createWebhook
		if os.Getenv("MORAINE_BENCH_HEAD_INGEST") == "1" {
			opts.headIngest = dev.chainJSON
		}
	}
	s := startServices(b, chains, opts)
	s.procs["replay"], s.pids["replay"] = replay, replay.cmd.Process.Pid
	if dev != nil {
		s.procs["devchain"], s.pids["devchain"] = dev.proc, dev.proc.cmd.Process.Pid
	}
	for name, pid := range stackPIDs(b) {
		s.pids[name] = pid
	}
	// Serving first on one machine (README, "Serving while indexing"): the
	// indexing processes at a lower CPU weight than ClickHouse, Kafka, the
	// query service and delivery. The replay source stands for the
	// backfilled chain's node, which is not on the machine in production.
	if n := int(envFloat(b, "MORAINE_BENCH_INDEXING_NICE", 0)); n != 0 {
		for _, name := range []string{"ingest", "processor", "replay"} {
			path := fmt.Sprintf("/proc/%d/autogroup", s.pids[name])
			if err := os.WriteFile(path, []byte(strconv.Itoa(n)), 0o644); err != nil {
				b.Fatalf("MORAINE_BENCH_INDEXING_NICE: %s: %v", path, err)
			}
		}
	}
	fmt.Printf("\nbackfill corpus %s: blocks %d..%d, %d transactions, %d logs, %d call frames, chain %s; database %s, topic prefix %s\n",
		dir, meta.First, meta.Last, meta.Transactions, meta.Logs, meta.CallFrames, chain, s.ch.Database, s.kafka.TopicPrefix)

	var reads *proc
	readsLog := filepath.Join(b.TempDir(), "reads.txt")
	if readRate > 0 {
		reads = startTo(b, readsLog, "querybench", "load", "--url", s.api, "--rate", strconv.FormatFloat(readRate, 'f', -1, 64),
			"--duration", "100h", "--head-chain", chain, "--report-every", report.String(),
			"--path", "/v1/chains/"+chain+"/blocks",
			"--path", fmt.Sprintf("/v1/chains/%s/blocks/{rand:%d:head}", chain, meta.First),
			"--path", fmt.Sprintf("/v1/chains/%s/blocks/{rand:%d:head}/transactions", chain, meta.First))
	}
	kcl, err := kafkautil.NewClient(b.Context(), testLogger(), s.kafka.BaseOpts(testLogger(), "bench-backfill")...)
	if err != nil {
		b.Fatal(err)
	}
	defer kcl.Close()
	adm := kadm.NewClient(kcl)

	// The CPU counters at the start: the services' start-up is not the
	// backfill's.
	cpuStart, eventsStart := sampleCPU(s), clickhouseEvents(b, s.conn)
	var samples []backfillSample
	var windows readWindows
	var hooks webhookWindows
	peak := map[string]uint64{}
	maxParts, maxMerges := uint64(0), uint64(0)
	readLines := 0
	var done bool
	for !done {
		waitWritten(b, s, chain, meta.Last, report)
		cur := sampleBackfill(b, s, adm, chain)
		done = cur.block >= meta.Last
		for n, v := range cur.rss {
			peak[n] = max(peak[n], v)
		}
		maxParts, maxMerges = max(maxParts, cur.parts), max(maxMerges, cur.merges)
		prev := backfillSample{}
		if len(samples) > 0 {
			prev = samples[len(samples)-1]
		}
		samples = append(samples, cur)
		secs := (cur.at - prev.at).Seconds()
		rate := func(a, b uint64) float64 { return float64(a-min(a, b)) / secs }
		all := cur.at.Seconds()
		var read string
		if reads != nil {
			lines := grepLines(readsLog, "interval ")
			for _, l := range lines[min(readLines, len(lines)):] {
				read = " | reads " + windows.add(l, readRate, report)
			}
			readLines = max(readLines, len(lines))
		}
		if dev != nil {
			read += " | webhooks " + hooks.add(dev)
		}
		prevCPU, prevEvents := cpuStart, eventsStart
		if prev.cpu != nil {
			prevCPU, prevEvents = prev.cpu, prev.events
		}
		fmt.Printf("backfill t=%s block %d/%d | blocks %d (%.0f/s, avg %.0f/s) txs %d (%.0f/s, avg %.0f/s) frames %d (%.0f/s) | cpu µs/tx %s | %s | rss MB %s | kafka %.0f MB, clickhouse %.0f MB | parts %d, merges %d%s\n",
			cur.at.Round(time.Second), cur.block, meta.Last, cur.blocks, rate(cur.blocks, prev.blocks), float64(cur.blocks)/all,
			cur.txs, rate(cur.txs, prev.txs), float64(cur.txs)/all, cur.frames, rate(cur.frames, prev.frames),
			cpuPerTx(prevCPU, cur.cpu, cur.txs-min(cur.txs, prev.txs)), clickhouseWork(prevEvents, cur.events),
			rssLine(cur.rss), float64(cur.kafkaBytes)/1e6, float64(cur.chBytes)/1e6, cur.parts, cur.merges, read)
		if cur.at > envDuration(b, "MORAINE_BENCH_BACKFILL_TIMEOUT", 3*time.Hour) {
			b.Fatalf("backfill not done after %s", cur.at)
		}
	}
	last := samples[len(samples)-1]
	var readSummary []string
	if reads != nil {
		_ = reads.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-reads.done:
		case <-time.After(30 * time.Second):
			reads.kill()
		}
		for _, l := range grepLines(readsLog, "") {
			if strings.HasPrefix(l, "/v1/") || strings.HasPrefix(l, "all ") || strings.HasPrefix(l, "elapsed ") {
				readSummary = append(readSummary, l)
			}
		}
	}
	// Merges settle what the backfill wrote; the bytes are read once they
	// have (or after a minute).
	settleMerges(b, s.conn, s.ch.Database, time.Minute)
	tables := tableSizes(b, s.conn, s.ch.Database)
	kafkaBytes := topicBytes(b, adm, s.kafka.TopicPrefix)

	fmt.Printf("\nbackfill summary: %d blocks, %d transactions, %d call frames in %s: %.0f tx/s, %.0f blocks/s, %.0f call frames/s\n",
		last.blocks, last.txs, last.frames, last.at.Round(time.Second), float64(last.txs)/last.at.Seconds(),
		float64(last.blocks)/last.at.Seconds(), float64(last.frames)/last.at.Seconds())
	fmt.Printf("backfill summary: tx/s by quarter of the run: %s\n", quarters(samples))
	fmt.Printf("backfill summary: peak rss MB %s; most active parts %d, most running merges %d\n", rssLine(peak), maxParts, maxMerges)
	fmt.Printf("backfill summary: CPU µs/tx over the run %s\n", cpuPerTx(cpuStart, last.cpu, last.txs))
	fmt.Printf("backfill summary: CPU seconds over the run %s\n", cpuSeconds(cpuStart, last.cpu))
	fmt.Printf("backfill summary: %s; merged rows per inserted row %.2f\n", clickhouseWork(eventsStart, last.events),
		float64(last.events["MergedRows"]-eventsStart["MergedRows"])/float64(max(1, last.events["InsertedRows"]-eventsStart["InsertedRows"])))
	if reads != nil {
		fmt.Printf("backfill summary: %s\n", windows.summary(readRate))
	}
	if dev != nil {
		fmt.Printf("backfill summary: %s\n", hooks.summary())
	}
	var chTotal uint64
	for _, t := range tables {
		chTotal += t.bytes
	}
	fmt.Printf("backfill summary: ClickHouse %.1f MB on disk = %.0f bytes/tx; Kafka %.1f MB = %.0f bytes/tx (every topic of the run)\n",
		float64(chTotal)/1e6, float64(chTotal)/float64(last.txs), float64(kafkaBytes)/1e6, float64(kafkaBytes)/float64(last.txs))
	work := tableWork(b, s.conn, s.ch.Database)
	for _, t := range tables {
		fmt.Printf("backfill table %-22s %10d rows %9.1f MB %7.0f bytes/tx  compressed %5.1fx, %d parts%s\n",
			t.name, t.rows, float64(t.bytes)/1e6, float64(t.bytes)/float64(last.txs), float64(t.uncompressed)/float64(max(t.compressed, 1)), t.parts,
			work[t.name])
	}
	for _, l := range readSummary {
		fmt.Printf("backfill reads %s\n", l)
	}
	if reads != nil {
		// Where the reads' time went: the query service's time per route and
		// its ClickHouse time per query, means over the run.
		// And how many blocks each ClickHouse query of the coalesced point
		// reads took (1: every request read alone).
		seconds := func(v float64) string {
			return time.Duration(v * float64(time.Second)).Round(10 * time.Microsecond).String()
		}
		fmt.Printf("backfill reads, mean time in the query service: %s; in ClickHouse: %s; blocks per point read: %s\n",
			meanBy(b, s.metrics["query"], "moraine_query_http_request_duration_seconds", "route", seconds),
			meanBy(b, s.metrics["query"], "moraine_query_clickhouse_query_duration_seconds", "query", seconds),
			meanBy(b, s.metrics["query"], "moraine_query_clickhouse_point_read_keys", "lookup", func(v float64) string { return fmt.Sprintf("%.2f", v) }))
	}
	// What the processor's write budget did: the time backfill batches
	// waited, and its two signals' means over the run.
	pm := s.metrics["processor"]
	mean := func(name string) string {
		n := scrape(b, pm, name+"_count")[""]
		if n == 0 {
			return "none"
		}
		return fmt.Sprintf("%s (%.0f)", time.Duration(scrape(b, pm, name+"_sum")[""]/n*float64(time.Second)).Round(100*time.Microsecond), n)
	}
	fmt.Printf("backfill summary: write budget: backfill batches waited %.0f s; probe reads %s, head blocks' arrival at ingest to activity %s\n",
		scrape(b, pm, "moraine_processor_write_budget_paused_seconds_total")[""],
		mean("moraine_processor_write_budget_probe_seconds"), mean("moraine_processor_write_budget_head_seconds"))
	afterBackfillReads(b, s, chain, meta)
	if os.Getenv("MORAINE_BENCH_COLUMN_STUDY") != "0" {
		columnStudy(b, s.conn, s.ch.Database, last.txs)
	}
	for _, p := range s.procs {
		p.stop(15 * time.Second)
	}
}

// waitWritten sleeps for the report interval, or until the processor has
// written block last if that comes first: the run ends when the backfill
// does, not at the next report (a 10-s interval would otherwise add up to
// 10 s to a run of a few tens of seconds).
func waitWritten(b *testing.B, s *stackUp, chain string, last uint64, report time.Duration) {
	deadline := time.Now().Add(report)
	for {
		time.Sleep(min(250*time.Millisecond, time.Until(deadline)))
		if time.Now().After(deadline) {
			return
		}
		if n, ok := lastWritten(b, s, chain); ok && n >= last {
			return
		}
	}
}

// sampleBackfill reads the pipeline's state.
func sampleBackfill(b *testing.B, s *stackUp, adm *kadm.Client, chain string) backfillSample {
	cur := backfillSample{at: time.Since(s.ingestStarted), rss: map[string]uint64{}, cpu: map[string]float64{}}
	if n, ok := lastWritten(b, s, chain); ok {
		cur.block = n
	}
	for _, t := range tableSizes(b, s.conn, s.ch.Database) {
		cur.chBytes += t.bytes
		cur.parts += t.parts
		switch t.name {
		case "blocks":
			cur.blocks = t.rows
		case "transactions_by_block":
			cur.txs = t.rows
		case "internal_transactions":
			cur.frames = t.rows
		case "logs":
			cur.logs = t.rows
		}
	}
	cur.merges = queryUint(b, s.conn, "SELECT count() FROM system.merges WHERE database = ?", s.ch.Database)
	cur.events = clickhouseEvents(b, s.conn)
	cur.kafkaBytes = topicBytes(b, adm, s.kafka.TopicPrefix)
	for name, pid := range s.pids {
		cur.rss[name] = procRSS(pid)
		cur.cpu[name] = procCPU(pid)
	}
	return cur
}

// tableSize is what one table holds on disk (active parts).
type tableSize struct {
	name                                  string
	rows, bytes, compressed, uncompressed uint64
	parts                                 uint64
}

// tableSizes reads system.parts. Row counts include rows not yet merged
// away (a redelivered batch); a backfill without failures has none.
func tableSizes(tb testing.TB, conn driver.Conn, db string) []tableSize {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, `SELECT table, sum(rows), sum(bytes_on_disk), sum(data_compressed_bytes), sum(data_uncompressed_bytes), count()
FROM system.parts WHERE database = ? AND active GROUP BY table ORDER BY sum(bytes_on_disk) DESC`, db)
	if err != nil {
		tb.Logf("system.parts: %v", err)
		return nil
	}
	defer rows.Close()
	var out []tableSize
	for rows.Next() {
		var t tableSize
		if err := rows.Scan(&t.name, &t.rows, &t.bytes, &t.compressed, &t.uncompressed, &t.parts); err != nil {
			tb.Logf("system.parts: %v", err)
			return out
		}
		out = append(out, t)
	}
	return out
}

func queryUint(tb testing.TB, conn driver.Conn, q string, args ...any) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n uint64
	if err := conn.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		tb.Logf("%s: %v", q, err)
	}
	return n
}

// tableWork is what ClickHouse did to each table of db, from
// system.part_log: its inserts (parts and rows), and the rows its merges
// wrote per row inserted and their time (wall time of the merge threads,
// which on a saturated machine includes their wait for a core). Empty when
// the server keeps no part_log (the local stack's does).
func tableWork(tb testing.TB, conn driver.Conn, db string) map[string]string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		tb.Logf("flush logs: %v", err)
		return nil
	}
	// event_type by number: its names differ between 18.16 (NEW_PART) and
	// current releases (NewPart); 1 is a new part, 2 a merge in both.
	rows, err := conn.Query(ctx, `SELECT table, countIf(toInt8(event_type) = 1), sumIf(rows, toInt8(event_type) = 1),
 countIf(toInt8(event_type) = 2), sumIf(rows, toInt8(event_type) = 2), sumIf(duration_ms, toInt8(event_type) = 2)
FROM system.part_log WHERE database = ? GROUP BY table`, db)
	if err != nil {
		tb.Logf("system.part_log (absent unless configured): %v", err)
		return nil
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var (
			table                                        string
			inserts, inserted, merges, merged, mergeTime uint64
		)
		if err := rows.Scan(&table, &inserts, &inserted, &merges, &merged, &mergeTime); err != nil {
			tb.Logf("system.part_log: %v", err)
			return out
		}
		out[table] = fmt.Sprintf("; %d inserts of %.0f rows, %d merges wrote %.2f rows per row inserted in %.1f s",
			inserts, float64(inserted)/float64(max(inserts, 1)), merges, float64(merged)/float64(max(inserted, 1)), float64(mergeTime)/1000)
	}
	return out
}

// settleMerges waits up to timeout for ClickHouse to have no merge running
// in db.
func settleMerges(tb testing.TB, conn driver.Conn, db string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && queryUint(tb, conn, "SELECT count() FROM system.merges WHERE database = ?", db) > 0 {
		time.Sleep(time.Second)
	}
}

// topicBytes is the size of every partition of the run's topics on the
// brokers' disks (one replica each on the local stack's single broker).
func topicBytes(tb testing.TB, adm *kadm.Client, prefix string) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		tb.Logf("kafka log dirs: %v", err)
		return 0
	}
	var n uint64
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if strings.HasPrefix(p.Topic, prefix) {
				n += uint64(p.Size)
			}
		})
	})
	return n
}

// procRSS is a process's resident memory in bytes (0 when gone).
func procRSS(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// stackPIDs are the local stack's ClickHouse and Kafka processes.
func stackPIDs(tb testing.TB) map[string]int {
	dir := os.Getenv("MORAINE_STATE_DIR")
	out := map[string]int{}
	for name, pidfile := range map[string]string{
		"clickhouse": filepath.Join(dir, "clickhouse", "clickhouse-server.pid"),
		"kafka":      filepath.Join(dir, "kafka", "kafka.pid"),
	} {
		b, err := os.ReadFile(pidfile)
		if err != nil {
			tb.Logf("no pid file %s: %v", pidfile, err)
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		out[name] = pid
	}
	return out
}

func rssLine(rss map[string]uint64) string {
	names := make([]string, 0, len(rss))
	for n := range rss {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d", n, rss[n]>>20))
	}
	return strings.Join(parts, ", ")
}

// quarters is the transaction rate over each quarter of the run's time.
func quarters(samples []backfillSample) string {
	if len(samples) == 0 {
		return "-"
	}
	total := samples[len(samples)-1].at
	at := func(d time.Duration) (time.Duration, uint64) {
		// The sample at or before d (interpolated linearly between two).
		prev := backfillSample{}
		for _, s := range samples {
			if s.at >= d {
				if s.at == prev.at {
					return d, s.txs
				}
				f := float64(d-prev.at) / float64(s.at-prev.at)
				return d, prev.txs + uint64(f*float64(s.txs-prev.txs))
			}
			prev = s
		}
		return d, prev.txs
	}
	var out []string
	for q := range 4 {
		t0, a := at(total * time.Duration(q) / 4)
		t1, c := at(total * time.Duration(q+1) / 4)
		out = append(out, fmt.Sprintf("%.0f", float64(c-min(c, a))/(t1-t0).Seconds()))
	}
	return strings.Join(out, ", ")
}

// grepLines returns the lines of a file holding substr.
func grepLines(path, substr string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// afterBackfillReads runs the query service's 500 req/s goals on the
// database the backfill built: the newest blocks, then random blocks
// (after a warm-up of the same load: ClickHouse's cache of decompressed
// blocks, which random lookups read through, is cold after a backfill).
func afterBackfillReads(b *testing.B, s *stackUp, chain string, meta corpusMeta) {
	rate := strconv.FormatFloat(envFloat(b, "MORAINE_BENCH_AFTER_RATE", 500), 'f', -1, 64)
	dur := envDuration(b, "MORAINE_BENCH_AFTER_DURATION", 30*time.Second)
	warm := envDuration(b, "MORAINE_BENCH_AFTER_WARMUP", 60*time.Second)
	if dur <= 0 {
		return
	}
	random := fmt.Sprintf("/v1/chains/%s/blocks/{rand:%d:%d}", chain, meta.First, meta.Last)
	if warm > 0 {
		out := runTool(b, "querybench", "load", "--url", s.api, "--rate", rate, "--duration", warm.String(), "--path", random)
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "all ") {
				fmt.Printf("backfill after warm-up (%s of the random lookups): %s\n", warm, strings.Join(strings.Fields(l), " "))
			}
		}
	}
	// Each route alone, with what it costs in CPU with nothing else to do:
	// what a read load takes from a backfill on the same machine. A block's
	// transactions cost three to four times a block's own read, so they run
	// at a rate this machine sustains (MORAINE_BENCH_AFTER_TX_RATE), as does
	// the chain's latest transactions (a page of the default size).
	txRate := strconv.FormatFloat(envFloat(b, "MORAINE_BENCH_AFTER_TX_RATE", 200), 'f', -1, 64)
	for _, run := range []struct{ path, rate string }{
		{"/v1/chains/" + chain + "/blocks", rate}, {random, rate}, {random + "/transactions", txRate},
		{"/v1/chains/" + chain + "/transactions", txRate},
	} {
		measureReads(b, s, "backfill after "+run.rate+" req/s", run.path, run.rate, dur, run.path)
	}
	// The serving phase's read mix at rising rates: how many reads a second
	// the finished database serves on this machine, and what each costs as
	// the load nears the cores' limit (the query service reads concurrent
	// point lookups together, store/coalesce.go).
	for _, r := range strings.Split(os.Getenv("MORAINE_BENCH_CAPACITY_RATES"), ",") {
		if r = strings.TrimSpace(r); r != "" {
			measureReads(b, s, "backfill capacity "+r+" req/s", "mix", r, dur,
				"/v1/chains/"+chain+"/blocks", random, random+"/transactions")
		}
	}
}

// measureReads runs querybench over paths at rate for dur and prints its
// per-path and overall lines, then the CPU each read took from ClickHouse
// and the query service, every line prefixed by label.
func measureReads(b *testing.B, s *stackUp, label, name, rate string, dur time.Duration, paths ...string) {
	args := []string{"load", "--url", s.api, "--rate", rate, "--duration", dur.String()}
	for _, p := range paths {
		args = append(args, "--path", p)
	}
	before := sampleCPU(s)
	out := runTool(b, "querybench", args...)
	after := sampleCPU(s)
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "/v1/") || strings.HasPrefix(l, "elapsed ") || (len(paths) > 1 && strings.HasPrefix(l, "all ")) {
			fmt.Printf("%s: %s\n", label, strings.Join(strings.Fields(l), " "))
		}
		m := intervalField.FindStringSubmatch(l)
		if !strings.HasPrefix(l, "all ") || m == nil || m[1] != "n" {
			continue
		}
		if n, err := strconv.ParseFloat(m[2], 64); err == nil && n > 0 {
			fmt.Printf("%s: %s CPU µs per read: clickhouse %.0f, query %.0f\n", label, name,
				(after["clickhouse"]-before["clickhouse"])/n*1e6, (after["query"]-before["query"])/n*1e6)
		}
	}
}

// meanBy is a histogram's mean per value of one label (sum / count), as
// "value 1.2ms, ..." with format giving each mean.
func meanBy(tb testing.TB, url, name, label string, format func(mean float64) string) string {
	sums, counts := scrape(tb, url, name+"_sum"), scrape(tb, url, name+"_count")
	re := regexp.MustCompile(label + `="([^"]*)"`)
	var parts []string
	for labels, sum := range sums {
		n := counts[labels]
		m := re.FindStringSubmatch(labels)
		if n == 0 || m == nil {
			continue
		}
		parts = append(parts, m[1]+" "+format(sum/n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// sampleCPU reads every process's CPU seconds.
func sampleCPU(s *stackUp) map[string]float64 {
	out := map[string]float64{}
	for name, pid := range s.pids {
		out[name] = procCPU(pid)
	}
	return out
}

// indexingProcesses are the processes whose CPU is the cost of indexing:
// moraine's pipeline services and the stores they write. The query service
// serves reads (its ClickHouse reads are in ClickHouse's share, which no
// process counter separates), and the replay source stands in for the
// chain's node.
var indexingProcesses = []string{"ingest", "processor", "clickhouse", "kafka", "delivery"}

// cpuPerTx is "all N (ingest a, processor b, ...), query q, replay r": the
// CPU microseconds per transaction of txs transactions between two CPU
// samples, "all" being indexingProcesses together. ClickHouse and Kafka are
// the local stack's, shared with whatever else runs on the machine.
func cpuPerTx(before, after map[string]float64, txs uint64) string {
	if txs == 0 {
		return "-"
	}
	per := func(name string) float64 { return (after[name] - before[name]) / float64(txs) * 1e6 }
	var all float64
	var parts []string
	for _, n := range indexingProcesses {
		if _, ok := after[n]; !ok {
			continue
		}
		all += per(n)
		parts = append(parts, fmt.Sprintf("%s %.0f", n, per(n)))
	}
	out := fmt.Sprintf("all %.0f (%s)", all, strings.Join(parts, ", "))
	for _, n := range []string{"query", "replay"} {
		if _, ok := after[n]; ok {
			out += fmt.Sprintf(", %s %.0f", n, per(n))
		}
	}
	return out
}

// cpuSeconds is each process's CPU seconds between two samples.
func cpuSeconds(before, after map[string]float64) string {
	names := make([]string, 0, len(after))
	for n := range after {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f", n, after[n]-before[n]))
	}
	return strings.Join(parts, ", ")
}

// The reads' goal while a backfill runs (issue 26): in every window the
// offered rate is served (at least readServedShare of it completes, none is
// dropped or fails) with p99 at most readP99Goal.
const (
	readP99Goal     = 100 * time.Millisecond
	readServedShare = 0.97
)

// readWindows judges querybench's interval lines against the reads' goal.
type readWindows struct {
	n, met  int
	worst   time.Duration
	minRate float64
}

var intervalField = regexp.MustCompile(`(n|err|dropped|p99)=(\S+)`)

// add judges one interval line ("interval a..b n=.. err=.. dropped=..
// p99=.."), and returns it shortened with its verdict.
func (w *readWindows) add(line string, rate float64, window time.Duration) string {
	f := map[string]string{}
	for _, m := range intervalField.FindAllStringSubmatch(line, -1) {
		f[m[1]] = m[2]
	}
	n, _ := strconv.Atoi(f["n"])
	errs, _ := strconv.Atoi(f["err"])
	dropped, _ := strconv.Atoi(f["dropped"])
	p99, _ := time.ParseDuration(f["p99"])
	served := float64(n) / window.Seconds()
	ok := errs == 0 && dropped == 0 && served >= readServedShare*rate && p99 <= readP99Goal
	if w.n == 0 || served < w.minRate {
		w.minRate = served
	}
	w.n++
	w.worst = max(w.worst, p99)
	verdict := "missed"
	if ok {
		w.met++
		verdict = "met"
	}
	return fmt.Sprintf("%s (%.0f req/s served) goal %s", strings.TrimSpace(line[strings.Index(line, " n=")+1:]), served, verdict)
}

func (w *readWindows) summary(rate float64) string {
	return fmt.Sprintf("reads at %.0f req/s: goal met in %d of %d windows (served at least %.0f%% of the offered rate, none dropped or failed, p99 at most %s); worst window p99 %s, least served %.0f req/s",
		rate, w.met, w.n, readServedShare*100, readP99Goal, w.worst.Round(time.Millisecond), w.minRate)
}

// clickhouseWork is what ClickHouse did between two samples of its
// counters: rows and bytes inserted and the CPU of its query threads
// (inserts and reads), rows and bytes merged and the merges' time (one
// thread each, so about their CPU).
func clickhouseWork(before, after map[string]uint64) string {
	d := func(event string) float64 { return float64(after[event] - min(after[event], before[event])) }
	return fmt.Sprintf("clickhouse inserted %.0fk rows %.0f MB, query threads %.1fs CPU; merged %.0fk rows %.0f MB in %.1fs",
		d("InsertedRows")/1e3, d("InsertedBytes")/1e6, d("OSCPUVirtualTimeMicroseconds")/1e6,
		d("MergedRows")/1e3, d("MergedUncompressedBytes")/1e6, d("MergesTimeMilliseconds")/1e3)
}

// devchainWebhooks is the development chain mining beside a backfill, a
// webhook on five of its busy accounts (logs and internal transactions
// included, as make bench's webhook latency) and the receiver timing the
// messages from the block's appearance at the node.
type devchainWebhooks struct {
	proc      *proc
	rpcURL    string
	chainJSON string
	accounts  []string
	recv      *soakReceiver
	heads     *headWatcher
	// startHead is the node's newest block when ingest started: blocks up
	// to it were mined before moraine followed the chain, so their
	// messages measure ingest's start-up catch-up, not the head's latency.
	startHead uint64
}

func startDevchainWebhooks(b *testing.B) *devchainWebhooks {
	rpcAddr := freeAddr(b)
	d := &devchainWebhooks{rpcURL: "http://" + rpcAddr, heads: &headWatcher{seen: map[uint64]time.Time{}}, recv: newSoakReceiver(b)}
	d.proc = start(b, "devchain", "--rpc.listen-address", rpcAddr, "--block.interval", "500ms", "--traffic.tx-per-block", "12")
	eventually(b, 60*time.Second, "devchain RPC", func() bool {
		_, err := rpcCall(d.rpcURL, "eth_blockNumber")
		return err == nil
	})
	raw, err := rpcCall(d.rpcURL, "moraine_accounts")
	if err != nil || json.Unmarshal(raw, &d.accounts) != nil || len(d.accounts) < 5 {
		b.Fatalf("moraine_accounts: %v %s", err, raw)
	}
	go d.heads.run(b.Context(), d.rpcURL)
	d.chainJSON = fmt.Sprintf(`{"evmChainId":"43112","name":"Development chain","network":"devnet",
		"rpcUrls":["%s"],"wsUrl":"ws://%s","networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},
		"traces":true,"webhooks":true,"startBlock":0}`, d.rpcURL, rpcAddr)
	return d
}

func (d *devchainWebhooks) createWebhook(s *stackUp) {
	b := s.t
	key := devKey(b, s)
	if code := call(b, "POST", s.api+"/v1/webhooks", key, map[string]any{
		"url": d.recv.srv.URL + "/backfill", "chainId": "43112", "eventType": "address_activity",
		"metadata": map[string]any{"addresses": d.accounts[:5]}, "includeLogs": true, "includeInternalTxs": true,
	}, nil); code != http.StatusCreated {
		b.Fatalf("create webhook: %d", code)
	}
	d.startHead = d.heads.newest()
}

// The webhooks' goal while another chain backfills (issue 26): p99 from the
// block's appearance at the node to the signed POST's arrival at most
// webhookP99Goal in every window.
const webhookP99Goal = 300 * time.Millisecond

// webhookWindows judges each window's head-to-webhook latency.
type webhookWindows struct {
	n, met, unmatched int
	// beforeStart counts messages about blocks mined before ingest started
	// (devchainWebhooks.startHead), which no window judges.
	beforeStart int
	worst       time.Duration
	all         []time.Duration
}

// add takes the messages that arrived since the last call and returns the
// window's figures with the verdict.
func (w *webhookWindows) add(d *devchainWebhooks) string {
	var lat []time.Duration
	for _, a := range d.recv.take() {
		if a.block <= d.startHead {
			w.beforeStart++
			continue
		}
		if t, ok := d.heads.at(a.block); ok {
			lat = append(lat, a.at.Sub(t))
		} else {
			w.unmatched++
		}
	}
	w.n++
	if len(lat) == 0 {
		return "none received: goal missed"
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	w.all = append(w.all, lat...)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	w.worst = max(w.worst, q(0.99))
	verdict := "missed"
	if q(0.99) <= webhookP99Goal {
		w.met++
		verdict = "met"
	}
	return fmt.Sprintf("n=%d p50=%s p99=%s goal %s", len(lat), q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), verdict)
}

func (w *webhookWindows) summary() string {
	sort.Slice(w.all, func(i, j int) bool { return w.all[i] < w.all[j] })
	overall := "-"
	if len(w.all) > 0 {
		overall = w.all[int(0.99*float64(len(w.all)-1))].Round(time.Millisecond).String()
	}
	return fmt.Sprintf("development chain's webhooks (block at the node -> signed POST received): goal p99 <= %s met in %d of %d windows; worst window p99 %s, p99 over the run %s, %d messages; %d about blocks the watcher had not seen; %d about blocks mined before ingest started (not judged)",
		webhookP99Goal, w.met, w.n, w.worst.Round(time.Millisecond), overall, len(w.all), w.unmatched, w.beforeStart)
}
