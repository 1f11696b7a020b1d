package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/topics"
)

// BenchmarkProcessorScaling measures how the processor's throughput grows
// from one instance to two when several chains are written at once. Four
// chains (the Gunzilla recording served under four chain ids, chosen so
// that each lands on its own partition of the blocks topic) are produced
// to Kafka first by one ingest; then, for each round, 1 or 2 processor
// instances (sink and matcher, fresh consumer groups, a fresh database)
// write them all to ClickHouse, and the round is timed from the first
// block written to the last one of every chain. Rounds alternate 1 and 2
// instances (-benchtime Nx runs N of each) and the medians are reported.
//
// One chain is one partition, and a partition is consumed by one instance
// at a time, in order: that is what caps one chain's throughput (one
// instance's decode and insert loop, and ClickHouse's insert speed), and
// why several chains are needed to use a second instance.
func BenchmarkProcessorScaling(b *testing.B) {
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

	results := map[int][]float64{}
	for round := 0; b.Loop(); round++ {
		for _, n := range []int{1, 2} {
			runtime.GC()
			ccfg, _ := testenv.ClickHouse(b)
			group := fmt.Sprintf("scaling-%d-%d-%s", round, n, testenv.Suffix())
			var metrics []string
			var procs []*proc
			for i := 1; i <= n; i++ {
				admin := freeAddr(b)
				procs = append(procs, start(b, "processor", append(append([]string(nil), common...),
					"--clickhouse.addr", ccfg.Addr, "--clickhouse.database", ccfg.Database, "--clickhouse.compression", "none",
					"--processor.group", group, "--matcher.group", group+"-matcher",
					"--matcher.transactional-id", fmt.Sprintf("%s-%d", group, i), "--ops.listen-address", admin)...))
				metrics = append(metrics, "http://"+admin+"/metrics")
			}
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
			fmt.Printf("\nscaling round %d: %d processor instance(s): %d chains x %d txs in %.2fs = %.0f tx/s\n",
				round+1, n, nChains, txs, wall.Seconds(), rate)
			for _, p := range procs {
				p.stop(15 * time.Second)
			}
		}
	}
	med := func(v []float64) float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		return s[(len(s)-1)/2]
	}
	one, two := med(results[1]), med(results[2])
	fmt.Printf("\nscaling result: %d chains at once, median of %d rounds: 1 instance %.0f tx/s, 2 instances %.0f tx/s, ratio %.2f\n",
		nChains, len(results[1]), one, two, two/one)
	b.ReportMetric(two/one, "ratio")
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
