package app

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/topics"
)

// TestSinkCrashIntegration kills the sink with SIGKILL again and again
// while blocks arrive, restarting it each time in the same group, and
// checks what readers rely on throughout and at the end:
//   - while it runs: the chain head is never ahead of its blocks, and every
//     block in ClickHouse has all of its transactions, logs and call frames
//     (children go in before blocks, blocks before the head, even though a
//     batch's blocks are written while the next batch's children are);
//   - at the end: every block and child row exactly once (FINAL), however
//     many batches were written twice after a kill.
//
// With throttled set, the write budget is on and reads keep ClickHouse busy
// while the blocks (from 2023: backfill) arrive, so batches wait between
// their inserts: throttling must change when rows are written, never which.
func TestSinkCrashIntegration(t *testing.T) {
	t.Run("unthrottled", func(t *testing.T) { testSinkCrash(t, false) })
	t.Run("throttled", func(t *testing.T) { testSinkCrash(t, true) })
}

func testSinkCrash(t *testing.T, throttled bool) {
	kcfg := testenv.Kafka(t)
	ccfg, conn := testenv.ClickHouse(t)
	const (
		blocks      = 300
		txsPerBlock = 3 // testBlock: one log and two call frames per transaction
	)
	args := []string{
		"--kafka.brokers=" + kcfg.Brokers, "--kafka.topic-prefix=" + kcfg.TopicPrefix,
		"--clickhouse.addr=" + ccfg.Addr, "--clickhouse.database=" + ccfg.Database,
		"--matcher.enabled=false", "--processor.group=sink-crash-" + testenv.Suffix(),
		// Small batches: many hand-overs between the two writing goroutines.
		"--processor.batch-rows=200", "--processor.flush-interval=20ms",
		"--ops.listen-address=127.0.0.1:0", "--log.level=warn",
	}
	if throttled {
		// The lowest target allowed, under reads that take both cores: the
		// probe is over it most of the time.
		args = append(args, "--processor.read-latency-target=5ms", "--processor.backfill-min-share=0.2", "--log.level=info")
		stopReads := busyReads(t, conn)
		defer stopReads()
	}
	cur, logs, prod := startCrashTest(t, kcfg, args)
	// Traffic: about 6 s of blocks, in bursts of 10 so batches hold several.
	trafficDone := make(chan struct{})
	var trafficErr error
	go func() {
		defer close(trafficDone)
		for n := uint64(1); n <= blocks && trafficErr == nil; n += 10 {
			var recs []*kgo.Record
			for i := n; i < n+10; i++ {
				v, err := codec.EncodeChainEvent(testBlock("a", i, txsPerBlock))
				if err != nil {
					trafficErr = err
					return
				}
				recs = append(recs, &kgo.Record{Topic: kcfg.Topic(topics.Blocks), Key: []byte("43112"), Value: v})
			}
			trafficErr = prod.ProduceSync(t.Context(), recs...).FirstErr()
			time.Sleep(200 * time.Millisecond)
		}
	}()

	// The invariants hold at every moment; check them between kills.
	checks := 0
	check := func() {
		checks++
		head := count(t, conn, "SELECT max(number) FROM chain_heads FINAL WHERE chain_id = 43112")
		if got := count(t, conn, "SELECT count() FROM blocks FINAL WHERE chain_id = 43112 AND number <= ? AND removed = 0", head); got != head {
			t.Errorf("head %d, but %d blocks at or below it", head, got)
		}
		// The blocks up to the highest one seen now: the sink may be running
		// (the final wait) and write more blocks between the two queries,
		// but only above that number, since a chain's blocks arrive in order.
		top := count(t, conn, "SELECT max(number) FROM blocks FINAL WHERE chain_id = 43112 AND removed = 0")
		nBlocks := count(t, conn, "SELECT count() FROM blocks FINAL WHERE chain_id = 43112 AND removed = 0 AND number <= ?", top)
		for table, perTx := range map[string]uint64{"transactions_by_block": 1, "logs": 1, "internal_transactions": 2} {
			q := fmt.Sprintf("SELECT count() FROM %s FINAL WHERE chain_id = 43112 AND (block_number, block_hash) IN (SELECT number, hash FROM blocks FINAL WHERE chain_id = 43112 AND removed = 0 AND number <= %d)", table, top)
			if got, want := count(t, conn, q), nBlocks*txsPerBlock*perTx; got != want {
				t.Errorf("%s: %d rows for the %d blocks in ClickHouse, want %d", table, got, nBlocks, want)
			}
		}
	}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	kills := 0
kill:
	for {
		select {
		case <-trafficDone:
			break kill
		case <-time.After(time.Duration(300+r.IntN(700)) * time.Millisecond):
		}
		cur.kill()
		kills++
		logs.WriteString(fmt.Sprintf("--- run %d (SIGKILL)\n%s", kills, cur.out.String()))
		check()
		cur = startChild(t, args)
	}
	if trafficErr != nil {
		t.Fatalf("producing blocks: %v", trafficErr)
	}
	eventually(t, "the last block's head", func() bool {
		check()
		return count(t, conn, "SELECT count() FROM chain_heads FINAL WHERE chain_id = 43112 AND number = ?", uint64(blocks)) == 1
	})
	cur.stop(t)
	logs.WriteString("--- last run\n" + cur.out.String())
	t.Logf("%d blocks; sink SIGKILLed %d times; invariants checked %d times", blocks, kills, checks)
	if throttled && !strings.Contains(logs.String(), "write budget: backfill gives way to reads") {
		t.Errorf("the write budget never throttled the backfill: the test did not exercise it")
	}
	if kills < 3 {
		t.Errorf("only %d kills during traffic; the test did not exercise crashes", kills)
	}
	for table, want := range map[string]uint64{"blocks": blocks, "block_hashes": blocks, "transactions_by_block": blocks * txsPerBlock,
		"logs": blocks * txsPerBlock, "internal_transactions": 2 * blocks * txsPerBlock} {
		if got := count(t, conn, fmt.Sprintf("SELECT count() FROM %s FINAL", table)); got != want {
			t.Errorf("%s: %d rows, want %d", table, got, want)
		}
	}
}

// busyReads runs reads that keep ClickHouse's CPUs busy (two at a time,
// each a few hundred milliseconds of hashing) until the returned func is
// called.
func busyReads(t *testing.T, conn driver.Conn) func() {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				var n uint64
				_ = conn.QueryRow(ctx, "SELECT sum(cityHash64(number)) FROM numbers(20000000)").Scan(&n)
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}
