package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// BenchmarkPipelineGunzilla backfills the Gunzilla recording (1,001 real
// blocks, 9,887 txs, 207,990 call frames) end to end: replay source ->
// ingest -> Kafka -> processor -> ClickHouse, on the real local stack. It
// reports blocks/s and tx/s from ingest start to the last block's head row
// in ClickHouse, the CPU time each process spent, and the time each
// pipeline stage accumulated. Run it with -benchtime Nx for N runs (make
// bench does). Runs rotate three variants of the processor's tables, so one
// invocation measures what the optional ones cost: every table ("all"),
// without the balance tables (--processor.balances=false: "no-balances"),
// and without the transaction-history tables (--processor.address-index=
// false: "no-history"); each run's lines follow a "stage variant: NAME"
// line.
//
// Each run stops its services when it is measured, but its database and
// topics are dropped only after the last run: on this machine's ext4
// without a journal, creating a file scans past every inode deleted in the
// last minutes, and dropping a run's database (and, a minute later, Kafka
// deleting its topics' files) right before the next run made ClickHouse's
// part files cost up to twice the CPU, varying from run to run. A running
// deployment does not delete thousands of files every few seconds.
func BenchmarkPipelineGunzilla(b *testing.B) {
	d := gunzilla
	blocks, txs, frames := recordingCounts(b, d)
	first, last := uint64(14000000), uint64(14100000)
	waitForQuietFilesystem(b)
	for run := 1; b.Loop(); run++ {
		// The decoded recording (about 1 GB of Go maps) is garbage now:
		// collect it before the measured window, so that this process's
		// garbage collector does not take a core from the pipeline.
		runtime.GC()
		variant := []string{"no-history", "all", "no-balances"}[run%3]
		fmt.Printf("\nstage variant: %s\n", variant)
		s := runPipeline(b, d, first, pipelineOpts{noWaitIngest: true, ingestArgs: strings.Fields(os.Getenv("MORAINE_BENCH_INGEST_ARGS")),
			processorArgs: []string{fmt.Sprintf("--processor.address-index=%v", variant != "no-history"),
				fmt.Sprintf("--processor.balances=%v", variant != "no-balances")}})
		// CPU from here on: ingest has just been started, the rest are idle
		// and ready (the replay source has loaded its file).
		cpuBefore := stackCPU(b)
		for name, pid := range s.pids {
			cpuBefore[name] = procCPU(pid)
		}
		profiles := profileServices(b, s, run, "ingest", "processor")
		busyBefore, stealBefore := machineCPU(b)
		chBefore := clickhouseEvents(b, s.conn)
		// Timeline, polled every 10 ms: when ingest's metrics first show a
		// produced block and the last one (it produces in large batches, so
		// these can coincide), then the last block's head row in ClickHouse.
		var firstProduced, ingestDone time.Duration
		for ingestDone == 0 && time.Since(s.ingestStarted) < 10*time.Minute {
			for _, v := range scrape(b, s.metrics["ingest"], "moraine_ingest_last_produced_block") {
				if v >= float64(first) && firstProduced == 0 {
					firstProduced = time.Since(s.ingestStarted)
				}
				if uint64(v) == last {
					ingestDone = time.Since(s.ingestStarted)
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		// The end: the processor's gauge of the highest block written moves
		// once the batch holding the last block is in ClickHouse (chain head
		// row included). Scraped every 10 ms like ingest's: polling
		// ClickHouse itself that often would take CPU from the pipeline, and
		// less often would blur the end of a run lasting about a second.
		for time.Since(s.ingestStarted) < 10*time.Minute {
			if n, ok := lastWritten(b, s, strconv.FormatUint(d.chainID, 10)); ok && n == last {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		wall := time.Since(s.ingestStarted)
		busyAfter, stealAfter := machineCPU(b)
		chAfter := clickhouseEvents(b, s.conn)
		eventually(b, time.Minute, "last block in ClickHouse", func() bool {
			var n uint64
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.conn.QueryRow(ctx, "SELECT count() FROM chain_heads FINAL WHERE chain_id = ? AND number = ?", d.chainID, last).Scan(&n)
			return n == 1
		})
		profiles.Wait()
		// Throughput over the whole run, ingest's process start-up included.
		b.ReportMetric(float64(blocks)/wall.Seconds(), "blocks/s")
		b.ReportMetric(float64(txs)/wall.Seconds(), "tx/s")
		b.ReportMetric(float64(frames)/wall.Seconds(), "frames/s")

		cpu := map[string]float64{}
		for name, pid := range s.pids {
			cpu[name] = procCPU(pid) - cpuBefore[name]
		}
		for name, v := range stackCPU(b) {
			cpu[name] = v - cpuBefore[name]
		}
		total := 0.0
		for _, v := range cpu {
			total += v
		}
		names := make([]string, 0, len(cpu))
		for n := range cpu {
			names = append(names, n)
		}
		sort.Strings(names)
		// Each line starts with a newline: with -count, go test prints the
		// benchmark's name before a run without ending the line.
		fmt.Printf("\nstage result: %.0f tx/s, %.1f blocks/s, %.0f call frames/s\n",
			float64(txs)/wall.Seconds(), float64(blocks)/wall.Seconds(), float64(frames)/wall.Seconds())
		fmt.Printf("stage wall: %d blocks, %d txs, %d call frames; from ingest start: first block produced %.2fs, last produced %.2fs, last in ClickHouse %.2fs\n",
			blocks, txs, frames, firstProduced.Seconds(), ingestDone.Seconds(), wall.Seconds())
		for _, n := range names {
			fmt.Printf("stage cpu %-10s %6.2fs %5.1f%% of the CPU time spent during the run\n", n, cpu[n], 100*cpu[n]/total)
		}
		// What the machine did in the window besides the stack: this
		// benchmark's own polling, the kernel, other tenants (steal).
		fmt.Printf("stage cpu machine    %6.2fs busy of %.2fs (%d cores x wall); %.2fs outside the processes above, %.2fs stolen by the hypervisor\n",
			busyAfter-busyBefore, float64(runtime.NumCPU())*wall.Seconds(), runtime.NumCPU(), busyAfter-busyBefore-total, stealAfter-stealBefore)
		// What ClickHouse did: its CPU varies most from run to run, and
		// merges running inside the window would be one reason.
		ch := func(event string) float64 { return float64(chAfter[event] - chBefore[event]) }
		fmt.Printf("stage clickhouse     %.0f INSERTs of %.0f rows, %.1f MB; %.0f merges of %.0f rows; %.2fs CPU in query threads\n",
			ch("InsertQuery"), ch("InsertedRows"), ch("InsertedBytes")/1e6, ch("Merge"), ch("MergedRows"), ch("OSCPUVirtualTimeMicroseconds")/1e6)
		// What the optional tables add on disk, per transaction of the run
		// (active parts as written: merges make them smaller).
		var tableBytes []string
		for _, r := range query(b, s.conn, `SELECT table, toString(sum(bytes_on_disk)) AS bytes FROM system.parts
			WHERE active AND database = currentDatabase() AND table IN ('balances', 'balance_pairs', 'nft_transfers', 'balance_progress', 'address_lists', 'transactions_by_hash')
			GROUP BY table ORDER BY table`) {
			n, _ := strconv.ParseFloat(r["bytes"], 64)
			tableBytes = append(tableBytes, fmt.Sprintf("%s %.0f", r["table"], n/float64(txs)))
		}
		fmt.Printf("stage bytes per transaction on disk: %s\n", strings.Join(tableBytes, ", "))
		for _, m := range []struct{ svc, metric string }{
			{"ingest", "moraine_ingest_stage_duration_seconds_sum"},
			{"processor", "moraine_processor_batch_duration_seconds_sum"},
		} {
			counts := scrape(b, s.metrics[m.svc], strings.TrimSuffix(m.metric, "_sum")+"_count")
			for label, v := range scrape(b, s.metrics[m.svc], m.metric) {
				fmt.Printf("stage time %-10s %-28s %6.2fs over %.0f calls\n", m.svc, label, v, counts[label])
			}
		}
		for _, p := range s.procs {
			p.stop(15 * time.Second)
		}
	}
}

// profileServices fetches a CPU profile of each named service while the
// benchmark runs when MORAINE_BENCH_PROFILE_DIR is set, writing
// <dir>/<service>-<run>.pprof (read them with go tool pprof; it merges the
// runs' files when given several). The profile lasts
// MORAINE_BENCH_PROFILE_SECONDS (default 4), from the moment the service's
// admin server answers. Wait for the returned group before stopping them.
// waitForQuietFilesystem waits, up to 6 minutes (probing every 15 s, each
// probe creating and removing 64 files), until creating a file in
// ClickHouse's data directory ($MORAINE_STATE_DIR/clickhouse/data) costs
// under quietCreateMicros, and prints the cost and the wait. On this
// machine's ext4 without a journal, creating a file skips every inode freed
// in the last minute (up to six while the freeing is unwritten), and a
// ClickHouse INSERT creates two files per column: a benchmark started right
// after a test suite dropped its databases measured ClickHouse at 0.8-0.9 s
// of CPU per run instead of 0.3, and a median 25% lower.
func waitForQuietFilesystem(tb testing.TB) {
	dir := os.Getenv("MORAINE_STATE_DIR")
	if dir == "" {
		fmt.Printf("\nstage filesystem: MORAINE_STATE_DIR not set; not waiting for file creation to be cheap\n")
		return
	}
	dir = filepath.Join(dir, "clickhouse", "data")
	start := time.Now()
	for {
		cost := fileCreateMicros(tb, dir)
		waited := time.Since(start)
		if cost < quietCreateMicros || waited > 6*time.Minute {
			fmt.Printf("\nstage filesystem: creating a file in ClickHouse's data directory costs %.0f µs (waited %.0f s for under %d µs)\n",
				cost, waited.Seconds(), quietCreateMicros)
			return
		}
		time.Sleep(15 * time.Second)
	}
}

// quietCreateMicros: creating a file costs 25-40 µs here when nothing was
// deleted lately, and 60-750 µs within minutes of a test suite's drops.
const quietCreateMicros = 60

// fileCreateMicros is the mean time to create one of 64 empty files in a new
// directory under dir (which it then removes).
func fileCreateMicros(tb testing.TB, dir string) float64 {
	probe, err := os.MkdirTemp(dir, "fs-probe-")
	if err != nil {
		tb.Fatalf("filesystem probe: %v", err)
	}
	defer os.RemoveAll(probe)
	const n = 64
	start := time.Now()
	for i := range n {
		f, err := os.Create(filepath.Join(probe, strconv.Itoa(i)))
		if err != nil {
			tb.Fatalf("filesystem probe: %v", err)
		}
		f.Close()
	}
	return float64(time.Since(start).Microseconds()) / n
}

func profileServices(tb testing.TB, s *stackUp, run int, names ...string) *sync.WaitGroup {
	var wg sync.WaitGroup
	dir := os.Getenv("MORAINE_BENCH_PROFILE_DIR")
	if dir == "" {
		return &wg
	}
	seconds := os.Getenv("MORAINE_BENCH_PROFILE_SECONDS")
	if seconds == "" {
		seconds = "4"
	}
	for _, name := range names {
		url := strings.TrimSuffix(s.metrics[name], "/metrics") + "/debug/pprof/profile?seconds=" + seconds
		wg.Go(func() {
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				resp, err := http.Get(url)
				if err != nil {
					continue // not listening yet
				}
				defer resp.Body.Close()
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", name, run)))
				if err == nil {
					_, err = io.Copy(f, resp.Body)
					err = errors.Join(err, f.Close())
				}
				if err != nil {
					tb.Errorf("profile of %s: %v", name, err)
				}
				return
			}
			tb.Errorf("profile of %s: ops server never answered", name)
		})
	}
	return &wg
}

// recordingCounts counts the blocks, transactions and call frames of d's
// recording.
func recordingCounts(tb testing.TB, d dataset) (blocks, txs, frames int) {
	rec := readRecording(tb, testenv.SharedData(tb, d.recording))
	for _, r := range rec {
		t, _ := r.Block["transactions"].([]any)
		txs += len(t)
		for _, tr := range r.Traces {
			frames += countFrames(tr["result"])
		}
	}
	return len(rec), txs, frames
}

func countFrames(v any) int {
	m, ok := v.(map[string]any)
	if !ok {
		return 0
	}
	n := 1
	calls, _ := m["calls"].([]any)
	for _, c := range calls {
		n += countFrames(c)
	}
	return n
}

// procCPU is a process's user+system CPU time in seconds.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at ") ".
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100 // clock ticks; 100 Hz on Linux
}

// stackCPU reads the CPU time of the local stack's ClickHouse and Kafka.
func stackCPU(tb testing.TB) map[string]float64 {
	out := map[string]float64{}
	for name, pid := range stackPIDs(tb) {
		out[name] = procCPU(pid)
	}
	return out
}

// machineCPU reads the machine's busy (neither idle nor waiting for I/O)
// and stolen CPU seconds from /proc/stat.
func machineCPU(tb testing.TB) (busy, steal float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		tb.Logf("machine cpu: %v", err)
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	total := 0.0
	v := make([]float64, len(f))
	for i := 1; i < len(f); i++ {
		v[i], _ = strconv.ParseFloat(f[i], 64)
		if i <= 8 {
			total += v[i]
		}
	}
	if len(v) <= 8 {
		return 0, 0
	}
	return (total - v[4] - v[5]) / 100, v[8] / 100 // clock ticks; 100 Hz on Linux
}

// clickhouseEvents reads the server's cumulative event counters
// (system.events; an event that never happened has no row).
func clickhouseEvents(tb testing.TB, conn driver.Conn) map[string]uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, "SELECT event, value FROM system.events")
	if err != nil {
		tb.Logf("clickhouse events: %v", err)
		return nil
	}
	defer rows.Close()
	out := map[string]uint64{}
	for rows.Next() {
		var event string
		var value uint64
		if err := rows.Scan(&event, &value); err != nil {
			tb.Logf("clickhouse events: %v", err)
			return out
		}
		out[event] = value
	}
	return out
}

// lastWritten is the highest block of chain the processor has written
// (its moraine_processor_last_written_block gauge; false before the first).
func lastWritten(tb testing.TB, s *stackUp, chain string) (uint64, bool) {
	v, ok := scrape(tb, s.metrics["processor"], "moraine_processor_last_written_block")[`{chain="`+chain+`"}`]
	return uint64(v), ok
}

// scrape returns the values of one metric family by label set.
func scrape(tb testing.TB, url, name string) map[string]float64 {
	resp, err := http.Get(url)
	if err != nil {
		tb.Logf("scrape %s: %v", url, err)
		return nil
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, _ := strconv.ParseFloat(line[i+1:], 64)
		out[strings.TrimPrefix(line[:i], name)] = v
	}
	return out
}

// BenchmarkWebhookLatency measures the time from a block's availability at
// the node (its newHeads announcement) to the arrival of its webhook messages
// at a local receiver, on the development chain's traffic with the whole
// pipeline (ingest, processor with the matcher, delivery) on the real stack.
func BenchmarkWebhookLatency(b *testing.B) {
	for b.Loop() {
		rpcAddr := freeAddr(b)
		start(b, "devchain", "--rpc.listen-address", rpcAddr, "--block.interval", "500ms", "--traffic.tx-per-block", "12")
		rpcURL := "http://" + rpcAddr
		eventually(b, 60*time.Second, "devchain RPC", func() bool {
			_, err := rpcCall(rpcURL, "eth_blockNumber")
			return err == nil
		})
		var accounts []string
		raw, err := rpcCall(rpcURL, "moraine_accounts")
		if err != nil {
			b.Fatal(err)
		}
		_ = json.Unmarshal(raw, &accounts)
		recv := newReceiver(b)
		startServices(b, fmt.Sprintf(`{"evmChainId":"43112","name":"Development chain","network":"devnet",
			"rpcUrls":["%s"],"wsUrl":"ws://%s","networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},
			"traces":true,"webhooks":true,"startBlock":0}`, rpcURL, rpcAddr), pipelineOpts{delivery: true,
			beforeIngest: func(s *stackUp) {
				key := devKey(b, s)
				if code := call(b, "POST", s.api+"/v1/webhooks", key, map[string]any{
					"url": recv.srv.URL + "/lat", "chainId": "43112", "eventType": "address_activity",
					"metadata": map[string]any{"addresses": accounts[:5]}, "includeLogs": true, "includeInternalTxs": true,
				}, nil); code != http.StatusCreated {
					b.Fatalf("create webhook: %d", code)
				}
			}})
		// Let ingest catch up with the blocks mined before it started.
		time.Sleep(3 * time.Second)
		seen := map[uint64]time.Time{}
		var mu sync.Mutex
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				raw, err := rpcCall(rpcURL, "eth_blockNumber")
				if err != nil {
					continue
				}
				var h string
				_ = json.Unmarshal(raw, &h)
				n := hexToBig(h).Uint64()
				mu.Lock()
				if _, ok := seen[n]; !ok {
					seen[n] = time.Now()
				}
				mu.Unlock()
			}
		}()
		measureFrom := time.Now()
		time.Sleep(20 * time.Second)
		close(stop)
		<-done
		time.Sleep(2 * time.Second) // the last blocks' messages
		var lat []time.Duration
		for _, m := range recv.snapshot() {
			if m.at.Before(measureFrom) {
				continue
			}
			_, block, _ := payloadTx(m.body)
			mu.Lock()
			at, ok := seen[block]
			mu.Unlock()
			if ok {
				lat = append(lat, m.at.Sub(at))
			}
		}
		if len(lat) < 50 {
			b.Fatalf("only %d messages measured", len(lat))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
		b.ReportMetric(float64(p(0.5).Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(p(0.99).Microseconds())/1000, "p99-ms")
		fmt.Printf("webhook latency: %d messages over 20 s of blocks every 500 ms: p50 %s, p99 %s, max %s (block visible at the RPC -> signed POST received)\n",
			len(lat), p(0.5).Round(time.Millisecond), p(0.99).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	}
}
