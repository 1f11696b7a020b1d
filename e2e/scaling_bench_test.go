package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/topics"
)

// BenchmarkProcessorScaling measures how the processor's throughput grows
// with its instances when several chains are written at once. Four chains
// (the Gunzilla recording served under four chain ids, chosen so that each
// lands on its own partition of the blocks topic) are produced to Kafka
// first by one ingest; then, for each round, 1, 2 and 4 processor instances
// (MORAINE_BENCH_SCALING_INSTANCES; sink and matcher, fresh consumer
// groups, a fresh database, topics of their own) write them all to
// ClickHouse, and the round is timed from the first block written to the
// last one of every chain. The instances start, and their groups settle
// with every instance assigned, before the recorded block records are
// copied into their topic: a capped instance's start-up, or a rebalance
// while the first instance already works, would otherwise be timed too.
// -benchtime Nx runs N rounds and the medians are reported.
//
// On a machine of two cores, uncapped instances only share the same CPUs
// (two measured 0.85 of one). So that the figure shows what another
// machine's instance adds, each instance runs in its own cgroup capped at
// MORAINE_BENCH_SCALING_CPU cores (0.05; the same cap for every instance;
// 0 to run uncapped), small enough that the instances, not ClickHouse or
// Kafka on the remaining CPU, are the bottleneck: four instances write
// about 5,000 tx/s, which ClickHouse takes with about one core (200 µs
// a transaction over a backfill, bench/history.md); at 0.1 cores four
// instances measured 2.15x one, the machine saturated. Each round prints
// the instances' CPU use against the cap.
//
// One chain is one partition, and a partition is consumed by one instance
// at a time, in order: that is what caps one chain's throughput (one
// instance's decode and insert loop, and ClickHouse's insert speed), and
// why several chains are needed to use a second instance.
func BenchmarkProcessorScaling(b *testing.B) {
	cpuCap := envFloat(b, "MORAINE_BENCH_SCALING_CPU", 0.05)
	var counts []int
	for _, f := range strings.Split(cmpOr(os.Getenv("MORAINE_BENCH_SCALING_INSTANCES"), "1,2,4"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("MORAINE_BENCH_SCALING_INSTANCES: %q is not a list of instance counts", f)
		}
		counts = append(counts, n)
	}
	if cpuCap > 0 {
		if err := checkCPUCgroups(); err != nil {
			b.Fatalf("capping instances needs the cgroup v1 cpu controller, writable (%v); MORAINE_BENCH_SCALING_CPU=0 runs uncapped", err)
		}
	}
	d := gunzilla
	_, txs, _ := recordingCounts(b, d)
	const nChains = 4
	first, last := uint64(14000000), uint64(14100000)
	kcfg := testenv.Kafka(b)
	ids := chainIDsOnDistinctPartitions(b, kcfg.Topic(topics.Blocks), nChains)

	// The chain sources and one ingest producing all four chains.
	var entries []string
	for _, id := range ids {
		rpcAddr := freeAddr(b)
		start(b, "replay", "--replay.file", testenv.SharedData(b, d.recording), "--chain.id", strconv.FormatUint(id, 10),
			"--replay.mode", "backfill", "--rpc.listen-address", rpcAddr)
		eventually(b, 60*time.Second, "replay source", func() bool {
			_, err := rpcCall("http://"+rpcAddr, "eth_blockNumber")
			return err == nil
		})
		entries = append(entries, fmt.Sprintf(`{"evmChainId":"%d","name":"Gunzilla as %d","network":"mainnet","rpcUrls":["http://%s"],
			"networkToken":{"name":"Gun","symbol":"GUN","decimals":18},"traces":true,"webhooks":true,"replay":true,"startBlock":%d}`,
			id, id, rpcAddr, first))
	}
	chainsFile := filepath.Join(b.TempDir(), "chains.json")
	if err := os.WriteFile(chainsFile, []byte(`{"chains":[`+strings.Join(entries, ",")+`]}`), 0o644); err != nil {
		b.Fatal(err)
	}
	common := []string{"--kafka.brokers", kcfg.Brokers, "--kafka.topic-prefix", kcfg.TopicPrefix, "--chains.file", chainsFile}
	ingestAdmin := freeAddr(b)
	ingest := start(b, "ingest", append(common, "--ops.listen-address", ingestAdmin)...)
	eventually(b, 5*time.Minute, "every chain produced", func() bool {
		got := scrape(b, "http://"+ingestAdmin+"/metrics", "moraine_ingest_last_produced_block")
		for _, id := range ids {
			if uint64(got[fmt.Sprintf(`{chain="%d"}`, id)]) != last {
				return false
			}
		}
		return true
	})
	ingest.stop(15 * time.Second)
	recorded := readTopic(b, kcfg, kcfg.Topic(topics.Blocks))
	// Produced as ingest produces (compression, batch size), each record to
	// the partition it was read from.
	copier, err := kafkautil.NewClient(b.Context(), testLogger(), append(kcfg.ProducerOpts(testLogger(), "scaling-copy"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		b.Fatal(err)
	}
	defer copier.Close()
	adm := kadm.NewClient(copier)

	results := map[int][]float64{}
	for round := 0; b.Loop(); round++ {
		for _, n := range counts {
			runtime.GC()
			ccfg, _ := testenv.ClickHouse(b)
			group := fmt.Sprintf("scaling-%d-%d-%s", round, n, testenv.Suffix())
			// Topics of the round's own: the instances find them empty.
			rcfg := kcfg
			rcfg.TopicPrefix = fmt.Sprintf("%sr%d-%d.", kcfg.TopicPrefix, round, n)
			roundArgs := []string{"--kafka.brokers", kcfg.Brokers, "--kafka.topic-prefix", rcfg.TopicPrefix, "--chains.file", chainsFile}
			var metrics []string
			var procs []*proc
			for i := 1; i <= n; i++ {
				admin := freeAddr(b)
				p := start(b, "processor", append(append([]string(nil), roundArgs...),
					"--clickhouse.addr", ccfg.Addr, "--clickhouse.database", ccfg.Database, "--clickhouse.compression", "none",
					"--processor.group", group, "--matcher.group", group+"-matcher",
					"--matcher.transactional-id", fmt.Sprintf("%s-%d", group, i), "--ops.listen-address", admin)...)
				if cpuCap > 0 {
					capCPU(b, p.cmd.Process.Pid, cpuCap, fmt.Sprintf("%s-%d", group, i))
				}
				procs = append(procs, p)
				metrics = append(metrics, "http://"+admin+"/metrics")
				waitReady(b, p, "http://"+admin+"/readyz", 5*time.Minute)
			}
			// Every instance a member of both groups, with partitions.
			for _, g := range []string{rcfg.TopicPrefix + group, rcfg.TopicPrefix + group + "-matcher"} {
				eventually(b, 5*time.Minute, "group "+g+" stable with every instance", func() bool {
					d, err := adm.DescribeGroups(b.Context(), g)
					if err != nil {
						return false
					}
					dg := d[g]
					return dg.State == "Stable" && len(dg.Members) == n
				})
			}
			copyRecords(b, copier, recorded, rcfg.Topic(topics.Blocks))
			// From the first record any instance consumed to the last block of
			// every chain written, from the metrics scraped every 10 ms (start-up
			// and the group's first assignment are left out: they cost the
			// same whatever the throughput).
			var began time.Time
			deadline := time.Now().Add(10 * time.Minute)
			for time.Now().Before(deadline) {
				done := 0
				written := map[string]float64{}
				for _, m := range metrics {
					for l, v := range scrape(b, m, "moraine_processor_last_written_block") {
						written[l] = max(written[l], v)
					}
					if began.IsZero() {
						for _, v := range scrape(b, m, "moraine_processor_records_consumed_total") {
							if v > 0 {
								began = time.Now()
							}
						}
					}
				}
				for _, id := range ids {
					if uint64(written[fmt.Sprintf(`{chain="%d"}`, id)]) == last {
						done++
					}
				}
				if done == len(ids) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			wall := time.Since(began)
			rate := float64(nChains*txs) / wall.Seconds()
			results[n] = append(results[n], rate)
			var used []string
			for _, p := range procs {
				used = append(used, fmt.Sprintf("%.2f", procCPU(p.cmd.Process.Pid)/wall.Seconds()))
			}
			capped := "uncapped"
			if cpuCap > 0 {
				capped = fmt.Sprintf("each capped at %.2f cores", cpuCap)
			}
			fmt.Printf("\nscaling round %d: %d processor instance(s) %s: %d chains x %d txs in %.2fs = %.0f tx/s; cores used per instance (start-up included) %s\n",
				round+1, n, capped, nChains, txs, wall.Seconds(), rate, strings.Join(used, ", "))
			for _, p := range procs {
				p.stop(15 * time.Second)
			}
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, _ = adm.DeleteTopics(dctx, topics.Names(rcfg.Topics())...)
			cancel()
		}
	}
	med := func(v []float64) float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		return s[(len(s)-1)/2]
	}
	base := med(results[counts[0]])
	var parts []string
	for _, n := range counts {
		parts = append(parts, fmt.Sprintf("%d instance(s) %.0f tx/s (%.2fx)", n, med(results[n]), med(results[n])/base))
	}
	capped := "uncapped"
	if cpuCap > 0 {
		capped = fmt.Sprintf("each instance capped at %.2f cores", cpuCap)
	}
	fmt.Printf("\nscaling result: %d chains at once, %s, median of %d rounds: %s\n", nChains, capped, len(results[counts[0]]), strings.Join(parts, ", "))
	most := counts[len(counts)-1]
	b.ReportMetric(med(results[most])/base, fmt.Sprintf("ratio-%d/%d", most, counts[0]))
}

// readTopic returns every committed record of a topic, partition by
// partition in offset order.
func readTopic(tb testing.TB, kcfg kafkautil.Config, topic string) []*kgo.Record {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kafkautil.NewClient(ctx, testLogger(), append(kcfg.BaseOpts(testLogger(), "scaling-read"),
		kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		tb.Fatal(err)
	}
	var out []*kgo.Record
	for !caughtUp(out, ends, topic) {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			tb.Fatalf("reading %s: %v", topic, ctx.Err())
		}
		out = append(out, f.Records()...)
	}
	return out
}

// caughtUp reports whether records reach the last stable end of every
// partition (the transaction markers after the last record are not
// records).
func caughtUp(records []*kgo.Record, ends kadm.ListedOffsets, topic string) bool {
	next := map[int32]int64{}
	for _, r := range records {
		next[r.Partition] = r.Offset + 1
	}
	done := true
	ends.Each(func(o kadm.ListedOffset) {
		if o.Topic == topic && o.Offset > 0 && next[o.Partition] < o.Offset-1 {
			done = false
		}
	})
	return done
}

// copyRecords produces records to topic, each to its partition, keys and
// headers kept.
func copyRecords(tb testing.TB, cl *kgo.Client, records []*kgo.Record, topic string) {
	out := make([]*kgo.Record, len(records))
	for i, r := range records {
		out[i] = &kgo.Record{Topic: topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, out...).FirstErr(); err != nil {
		tb.Fatalf("copy records to %s: %v", topic, err)
	}
}

// cpuCgroupRoot is the cgroup v1 cpu controller's mount.
const cpuCgroupRoot = "/sys/fs/cgroup/cpu"

// checkCPUCgroups reports whether capCPU can work here.
func checkCPUCgroups() error {
	dir := filepath.Join(cpuCgroupRoot, "moraine-bench-check-"+testenv.Suffix())
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	return os.Remove(dir)
}

// capCPU moves process pid (all its threads) into a new cgroup of its own
// whose CFS quota is cores CPUs, removed when the benchmark ends (once the
// process is gone).
func capCPU(tb testing.TB, pid int, cores float64, name string) {
	dir := filepath.Join(cpuCgroupRoot, "moraine-bench-"+name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatalf("cgroup: %v", err)
	}
	tb.Cleanup(func() { _ = os.Remove(dir) })
	const period = 100000 // µs
	for file, v := range map[string]int{"cpu.cfs_period_us": period, "cpu.cfs_quota_us": int(cores * period)} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.Itoa(v)), 0o644); err != nil {
			tb.Fatalf("cgroup %s: %v", file, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		tb.Fatalf("cgroup: move %d: %v", pid, err)
	}
}

// chainIDsOnDistinctPartitions returns n chain ids, from 43419 up, whose
// records land on n different partitions of the blocks topic (the
// producer's key partitioner: the record key is the decimal chain id).
func chainIDsOnDistinctPartitions(tb testing.TB, topic string, n int) []uint64 {
	spec, _ := topics.Lookup(topics.All, topics.Blocks)
	if int(spec.Partitions) < n {
		tb.Fatalf("the blocks topic has %d partitions, fewer than %d chains", spec.Partitions, n)
	}
	p := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	taken := map[int]bool{}
	var out []uint64
	for id := uint64(43419); len(out) < n && id < 43419+10000; id++ {
		part := p.Partition(&kgo.Record{Key: []byte(strconv.FormatUint(id, 10))}, int(spec.Partitions))
		if !taken[part] {
			taken[part] = true
			out = append(out, id)
		}
	}
	return out
}
