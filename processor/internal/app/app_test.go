package app

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/processor/internal/sink"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

func hashOf(branch string, n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	s := sha256.Sum256(append([]byte(branch), b[:]...))
	return s[:]
}

func testBlock(branch string, n uint64, txs int) *record.ChainEvent {
	b := &record.Block{ChainId: 43112, Number: n, Hash: hashOf(branch, n), ParentHash: hashOf(branch, n-1),
		Timestamp: 1700000000 + n, BaseFee: "25000000000", GasLimit: 15000000, BlockGasCost: "0", FeesSpent: "0"}
	for i := 0; i < txs; i++ {
		b.Transactions = append(b.Transactions, &record.Transaction{
			Hash: hashOf(branch+"tx", n*100+uint64(i)), Index: uint32(i), From: make([]byte, 20), To: make([]byte, 20),
			Value: "1", GasPrice: "1", Status: 1,
			Logs: []*record.Log{{Address: make([]byte, 20), Topics: [][]byte{make([]byte, 32)}, LogIndex: uint32(i)}},
			InternalTransactions: []*record.InternalTransaction{
				{CallIndex: "call_0", Type: "CALL", From: make([]byte, 20), To: make([]byte, 20), Value: "1"},
				{CallIndex: "call_0_0", TracePosition: 1, Depth: 1, Type: "STATICCALL", From: make([]byte, 20), To: make([]byte, 20), Value: "0"},
			},
		})
	}
	return &record.ChainEvent{Event: &record.ChainEvent_Block{Block: b}}
}

func produce(t *testing.T, kcfg kafkautil.Config, evs ...*record.ChainEvent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logger := testenv.Logger(t)
	cl, err := kafkautil.NewClient(ctx, logger, kcfg.ProducerOpts(logger, "test")...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, ev := range evs {
		b, err := codec.EncodeChainEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: kcfg.Topic(topics.Blocks), Key: []byte("43112"), Value: b})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// run is what cmd/processor does with cfg.
func run(ctx context.Context, cfg Config, logger *slog.Logger, reg *prometheus.Registry) error {
	a, err := New(cfg, Deps{Logger: logger, Registry: reg})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// startProcessor runs the processor until the returned stop is called.
func startProcessor(t *testing.T, kcfg kafkautil.Config, ccfg chclient.Config, group string) (stop func()) {
	cfg := Config{Kafka: kcfg, ClickHouse: ccfg, Sink: sink.Config{Enabled: true, Group: group, BatchRows: 100000,
		FlushInterval: 50 * time.Millisecond, InsertTimeout: 30 * time.Second}, ShutdownTimeout: 10 * time.Second}
	cfg.Ops.ListenAddress = freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, testenv.Logger(t), prometheus.NewRegistry()) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("processor: %v", err)
		}
	}
}

func count(t *testing.T, conn driver.Conn, q string, args ...any) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var n uint64
	if err := conn.QueryRow(ctx, q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSinkIntegration runs the processor against the real broker and
// ClickHouse: blocks arrive in ClickHouse, a full redelivery (a new consumer
// group replaying the topic from the start) adds no rows, and a reorg stops
// the orphaned blocks from being served.
func TestSinkIntegration(t *testing.T) {
	kcfg := testenv.Kafka(t)
	ccfg, conn := testenv.ClickHouse(t)

	var evs []*record.ChainEvent
	for n := uint64(1); n <= 20; n++ {
		evs = append(evs, testBlock("a", n, 3))
	}
	produce(t, kcfg, evs...)
	stop := startProcessor(t, kcfg, ccfg, "g1-"+testenv.Suffix())
	eventually(t, "20 blocks", func() bool {
		return count(t, conn, "SELECT count() FROM blocks FINAL WHERE removed = 0") == 20
	})
	stop()

	// Redelivery: a second group replays everything from offset 0.
	stop = startProcessor(t, kcfg, ccfg, "g2-"+testenv.Suffix())
	eventually(t, "replayed head", func() bool {
		return count(t, conn, "SELECT count() FROM chain_heads FINAL WHERE number = 20") == 1
	})
	time.Sleep(500 * time.Millisecond)
	for table, want := range map[string]uint64{"blocks": 20, "block_hashes": 20, "transactions_by_block": 60, "logs": 60, "internal_transactions": 120} {
		if got := count(t, conn, fmt.Sprintf("SELECT count() FROM %s FINAL", table)); got != want {
			t.Errorf("%s: %d rows after redelivery, want %d", table, got, want)
		}
	}

	// Reorg at 18: blocks 18..20 of branch a are orphaned, branch b replaces
	// them and goes one further.
	reorg := &record.Reorg{ChainId: 43112, ForkNumber: 18}
	for n := uint64(18); n <= 20; n++ {
		reorg.Orphaned = append(reorg.Orphaned, &record.OrphanedBlock{Number: n, Hash: hashOf("a", n)})
	}
	produce(t, kcfg, append([]*record.ChainEvent{{Event: &record.ChainEvent_Reorg{Reorg: reorg}}},
		testBlock("b", 18, 1), testBlock("b", 19, 1), testBlock("b", 20, 1), testBlock("b", 21, 1))...)
	eventually(t, "new head 21", func() bool {
		return count(t, conn, "SELECT count() FROM chain_heads FINAL WHERE number = 21") == 1
	})
	stop()
	if got := count(t, conn, "SELECT count() FROM blocks FINAL WHERE removed = 0"); got != 21 {
		t.Errorf("canonical blocks = %d, want 21", got)
	}
	for n := uint64(18); n <= 20; n++ {
		if got := count(t, conn, "SELECT count() FROM blocks FINAL WHERE removed = 0 AND number = ? AND hash = ?", n, string(hashOf("b", n))); got != 1 {
			t.Errorf("block %d: new branch not served", n)
		}
		if got := count(t, conn, "SELECT count() FROM block_hashes FINAL WHERE removed = 0 AND hash = ?", string(hashOf("a", n))); got != 0 {
			t.Errorf("block %d: orphaned hash still served", n)
		}
	}
	// Transactions are read through the canonical hash: block 18 has 1 tx now.
	if got := count(t, conn, "SELECT count() FROM transactions_by_block FINAL WHERE block_number = 18 AND block_hash = ?", string(hashOf("b", 18))); got != 1 {
		t.Errorf("block 18 canonical txs = %d, want 1", got)
	}
}
