package matcher

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// The processor's tests (package app) run the matcher against the real
// broker; these test its batch steps alone.

const devChain = 43112

// testConfig is the flag defaults.
func testConfig() Config {
	var c Config
	c.RegisterFlags(flag.NewFlagSet("matcher", flag.ContinueOnError))
	return c
}

func hashOf(branch string, n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	s := sha256.Sum256(append([]byte(branch), b[:]...))
	return s[:]
}

// testAddr is a deterministic address per name.
func testAddr(name string) []byte { return hashOf("addr:"+name, 0)[:20] }

func hexAddr(b []byte) string { return "0x" + hex.EncodeToString(b) }

// webhookRec and addressRec build address-watch records as the query
// service writes them.
func webhookRec(kcfg kafkautil.Config, id string, active, logs, internal bool, sigs ...[]byte) *kgo.Record {
	status := record.WebhookStatus_WEBHOOK_STATUS_INACTIVE
	if active {
		status = record.WebhookStatus_WEBHOOK_STATUS_ACTIVE
	}
	v, err := codec.EncodeWatchEntry(&record.WatchEntry{Version: 1, Entry: &record.WatchEntry_Webhook{Webhook: &record.WatchedWebhook{
		WebhookId: id, AccountId: "acc-" + id, ChainId: devChain, EventType: "address_activity", Status: status,
		Url: "http://127.0.0.1:1/hook", IncludeLogs: logs, IncludeInternalTxs: internal, EventSignatures: sigs,
	}}})
	if err != nil {
		panic(err)
	}
	return &kgo.Record{Topic: kcfg.Topic(topics.AddressWatch), Key: []byte(codec.WatchWebhookKey(id)), Value: v}
}

func addressRec(kcfg kafkautil.Config, id string, a []byte) *kgo.Record {
	v, err := codec.EncodeWatchEntry(&record.WatchEntry{Version: 1, Entry: &record.WatchEntry_Address{Address: &record.WatchedAddress{
		WebhookId: id, ChainId: devChain, Address: a,
	}}})
	if err != nil {
		panic(err)
	}
	return &kgo.Record{Topic: kcfg.Topic(topics.AddressWatch), Key: []byte(codec.WatchAddressKey(id, hexAddr(a))), Value: v}
}

// block builds block n of the dev chain from txs (hashes, indexes, log
// indexes and timestamps filled in).
func block(n uint64, txs ...*record.Transaction) *record.ChainEvent {
	b := &record.Block{ChainId: devChain, Number: n, Hash: hashOf("blk", n), ParentHash: hashOf("blk", n-1), Timestamp: 1700000000 + n,
		ReceiptsRoot: hashOf("rr", n), BaseFee: "25000000000", GasLimit: 15000000, BlockGasCost: "0", FeesSpent: "0",
		FetchedAtUnixMs: time.Now().UnixMilli()}
	logIndex := uint32(0)
	for i, tx := range txs {
		tx.Hash = hashOf(fmt.Sprintf("tx:%d", n), uint64(i))
		tx.Index = uint32(i)
		tx.Status, tx.Gas, tx.GasUsed, tx.Value = 1, 100000, 21000, "0"
		tx.GasPrice, tx.MaxFeePerGas, tx.MaxPriorityFeePerGas, tx.EffectiveGasPrice = "25000000000", "25000000000", "25000000000", "25000000000"
		for _, l := range tx.Logs {
			l.LogIndex = logIndex
			logIndex++
		}
		b.Transactions = append(b.Transactions, tx)
	}
	return &record.ChainEvent{Event: &record.ChainEvent_Block{Block: b}}
}

// metricSum is the sum of a gathered counter or gauge family.
func metricSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		sum := 0.0
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
		return sum
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// TestNotReadyBeforeWatchTable: the processor's /readyz fails on
// "watchlist" until the watch table has caught up.
func TestNotReadyBeforeWatchTable(t *testing.T) {
	health := obs.NewHealth()
	reg := prometheus.NewRegistry()
	if _, err := New(testConfig(), Deps{Logger: testenv.Logger(t), Registerer: reg, Health: health}); err != nil {
		t.Fatal(err)
	}
	failed := health.Check(t.Context())
	if _, ok := failed["watchlist"]; !ok {
		t.Fatalf("ready before the watch table was read: %v", failed)
	}
	if v := metricSum(t, reg, "moraine_processor_watchlist_ready"); v != 0 {
		t.Fatalf("watchlist_ready = %v", v)
	}
}

// fakeReader stands in for the TableReader: CatchUp applies the records
// "in the topic" that the table has not read yet, or fails.
type fakeReader struct {
	pending []*kgo.Record
	apply   func(*kgo.Record)
	err     error
	calls   int
}

func (f *fakeReader) Run(ctx context.Context) error   { <-ctx.Done(); return nil }
func (f *fakeReader) Ready() bool                     { return true }
func (f *fakeReader) WaitReady(context.Context) error { return nil }
func (f *fakeReader) CatchUp(context.Context) error {
	f.calls++
	if f.err != nil {
		return f.err
	}
	for _, r := range f.pending {
		f.apply(r)
	}
	f.pending = nil
	return nil
}

// TestBatchCatchesUpBeforeMatching: an address change already in the topic
// (acknowledged) but not yet read by the table is applied before the batch
// is matched, so the block right after the change matches it; when the
// catch-up fails the batch is matched anyway and the failure counted.
func TestBatchCatchesUpBeforeMatching(t *testing.T) {
	kcfg := kafkautil.Config{Brokers: "127.0.0.1:1"}
	W, U := testAddr("w"), testAddr("u")
	const hook = "aaaaaaaa-0000-4000-8000-0000000000cc"
	ev, err := codec.EncodeChainEvent(block(7, &record.Transaction{From: W, To: U}))
	if err != nil {
		t.Fatal(err)
	}
	records := []*kgo.Record{{Topic: kcfg.Topic(topics.Blocks), Value: ev}}
	for _, tc := range []struct {
		name     string
		fail     bool
		wantMsgs int
	}{
		{name: "caught up", wantMsgs: 1},
		{name: "catch-up failed", fail: true, wantMsgs: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := New(testConfig(), Deps{Logger: testenv.Logger(t), Registerer: reg, Kafka: kcfg, Health: obs.NewHealth()})
			if err != nil {
				t.Fatal(err)
			}
			fr := &fakeReader{apply: m.table.ApplyRecord,
				pending: []*kgo.Record{webhookRec(kcfg, hook, true, false, false), addressRec(kcfg, hook, W)}}
			if tc.fail {
				fr.err = context.DeadlineExceeded
			}
			m.reader = fr
			m.streamReader = &fakeReader{}
			all, counts, err := m.prepare(t.Context(), records, m.streams.Begin(0))
			if err != nil {
				t.Fatal(err)
			}
			var out []*kgo.Record
			for _, r := range all {
				if r.Topic == kcfg.Topic(topics.Activity) {
					out = append(out, r)
				}
			}
			if fr.calls != 1 || len(out) != tc.wantMsgs || counts.perChain[devChain] != tc.wantMsgs {
				t.Fatalf("CatchUp calls %d, %d messages (%v), want %d", fr.calls, len(out), counts.perChain, tc.wantMsgs)
			}
			if tc.fail {
				if v := metricSum(t, reg, "moraine_processor_watchlist_catchup_timeouts_total"); v != 1 {
					t.Fatalf("catchup_timeouts_total = %v", v)
				}
				return
			}
			a, err := codec.DecodeActivity(out[0].Value)
			if err != nil || a.WebhookId != hook || string(out[0].Key) != hook || out[0].Topic != kcfg.Topic(topics.Activity) || a.Sequence != 1 {
				t.Fatalf("activity %+v, %v", a, err)
			}
		})
	}
}

// TestBatchSettlesStateInDoubt: after a transaction whose end is in doubt
// (it committed number 1 of the webhook, unknown to the state), the next
// batch takes the numbering lock before it catches the stream state up, so
// it numbers after the committed message and may commit (not Doubted).
func TestBatchSettlesStateInDoubt(t *testing.T) {
	kcfg := kafkautil.Config{Brokers: "127.0.0.1:1"}
	W, U := testAddr("w"), testAddr("u")
	const hook = "aaaaaaaa-0000-4000-8000-0000000000dd"
	m, err := New(testConfig(), Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(), Kafka: kcfg, Health: obs.NewHealth()})
	if err != nil {
		t.Fatal(err)
	}
	m.table.ApplyRecord(webhookRec(kcfg, hook, true, false, false))
	m.table.ApplyRecord(addressRec(kcfg, hook, W))
	m.reader = &fakeReader{}

	doubtful := m.streams.Begin(0)
	doubtful.Block(1, devChain, 6, hashOf("blk", 6), []*record.Activity{{WebhookId: hook, MessageId: "m6", ChainId: devChain,
		BlockNumber: 6, BlockHash: hashOf("blk", 6), TxHash: hashOf("tx:6", 0)}}, func(string) uint32 { return 0 })
	committed, err := doubtful.Records(kcfg.Topic(topics.Activity), kcfg.Topic(topics.WebhookStreams))
	if err != nil {
		t.Fatal(err)
	}
	m.streams.AbortInDoubt(doubtful)
	var stream []*kgo.Record
	for _, r := range committed {
		if r.Topic == kcfg.Topic(topics.WebhookStreams) {
			stream = append(stream, r)
		}
	}
	m.streamReader = &fakeReader{apply: m.streams.ApplyRecord, pending: stream}

	ev, err := codec.EncodeChainEvent(block(7, &record.Transaction{From: W, To: U}))
	if err != nil {
		t.Fatal(err)
	}
	sb := m.streams.Begin(0)
	all, _, err := m.prepare(t.Context(), []*kgo.Record{{Topic: kcfg.Topic(topics.Blocks), Value: ev}}, sb)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Doubted() || m.streams.InDoubt() {
		t.Fatalf("batch doubted %v, state in doubt %v after prepare", sb.Doubted(), m.streams.InDoubt())
	}
	for _, r := range all {
		if r.Topic != kcfg.Topic(topics.Activity) {
			continue
		}
		a, err := codec.DecodeActivity(r.Value)
		if err != nil || a.Sequence != 2 {
			t.Fatalf("activity %+v, %v: want sequence 2, after the committed 1", a, err)
		}
		m.streams.Commit(sb)
		return
	}
	t.Fatal("no activity")
}

// TestBatchAbortsWithoutStreamState: a batch whose webhook-stream state
// cannot be read up to date is not matched (its numbers could repeat the
// previous owner's): prepare fails, and the matcher aborts the transaction.
func TestBatchAbortsWithoutStreamState(t *testing.T) {
	kcfg := kafkautil.Config{Brokers: "127.0.0.1:1"}
	reg := prometheus.NewRegistry()
	m, err := New(testConfig(), Deps{Logger: testenv.Logger(t), Registerer: reg, Kafka: kcfg, Health: obs.NewHealth()})
	if err != nil {
		t.Fatal(err)
	}
	m.reader = &fakeReader{}
	m.streamReader = &fakeReader{err: context.DeadlineExceeded}
	ev, err := codec.EncodeChainEvent(block(7))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.prepare(t.Context(), []*kgo.Record{{Value: ev}}, m.streams.Begin(0)); err == nil {
		t.Fatal("prepare matched without the stream state")
	}
	if v := metricSum(t, reg, "moraine_processor_stream_catchup_failures_total"); v != 1 {
		t.Fatalf("stream_catchup_failures_total = %v", v)
	}
}
