package app

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/process"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// childEnv makes the test binary run the processor instead of the tests:
// the crash test re-executes itself to get a process it can SIGKILL. The
// flags come JSON-encoded in childArgsEnv.
const (
	childEnv     = "MORAINE_TEST_PROCESSOR_CHILD"
	childArgsEnv = "MORAINE_TEST_PROCESSOR_CHILD_ARGS"
	// childDelayEnv sets testHookBeforeEnd to a sleep of this duration.
	childDelayEnv = "MORAINE_TEST_PROCESSOR_CHILD_COMMIT_DELAY"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// runChild is cmd/processor's main with flags from the environment.
func runChild() int {
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(childArgsEnv)), &args); err != nil {
		fmt.Fprintln(os.Stderr, "child args:", err)
		return 2
	}
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("processor", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := process.ParseWithEnv(fs, args, "MORAINE"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	logger, err := obs.NewLogger(cfg.Log, os.Stderr, "processor")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if d, err := time.ParseDuration(os.Getenv(childDelayEnv)); err == nil {
		testHookBeforeEnd = func() bool { time.Sleep(d); return false }
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, logger, obs.NewRegistry("processor")); err != nil {
		logger.Error("processor exited", "err", err)
		return 1
	}
	return 0
}

// child is one run of the processor in a separate process.
type child struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
}

func startChild(t *testing.T, args []string) *child {
	t.Helper()
	enc, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// Records stay uncommitted for 25 ms more per batch, so that kills land
	// inside transactions often; the guarantee under test does not depend
	// on the delay.
	cmd.Env = append(os.Environ(), childEnv+"=1", childArgsEnv+"="+string(enc), childDelayEnv+"=25ms")
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, out: out, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	return c
}

// startCrashTest starts the child processor with args, and a producer for
// the test's traffic. The children's output (the test appends each killed
// run's) is logged if the test fails.
func startCrashTest(t *testing.T, kcfg kafkautil.Config, args []string) (*child, *strings.Builder, *kgo.Client) {
	logs := &strings.Builder{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("child output:\n%s", logs.String())
		}
	})
	cur := startChild(t, args)
	logger := testenv.Logger(t)
	prod, err := kafkautil.NewClient(t.Context(), logger, kcfg.ProducerOpts(logger, "test-blocks")...)
	if err != nil {
		cur.kill()
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	return cur, logs, prod
}

func (c *child) kill() { _ = c.cmd.Process.Signal(syscall.SIGKILL); <-c.done }

func (c *child) stop(t *testing.T) {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Errorf("child did not stop on SIGTERM")
		c.kill()
	}
}

// TestMatcherCrashIntegration kills the matcher with SIGKILL again and
// again while blocks arrive, restarting it each time under the same
// transactional id, and then checks the committed activity (what delivery
// reads, read_committed) against the ledger of expected (webhook,
// transaction) pairs: every one is present, nothing else is, and none is
// duplicated (any duplicate would have to carry the same messageId).
func TestMatcherCrashIntegration(t *testing.T) {
	kcfg := testenv.Kafka(t)
	const (
		hookA, hookB = "aaaaaaaa-0000-4000-8000-00000000000a", "bbbbbbbb-0000-4000-8000-00000000000b"
		blocks       = 240
		txsPerBlock  = 40
		addrs        = 20
	)
	watchedA := func(i int) []byte { return testAddr(fmt.Sprintf("a%d", i)) }
	watchedB := func(i int) []byte { return testAddr(fmt.Sprintf("b%d", i)) }
	recs := []*kgo.Record{webhookRec(kcfg, hookA, true, true, false), webhookRec(kcfg, hookB, true, false, true)}
	for i := 0; i < addrs; i++ {
		recs = append(recs, addressRec(kcfg, hookA, watchedA(i)), addressRec(kcfg, hookB, watchedB(i)))
	}
	produceRecords(t, kcfg, recs...)

	// The ledger: tx seq is watched by A (sender) when seq%3 == 0 and by B
	// (an internal call's recipient; B includes internal transactions) when
	// seq%4 == 0.
	ledger := map[string]bool{}
	var evs []*record.ChainEvent
	for n := uint64(1); n <= blocks; n++ {
		var txs []*record.Transaction
		for i := 0; i < txsPerBlock; i++ {
			seq := int(n)*txsPerBlock + i
			tx := &record.Transaction{From: testAddr(fmt.Sprintf("u%d", seq)), To: testAddr("router")}
			callee := testAddr("pool")
			if seq%3 == 0 {
				tx.From = watchedA(seq % addrs)
				ledger[hookA+"/"+txHashOf(n, i)] = true
			}
			if seq%4 == 0 {
				callee = watchedB(seq % addrs)
				ledger[hookB+"/"+txHashOf(n, i)] = true
			}
			tx.InternalTransactions = []*record.InternalTransaction{
				{Type: "CALL", From: tx.From, To: tx.To, Value: "0"},
				{Type: "CALL", From: tx.To, To: callee, Value: "0", TracePosition: 1, Depth: 1},
			}
			txs = append(txs, tx)
		}
		evs = append(evs, block(n, txs...))
	}

	args := []string{
		"--kafka.brokers=" + kcfg.Brokers, "--kafka.topic-prefix=" + kcfg.TopicPrefix,
		"--processor.sink-enabled=false", "--ledger.enabled=false", "--replay.enabled=false",
		"--matcher.group=crash-" + testenv.Suffix(), "--matcher.transactional-id=crash-" + testenv.Suffix(),
		"--matcher.max-poll-records=20",
		"--chains.file=" + chainsFile(t, "http://127.0.0.1:1"),
		"--ops.listen-address=127.0.0.1:0", "--log.level=warn",
	}
	cur, logs, prod := startCrashTest(t, kcfg, args)

	// Traffic: the blocks arrive over about 12 s, one ProduceSync each,
	// while the killer below SIGKILLs the matcher every 1-2.5 s.
	trafficDone := make(chan struct{})
	var trafficErr error
	go func() {
		defer close(trafficDone)
		for _, ev := range evs {
			v, err := codec.EncodeChainEvent(ev)
			if err == nil {
				err = prod.ProduceSync(t.Context(), &kgo.Record{Topic: kcfg.Topic(topics.Blocks), Key: []byte("43112"), Value: v}).FirstErr()
			}
			if err != nil {
				trafficErr = err
				return
			}
			time.Sleep(40 * time.Millisecond)
		}
	}()
	// Kills alternate: one at a random moment, which leaves a backlog of
	// blocks; then, right after the restart, one as soon as activity of the
	// restarted matcher appears uncommitted (the records of a transaction
	// in flight are visible to read_uncommitted readers before its commit
	// marker) while it works through that backlog in large batches: that
	// one lands inside a transaction most of the time.
	watcher := newActivityReader(t, kcfg, kgo.ReadUncommitted())
	kills := 0
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
kill:
	for {
		if kills%2 == 0 {
			select {
			case <-trafficDone:
				break kill
			case <-time.After(time.Duration(800+r.IntN(1200)) * time.Millisecond):
			}
		} else {
			for watcher.pollNew(t, 50*time.Millisecond) {
				// Skip what the previous run wrote.
			}
			for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
				if watcher.pollNew(t, 100*time.Millisecond) {
					break
				}
			}
		}
		cur.kill()
		kills++
		logs.WriteString(fmt.Sprintf("--- run %d (SIGKILL)\n%s", kills, cur.out.String()))
		cur = startChild(t, args)
	}
	if trafficErr != nil {
		t.Fatalf("producing blocks: %v", trafficErr)
	}
	t.Logf("%d blocks produced; matcher SIGKILLed %d times", blocks, kills)
	if kills < 3 {
		t.Errorf("only %d kills during traffic; the test did not exercise crashes", kills)
	}

	reader := newActivityReader(t, kcfg, kgo.ReadCommitted())
	reader.waitFor(t, fmt.Sprintf("all %d expected messages", len(ledger)), 90*time.Second, func(as []activity) bool {
		seen := pairs(as)
		for k := range ledger {
			if seen[k] == 0 {
				return false
			}
		}
		return true
	})
	cur.stop(t)
	logs.WriteString("--- last run\n" + cur.out.String())

	// Read everything committed up to the end of every partition.
	ends := endOffsets(t, kcfg)
	drain := newActivityReader(t, kcfg, kgo.ReadCommitted())
	raw := newActivityReader(t, kcfg, kgo.ReadUncommitted())
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		drain.poll(t, 500*time.Millisecond)
		raw.poll(t, 500*time.Millisecond)
		if reachedAll(raw.all(), ends) {
			break
		}
	}
	drain.poll(t, time.Second)
	got := drain.all()
	counts := pairs(got)
	ids := map[string]string{}
	dups := 0
	for _, a := range got {
		k := a.rec.WebhookId + "/" + hex.EncodeToString(a.rec.TxHash)
		if prev, ok := ids[k]; ok && prev != a.rec.MessageId {
			t.Errorf("%s: duplicate with another messageId (%s, %s)", k, prev, a.rec.MessageId)
		}
		ids[k] = a.rec.MessageId
		if a.rec.MessageId != codec.ActivityMessageID(a.rec.WebhookId, a.rec.ChainId, a.rec.TxHash) {
			t.Errorf("%s: messageId not derived from (webhook, chain, tx)", k)
		}
	}
	for k, n := range counts {
		if !ledger[k] {
			t.Errorf("unexpected message %s", k)
		}
		if n > 1 {
			dups += n - 1
		}
	}
	missing := 0
	for k := range ledger {
		if counts[k] == 0 {
			missing++
		}
	}
	t.Logf("ledger %d messages; committed %d records, %d missing, %d duplicates; %d records written in total (%d in aborted transactions)",
		len(ledger), len(got), missing, dups, len(raw.all()), len(raw.all())-len(got))
	if missing > 0 {
		t.Errorf("%d expected messages missing", missing)
	}
	if dups > 0 {
		t.Errorf("%d duplicates in committed activity: transactions should prevent them", dups)
	}
	if len(raw.all()) == len(got) {
		t.Errorf("no kill landed inside a transaction (no aborted activity records): the test did not exercise the case it is for")
	}
	checkSequences(t, got)
}

// checkSequences checks the webhook stream's numbering on committed
// activity: each webhook's messages, in topic order (one partition per
// webhook), are numbered 1, 2, 3, ... with no gap and no repeat, whatever
// crashed or aborted in between.
func checkSequences(t *testing.T, got []activity) {
	t.Helper()
	byHook := map[string][]activity{}
	for _, a := range got {
		byHook[a.rec.WebhookId] = append(byHook[a.rec.WebhookId], a)
	}
	for hook, as := range byHook {
		slices.SortFunc(as, func(x, y activity) int { return cmp.Compare(x.raw.Offset, y.raw.Offset) })
		for i, a := range as {
			if a.raw.Partition != as[0].raw.Partition {
				t.Errorf("webhook %s: messages on partitions %d and %d", hook, as[0].raw.Partition, a.raw.Partition)
			}
			if a.rec.Sequence != uint64(i+1) {
				t.Errorf("webhook %s: message %d in topic order has sequence %d", hook, i+1, a.rec.Sequence)
				break
			}
		}
	}
}

// reachedAll reports whether records up to every partition's end offset
// were read.
func reachedAll(as []activity, ends map[int32]int64) bool {
	next := map[int32]int64{}
	for _, a := range as {
		if a.raw.Offset+1 > next[a.raw.Partition] {
			next[a.raw.Partition] = a.raw.Offset + 1
		}
	}
	for p, end := range ends {
		// The last offset of a partition may be a transaction marker,
		// which consumers do not see.
		if end > 0 && next[p] < end-1 {
			return false
		}
	}
	return true
}
