package app

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

const devChain = 43112

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

func tombstoneRec(kcfg kafkautil.Config, id string, a []byte) *kgo.Record {
	return &kgo.Record{Topic: kcfg.Topic(topics.AddressWatch), Key: []byte(codec.WatchAddressKey(id, hexAddr(a)))}
}

// produceRecords produces synchronously: when it returns the records are
// acknowledged, as the query service's are before it answers.
func produceRecords(t *testing.T, kcfg kafkautil.Config, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logger := testenv.Logger(t)
	cl, err := kafkautil.NewClient(ctx, logger, kcfg.ProducerOpts(logger, "test-watch")...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
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

func txHashOf(n uint64, i int) string {
	return hex.EncodeToString(hashOf(fmt.Sprintf("tx:%d", n), uint64(i)))
}

// fakeNode answers eth_call name()/symbol()/decimals() for one token.
func fakeNode(t *testing.T, token []byte, name, symbol string, decimals int) string {
	abiString := func(s string) string {
		w := func(n int) string { return fmt.Sprintf("%064x", n) }
		padded := make([]byte, (len(s)+31)/32*32)
		copy(padded, s)
		return "0x" + w(32) + w(len(s)) + hex.EncodeToString(padded)
	}
	answers := map[string]string{
		hexAddr(token) + "0x06fdde03": abiString(name),
		hexAddr(token) + "0x95d89b41": abiString(symbol),
		hexAddr(token) + "0x313ce567": fmt.Sprintf("0x%064x", decimals),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var reqs []struct {
			ID     int `json:"id"`
			Params []json.RawMessage
		}
		_ = json.NewDecoder(r.Body).Decode(&reqs)
		var out []map[string]any
		for _, q := range reqs {
			var args struct{ To, Data string }
			_ = json.Unmarshal(q.Params[0], &args)
			if res, ok := answers[strings.ToLower(args.To)+args.Data]; ok {
				out = append(out, map[string]any{"jsonrpc": "2.0", "id": q.ID, "result": res})
			} else {
				out = append(out, map[string]any{"jsonrpc": "2.0", "id": q.ID, "error": map[string]any{"code": 3, "message": "execution reverted"}})
			}
		}
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// chainsFile writes a chains file for the dev chain with rpcURL.
func chainsFile(t *testing.T, rpcURL string) string {
	p := filepath.Join(t.TempDir(), "chains.json")
	body := fmt.Sprintf(`{"chains":[{"evmChainId":"%d","name":"Test","network":"devnet","rpcUrls":[%q],
		"networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},"traces":true,"webhooks":true}]}`, devChain, rpcURL)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// activity is one consumed activity record.
type activity struct {
	rec *record.Activity
	raw *kgo.Record
}

// activityReader reads the activity topic from the start, read_committed.
type activityReader struct {
	cl  *kgo.Client
	mu  sync.Mutex
	got []activity
}

func newActivityReader(t *testing.T, kcfg kafkautil.Config, isolation kgo.IsolationLevel) *activityReader {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(kcfg.SeedBrokers()...),
		kgo.ConsumeTopics(kcfg.Topic(topics.Activity)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(isolation),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &activityReader{cl: cl}
}

// poll reads what is available within d.
func (r *activityReader) poll(t *testing.T, d time.Duration) { r.pollNew(t, d) }

// pollNew is poll, reporting whether it read anything.
func (r *activityReader) pollNew(t *testing.T, d time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	fs := r.cl.PollFetches(ctx)
	if fs.NumRecords() == 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fs.EachRecord(func(rec *kgo.Record) {
		a, err := codec.DecodeActivity(rec.Value)
		if err != nil {
			t.Errorf("undecodable activity at %d/%d: %v", rec.Partition, rec.Offset, err)
			return
		}
		r.got = append(r.got, activity{rec: a, raw: rec})
	})
	return true
}

// waitFor polls until cond holds on what was read, or fails after timeout.
func (r *activityReader) waitFor(t *testing.T, what string, timeout time.Duration, cond func([]activity) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r.poll(t, 500*time.Millisecond)
		r.mu.Lock()
		ok := cond(r.got)
		n := len(r.got)
		r.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (%d activity records read)", what, n)
		}
	}
}

func (r *activityReader) all() []activity {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]activity(nil), r.got...)
}

// pairs counts activity records per "webhook/txhash".
func pairs(as []activity) map[string]int {
	out := map[string]int{}
	for _, a := range as {
		out[a.rec.WebhookId+"/"+hex.EncodeToString(a.rec.TxHash)]++
	}
	return out
}

func has(n int) func([]activity) bool {
	return func(as []activity) bool { return len(as) >= n }
}

// startMatcher runs the processor (sink and matcher) in-process.
func startMatcher(t *testing.T, cfg Config, reg *prometheus.Registry) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, testenv.Logger(t), reg) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("processor: %v", err)
		}
	}
}

func matcherConfig(t *testing.T, kcfg kafkautil.Config, chains string) Config {
	cfg := DefaultConfig()
	cfg.Kafka = kcfg
	cfg.Sink.Enabled = false
	// The usage sink would write the default database: not this test's.
	cfg.Usage.Enabled = false
	cfg.ChainsFile = chains
	cfg.Ops.ListenAddress = freeAddr(t)
	cfg.ShutdownTimeout = 10 * time.Second
	cfg.Matcher.Group = "matcher-" + testenv.Suffix()
	cfg.Matcher.TransactionalID = "matcher-test-" + testenv.Suffix()
	// The ledger and the replays need ClickHouse: the tests that want them
	// turn them on with a test database.
	cfg.Ledger.Enabled, cfg.Replay.Enabled = false, false
	return cfg
}

// TestMatcherIntegration runs the processor (sink and matcher) against the
// real broker and ClickHouse: the activity topic gets exactly one message
// per (webhook, transaction) by the matching rules, with a complete payload;
// an address added while running matches from the next block, a removed one
// stops; /readyz and the metrics report.
func TestMatcherIntegration(t *testing.T) {
	kcfg := testenv.Kafka(t)
	ccfg, conn := testenv.ClickHouse(t)

	X, Y, Z, W, U := testAddr("x"), testAddr("y"), testAddr("z"), testAddr("w"), testAddr("u")
	token := testAddr("token")
	rpc := fakeNode(t, token, "Test Token", "TT", 6)
	const hookA, hookB, hookC, hookD = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002",
		"cccccccc-0000-4000-8000-000000000003", "dddddddd-0000-4000-8000-000000000004"
	produceRecords(t, kcfg,
		webhookRec(kcfg, hookA, true, true, false), addressRec(kcfg, hookA, X), addressRec(kcfg, hookA, Y),
		webhookRec(kcfg, hookB, true, false, true), addressRec(kcfg, hookB, Z),
		webhookRec(kcfg, hookC, false, false, false), addressRec(kcfg, hookC, X), // inactive
		webhookRec(kcfg, hookD, true, false, false, evm.TopicTransferSingle[:]), addressRec(kcfg, hookD, X), // gated
	)
	amount := make([]byte, 32)
	amount[31] = 64 // 0.000064 at 6 decimals
	erc20 := &record.Log{Address: token, Topics: [][]byte{evm.TopicTransfer[:], append(make([]byte, 12), U...), append(make([]byte, 12), Y...)}, Data: amount}
	produce(t, kcfg,
		block(1,
			&record.Transaction{From: X, To: U},                                 // A (C inactive, D gated out)
			&record.Transaction{From: U, To: token, Logs: []*record.Log{erc20}}, // A through the transfer's recipient
			&record.Transaction{From: U, To: U, InternalTransactions: []*record.InternalTransaction{
				{Type: "CALL", From: U, To: U, Value: "0"}, {Type: "CALL", From: U, To: Z, Value: "0", TracePosition: 1, Depth: 1}}}, // B (internal)
			&record.Transaction{From: U, To: U}, // nobody
		),
		block(2, &record.Transaction{From: X, To: Y, InternalTransactions: []*record.InternalTransaction{{Type: "CALL", From: X, To: Z}}}), // A once, B
	)

	cfg := matcherConfig(t, kcfg, chainsFile(t, rpc))
	cfg.Sink.Enabled = true
	cfg.ClickHouse = ccfg
	cfg.Sink.Group = "sink-" + testenv.Suffix()
	// The write budget's head signal on, with a target nothing misses: the
	// matcher reports head blocks to the sink's budget (checked at the end).
	cfg.Sink.Budget.HeadLatencyTarget = time.Hour
	// The first transaction aborts, as on a rebalance: its batch is read
	// again, and neither the activity topic nor the counters below may show
	// it twice.
	var ends atomic.Int32
	testHookBeforeEnd = func() bool { return ends.Add(1) == 1 }
	t.Cleanup(func() { testHookBeforeEnd = nil }) // after stop() below
	reg := prometheus.NewRegistry()
	stop := startMatcher(t, cfg, reg)
	defer stop()

	r := newActivityReader(t, kcfg, kgo.ReadCommitted())
	want := map[string]int{
		hookA + "/" + txHashOf(1, 0): 1, hookA + "/" + txHashOf(1, 1): 1, hookB + "/" + txHashOf(1, 2): 1,
		hookA + "/" + txHashOf(2, 0): 1, hookB + "/" + txHashOf(2, 0): 1,
	}
	r.waitFor(t, "the first 5 messages", 60*time.Second, has(5))

	// Ready once the table caught up.
	eventually(t, "/readyz", func() bool {
		resp, err := http.Get("http://" + cfg.Ops.ListenAddress + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	// Changes acknowledged while running: W added to A, X removed from A.
	produceRecords(t, kcfg, addressRec(kcfg, hookA, W), tombstoneRec(kcfg, hookA, X))
	produce(t, kcfg,
		block(3, &record.Transaction{From: W, To: U}), // A: added address
		block(4, &record.Transaction{From: X, To: U}, // nobody any more (A removed X, C inactive, D gated)
			&record.Transaction{From: U, To: Y}), // A: marker that block 4 was processed
	)
	// A chain nobody watches is skipped without decoding: this record
	// would count as undecodable if it were read.
	produceRecords(t, kcfg, &kgo.Record{Topic: kcfg.Topic(topics.Blocks), Key: []byte("99999"), Value: []byte("not a block")})
	want[hookA+"/"+txHashOf(3, 0)] = 1
	want[hookA+"/"+txHashOf(4, 1)] = 1
	r.waitFor(t, "the messages of blocks 3 and 4", 60*time.Second, has(len(want)))
	r.poll(t, time.Second) // anything extra would show up now

	got := r.all()
	if p := pairs(got); !mapsEqual(p, want) {
		t.Fatalf("activity (webhook/tx -> count):\n got %v\nwant %v", p, want)
	}
	for _, a := range got {
		checkActivity(t, a)
	}
	// The ERC-20 message carries the token metadata from eth_call.
	for _, a := range got {
		if hex.EncodeToString(a.rec.TxHash) != txHashOf(1, 1) {
			continue
		}
		var p struct {
			Event struct {
				Transaction struct {
					ERC20 []struct {
						Token map[string]any `json:"erc20Token"`
					} `json:"erc20Transfers"`
				} `json:"transaction"`
				Logs []any `json:"logs"`
			} `json:"event"`
		}
		if err := json.Unmarshal(a.rec.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if len(p.Event.Transaction.ERC20) != 1 || p.Event.Transaction.ERC20[0].Token["symbol"] != "TT" ||
			p.Event.Transaction.ERC20[0].Token["valueWithDecimals"] != "0.000064" || len(p.Event.Logs) != 1 {
			t.Errorf("erc20 payload: %s", a.rec.Payload)
		}
	}
	// The counter moves right after the commit that made the records visible.
	eventually(t, "activities_emitted_total", func() bool {
		return metricSum(t, reg, "moraine_processor_activities_emitted_total") == float64(len(want))
	})
	eventually(t, "the unwatched chain's record counted", func() bool {
		return metricLabeled(t, reg, "moraine_processor_match_records_total", "kind", "unwatched") >= 1
	})
	if v := metricLabeled(t, reg, "moraine_processor_match_records_total", "kind", "unwatched"); v != 1 {
		t.Errorf("match_records_total{kind=unwatched} = %v, want 1", v)
	}
	if v := metricLabeled(t, reg, "moraine_processor_match_transactions_total", "result", "aborted"); v < 1 {
		t.Errorf("match_transactions_total{result=aborted} = %v: the forced abort did not happen", v)
	}
	if v := metricLabeled(t, reg, "moraine_processor_match_records_total", "kind", "undecodable"); v != 0 {
		t.Errorf("%v undecodable records: the unwatched chain's record was decoded", v)
	}
	if v := metricLabeled(t, reg, "moraine_processor_match_records_total", "kind", "block"); v != 4 {
		t.Errorf("match_records_total{kind=block} = %v, want 4", v)
	}
	if v := metricSum(t, reg, "moraine_processor_watchlist_ready"); v != 1 {
		t.Errorf("watchlist_ready = %v", v)
	}
	// The sink ran beside it.
	eventually(t, "4 blocks in ClickHouse", func() bool {
		return count(t, conn, "SELECT count() FROM blocks FINAL WHERE removed = 0") == 4
	})

	// A block at the head with activity reaches the write budget's head
	// signal; the four blocks above, years old, are backfill and did not.
	head := block(5, &record.Transaction{From: W, To: U})
	head.GetBlock().Timestamp = uint64(time.Now().Unix())
	produce(t, kcfg, head)
	eventually(t, "the head block timed by the write budget", func() bool {
		return metricSum(t, reg, "moraine_processor_write_budget_head_seconds") >= 1
	})
	r.poll(t, time.Second)
	if n := metricSum(t, reg, "moraine_processor_write_budget_head_seconds"); n != 1 {
		t.Errorf("write budget timed %v head blocks, want 1", n)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// checkActivity checks one record's envelope against its payload.
func checkActivity(t *testing.T, a activity) {
	t.Helper()
	if string(a.raw.Key) != a.rec.WebhookId {
		t.Errorf("key %q, webhook %s", a.raw.Key, a.rec.WebhookId)
	}
	schema := ""
	for _, h := range a.raw.Headers {
		if h.Key == codec.SchemaHeader {
			schema = string(h.Value)
		}
	}
	if schema != codec.ActivitySchema {
		t.Errorf("schema header %q", schema)
	}
	if a.rec.MessageId != codec.ActivityMessageID(a.rec.WebhookId, a.rec.ChainId, a.rec.TxHash) {
		t.Errorf("messageId %s not derived from (webhook, chain, tx)", a.rec.MessageId)
	}
	var p map[string]any
	if err := json.Unmarshal(a.rec.Payload, &p); err != nil {
		t.Fatalf("payload: %v", err)
	}
	if p["webhookId"] != a.rec.WebhookId || p["messageId"] != a.rec.MessageId || p["eventType"] != "address_activity" {
		t.Errorf("payload envelope %v", p)
	}
	if a.rec.AccountId != "acc-"+a.rec.WebhookId || a.rec.ChainId != devChain || a.rec.BlockNumber == 0 || len(a.rec.BlockHash) != 32 ||
		a.rec.BlockFetchedAtUnixMs == 0 || a.rec.MatchedAtUnixMs < a.rec.BlockFetchedAtUnixMs {
		t.Errorf("activity fields %+v", a.rec)
	}
}

// metricSum is the sum of a gathered counter or gauge family, or the
// number of samples of a histogram family.
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
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
		return sum
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// metricLabeled is the value of the series of name whose label has value.
func metricLabeled(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if mf.GetName() == name && l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{%s=%q}", name, label, value)
	return 0
}

// endOffsets lists the activity topic's high watermarks.
func endOffsets(t *testing.T, kcfg kafkautil.Config) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kcfg.SeedBrokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, kcfg.Topic(topics.Activity))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// TestConfig checks the flag defaults and validation of the matcher.
func TestConfig(t *testing.T) {
	cfg := DefaultConfig()
	if !cfg.Matcher.Enabled || !cfg.Sink.Enabled || cfg.Matcher.Group != "moraine-matcher" ||
		!strings.HasPrefix(cfg.Matcher.TransactionalID, "moraine-matcher-") || cfg.ChainsFile == "" {
		t.Fatalf("defaults: %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	for name, mut := range map[string]func(*Config){
		"nothing enabled": func(c *Config) {
			c.Sink.Enabled, c.Matcher.Enabled, c.NFT.Enabled, c.Usage.Enabled = false, false, false, false
		},
		"nft without clickhouse": func(c *Config) {
			c.Sink.Enabled, c.Matcher.Enabled, c.Usage.Enabled, c.ClickHouse.Addr = false, false, false, ""
		},
		"nft retry schedule too short": func(c *Config) { c.NFT.RetrySchedule = c.NFT.RetrySchedule[:2] },
		"no txn id":                    func(c *Config) { c.Matcher.TransactionalID = "" },
		"bad start offset":             func(c *Config) { c.Matcher.StartOffset = "middle" },
		"zero cache":                   func(c *Config) { c.Matcher.TokenCacheSize = 0 },
		"zero catch-up":                func(c *Config) { c.Matcher.CatchUpTimeout = 0 },
		"zero chunk":                   func(c *Config) { c.Replay.ChunkMessages = 0 },
		"no ledger group":              func(c *Config) { c.Ledger.Group = "" },
	} {
		c := DefaultConfig()
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// The sink alone needs no matcher settings, the matcher alone (without
	// the ledger and the replays) no ClickHouse.
	c := DefaultConfig()
	c.Sink.Enabled, c.NFT.Enabled, c.Usage.Enabled, c.ClickHouse.Addr = false, false, false, ""
	if c.Validate() == nil {
		t.Error("the matcher with the ledger and the replays, without ClickHouse: accepted")
	}
	c.Ledger.Enabled, c.Replay.Enabled = false, false
	if err := c.Validate(); err != nil {
		t.Errorf("matcher only: %v", err)
	}
	// The usage sink needs ClickHouse, and its retentions in order.
	c = DefaultConfig()
	c.Sink.Enabled, c.NFT.Enabled, c.ClickHouse.Addr = false, false, ""
	if c.Validate() == nil {
		t.Error("usage sink without ClickHouse: accepted")
	}
	c = DefaultConfig()
	c.Usage.MetricsRetention = c.Usage.LogRetention / 2
	if c.Validate() == nil {
		t.Error("metrics kept shorter than logs: accepted")
	}
}

// TestIdleBatchesShareATransaction: blocks that match nothing, arriving one
// by one, are committed together once --matcher.idle-commit-interval has
// passed (far fewer transactions than batches), and a block that matches
// ends the transaction at once, its message visible without waiting out
// the interval.
func TestIdleBatchesShareATransaction(t *testing.T) {
	kcfg := testenv.Kafka(t)
	X, U := testAddr("x"), testAddr("u")
	const hook = "aaaaaaaa-0000-4000-8000-0000000000dd"
	produceRecords(t, kcfg, webhookRec(kcfg, hook, true, false, false), addressRec(kcfg, hook, X))
	cfg := matcherConfig(t, kcfg, chainsFile(t, "http://127.0.0.1:1"))
	cfg.Matcher.IdleCommitInterval = 2 * time.Second
	reg := prometheus.NewRegistry()
	stop := startMatcher(t, cfg, reg)
	defer stop()

	const idle = 12
	for n := uint64(1); n <= idle; n++ {
		produce(t, kcfg, block(n, &record.Transaction{From: U, To: U}))
		time.Sleep(50 * time.Millisecond)
	}
	eventually(t, "the idle blocks committed", func() bool {
		return metricLabeled(t, reg, "moraine_processor_match_records_total", "kind", "block") == idle
	})
	if v := metricLabeled(t, reg, "moraine_processor_match_transactions_total", "result", "committed"); v > 3 {
		t.Errorf("%v transactions for %d blocks polled one by one: idle batches did not share one", v, idle)
	}
	sent := time.Now()
	produce(t, kcfg, block(idle+1, &record.Transaction{From: X, To: U}))
	newActivityReader(t, kcfg, kgo.ReadCommitted()).waitFor(t, "the matching block's message", 30*time.Second, has(1))
	if d := time.Since(sent); d >= cfg.Matcher.IdleCommitInterval {
		t.Errorf("the message took %v: a batch with activity waited for the idle interval", d)
	}
}
