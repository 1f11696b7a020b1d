package app

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/processor/internal/payload"
	"github.com/moraine-data/moraine/processor/internal/watchlist"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// putWebhook writes a webhook and its addresses as the query service does:
// ClickHouse (which the replays read), then the address-watch topic (which
// the matcher reads).
func putWebhook(t *testing.T, kcfg kafkautil.Config, db *accountdb.DB, w accountdb.Webhook, addrs ...[]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := db.PutWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	rec, err := watch.WebhookRecord(w)
	if err != nil {
		t.Fatal(err)
	}
	rec.Topic = kcfg.Topic(topics.AddressWatch)
	recs := []*kgo.Record{rec}
	var rows []accountdb.Address
	for _, a := range addrs {
		row := accountdb.Address{WebhookID: w.ID, Address: hexAddr(a), Given: hexAddr(a), Version: w.Version}
		rows = append(rows, row)
		r, err := watch.AddressRecord(row, w.ChainID)
		if err != nil {
			t.Fatal(err)
		}
		r.Topic = kcfg.Topic(topics.AddressWatch)
		recs = append(recs, r)
	}
	if err := db.PutAddresses(ctx, rows); err != nil {
		t.Fatal(err)
	}
	produceRecords(t, kcfg, recs...)
}

// replayReader reads the replay topic from the start, read_committed.
func replayReader(t *testing.T, kcfg kafkautil.Config) *activityReader {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(kcfg.SeedBrokers()...),
		kgo.ConsumeTopics(kcfg.Topic(topics.Replay)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &activityReader{cl: cl}
}

// replayBlocks are blocks 1..6 of the dev chain, with what payloads show:
// token transfers (the token answers eth_call), logs, call frames, a
// contract creation, an access list, fee fields; X and Y are watched.
func replayBlocks(X, Y, U, token []byte) []*record.ChainEvent {
	amount := make([]byte, 32)
	amount[31] = 64
	erc20 := func(from, to []byte) *record.Log {
		return &record.Log{Address: token, Topics: [][]byte{evm.TopicTransfer[:], append(make([]byte, 12), from...), append(make([]byte, 12), to...)}, Data: amount}
	}
	other := &record.Log{Address: U, Topics: [][]byte{hashOf("topic", 1)}, Data: []byte{1, 2, 3}}
	var evs []*record.ChainEvent
	for n := uint64(1); n <= 6; n++ {
		ev := block(n,
			&record.Transaction{From: X, To: U, Type: 2, MaxFeePerGas: "30000000000", MaxPriorityFeePerGas: "1000000000",
				Input: []byte{0xa9, 0x05, 0x9c, 0xbb}, Logs: []*record.Log{other},
				AccessList: []*record.AccessTuple{{Address: U, StorageKeys: [][]byte{hashOf("slot", n), hashOf("slot", n+1)}}}},
			&record.Transaction{From: U, To: token, Logs: []*record.Log{erc20(U, Y), other}, InternalTransactions: []*record.InternalTransaction{
				{Type: "CALL", From: U, To: token, Value: "0", Gas: 90000, GasUsed: 30000},
				{Type: "STATICCALL", From: token, To: Y, Value: "0", TracePosition: 1, Depth: 1, CallIndex: "call_0_0", Gas: 5000, GasUsed: 700}}},
			&record.Transaction{From: Y, ContractAddress: hashOf("created", n)[:20], Input: []byte{0x60, 0x80}},
			&record.Transaction{From: U, To: U}, // nobody's
		)
		ev.GetBlock().Transactions[1].Value = "1000000000000000000"
		evs = append(evs, ev)
	}
	return evs
}

// TestReplayIntegration runs the processor whole (sink, matcher, ledger,
// replays) on the real broker and ClickHouse and checks what a replay
// produces against what live matching produced:
//
//   - webhook A, live from block 1, through a reorg of blocks 5 and 6: its
//     replay over 1..6 repeats every message of its stream (activity of
//     canonical and orphaned blocks, retractions), each with its sequence
//     number, its messageId and its bytes;
//   - webhook B, created after the blocks with other settings: its replay
//     numbers what it would have received 1, 2, 3, ... in block order, the
//     bytes payload.Build makes of the blocks as ingest produced them;
//   - both jobs report done with their counts, the ledger holds B's new
//     messages, and a second replay of B repeats them instead of numbering
//     them again.
func TestReplayIntegration(t *testing.T) {
	kcfg := testenv.Kafka(t)
	ccfg, conn := testenv.ClickHouse(t)
	db, err := accountdb.Open(conn, accountdb.DefaultConfig(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	X, Y, U, token := testAddr("x"), testAddr("y"), testAddr("u"), testAddr("token")
	rpc := fakeNode(t, token, "Test Token", "TT", 6)
	const hookA, hookB = "aaaaaaaa-0000-4000-8000-00000000000a", "bbbbbbbb-0000-4000-8000-00000000000b"
	chainID := fmt.Sprint(devChain)
	putWebhook(t, kcfg, db, accountdb.Webhook{AccountID: "acc", ID: hookA, URL: "http://127.0.0.1:1/a", ChainID: chainID,
		EventType: "address_activity", Status: accountdb.StatusActive, IncludeLogs: true, IncludeInternalTxs: true, Version: 1}, X, Y)

	evs := replayBlocks(X, Y, U, token)
	produce(t, kcfg, evs...)
	cfg := matcherConfig(t, kcfg, chainsFile(t, rpc))
	cfg.Sink.Enabled, cfg.Ledger.Enabled, cfg.Replay.Enabled = true, true, true
	cfg.ClickHouse = ccfg
	cfg.Sink.Group = "sink-" + testenv.Suffix()
	cfg.Ledger.Group = "ledger-" + testenv.Suffix()
	cfg.Replay.PollInterval = 200 * time.Millisecond
	cfg.Replay.ChunkBlocks = 2 // several transactions per job
	reg := prometheus.NewRegistry()
	stop := startMatcher(t, cfg, reg)
	defer stop()

	live := newActivityReader(t, kcfg, kgo.ReadCommitted())
	live.waitFor(t, "A's messages of blocks 1..6", 60*time.Second, has(18))
	// A reorg replaces blocks 5 and 6: A's messages of them are retracted,
	// and the new blocks' (other hashes) delivered.
	reorg := &record.ChainEvent{Event: &record.ChainEvent_Reorg{Reorg: &record.Reorg{ChainId: devChain, ForkNumber: 5,
		Orphaned: []*record.OrphanedBlock{{Number: 5, Hash: hashOf("blk", 5)}, {Number: 6, Hash: hashOf("blk", 6)}}}}}
	again := replayBlocks(X, Y, U, token)[4:]
	for _, ev := range again {
		b := ev.GetBlock()
		b.Hash, b.ReceiptsRoot = hashOf("blk'", b.Number), hashOf("rr'", b.Number)
		b.Transactions = b.Transactions[1:] // the first transaction is not included again
		for i, tx := range b.Transactions {
			tx.Index = uint32(i)
		}
	}
	again[1].GetBlock().ParentHash = again[0].GetBlock().Hash
	produce(t, kcfg, append([]*record.ChainEvent{reorg}, again...)...)
	live.waitFor(t, "the retractions and the new blocks' messages", 60*time.Second, has(18+6+4))
	liveA := map[uint64]*record.Activity{}
	for _, a := range live.all() {
		if a.rec.GetWebhookId() == hookA {
			liveA[a.rec.GetSequence()] = a.rec
		}
	}
	if len(liveA) != 28 {
		t.Fatalf("A: %d live messages, want 28", len(liveA))
	}

	// B, created now: its activity of blocks 1..6 is history it never got.
	putWebhook(t, kcfg, db, accountdb.Webhook{AccountID: "acc", ID: hookB, URL: "http://127.0.0.1:1/b", ChainID: chainID,
		EventType: "address_activity", Status: accountdb.StatusActive, Version: 1}, Y)
	now := uint64(time.Now().UnixMilli())
	for _, j := range []accountdb.ReplayJob{
		{WebhookID: hookA, ID: "11111111-0000-4000-8000-000000000001", AccountID: "acc", ChainID: devChain, FromBlock: 1, ToBlock: 6, CreatedAt: now, Version: 1},
		{WebhookID: hookB, ID: "22222222-0000-4000-8000-000000000002", AccountID: "acc", ChainID: devChain, FromBlock: 1, ToBlock: 6, CreatedAt: now, Version: 1},
	} {
		if err := db.PutReplayJob(t.Context(), j); err != nil {
			t.Fatal(err)
		}
	}
	replayed := replayReader(t, kcfg)
	// B matches Y: the ERC-20 recipient and the creator in every block (the
	// new blocks 5' and 6' included).
	replayed.waitFor(t, "both replays", 90*time.Second, has(28+12))
	byHook := map[string][]*record.Activity{}
	for _, a := range replayed.all() {
		byHook[a.rec.GetWebhookId()] = append(byHook[a.rec.GetWebhookId()], a.rec)
		if string(a.raw.Key) != a.rec.GetWebhookId() || a.rec.GetReplayId() == "" {
			t.Errorf("replayed record: key %q, replay id %q", a.raw.Key, a.rec.GetReplayId())
		}
	}
	// A: the stream again, message for message.
	if len(byHook[hookA]) != len(liveA) {
		t.Errorf("A: %d replayed messages, %d live", len(byHook[hookA]), len(liveA))
	}
	for _, r := range byHook[hookA] {
		l := liveA[r.GetSequence()]
		switch {
		case l == nil:
			t.Errorf("A: replayed sequence %d was never live", r.GetSequence())
		case !r.GetRetransmission() || l.GetMessageId() != r.GetMessageId() || l.GetKind() != r.GetKind() || !bytes.Equal(l.GetPayload(), r.GetPayload()):
			t.Errorf("A: sequence %d differs:\n live   %s %s %s\n replay %s %s %s (retransmission %v)", r.GetSequence(),
				l.GetKind(), l.GetMessageId(), l.GetPayload(), r.GetKind(), r.GetMessageId(), r.GetPayload(), r.GetRetransmission())
		}
	}
	// B: numbered 1..12 in block order, bytes as live matching would have
	// built them from the blocks ingest produced.
	wB := &watchlist.Webhook{ID: hookB, AccountID: "acc", ChainID: devChain, Active: true}
	native := &chains.Token{Name: "Avalanche", Symbol: "AVAX", Decimals: 18}
	tokens := map[evm.Address]*tokenmeta.Token{}
	tok, _ := evm.AddressFrom(token)
	tokens[tok] = &tokenmeta.Token{Name: "Test Token", Symbol: "TT", Decimals: 6, HasDecimals: true}
	var want [][]byte
	for _, ev := range append(evs[:4:4], again...) {
		b := ev.GetBlock()
		for _, tx := range b.GetTransactions() {
			if bytes.Equal(tx.GetFrom(), Y) || tx.GetTo() != nil && bytes.Equal(tx.GetTo(), token) {
				body, _, err := payload.Build(payload.Input{Webhook: wB, Block: b, Tx: tx, Native: native, Tokens: tokens})
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, body)
			}
		}
	}
	gotB := byHook[hookB]
	slices.SortFunc(gotB, func(x, y *record.Activity) int { return int(x.GetSequence()) - int(y.GetSequence()) })
	if len(gotB) != len(want) {
		t.Fatalf("B: %d replayed messages, want %d", len(gotB), len(want))
	}
	for i, r := range gotB {
		if r.GetSequence() != uint64(i+1) || r.GetRetransmission() || !bytes.Equal(r.GetPayload(), want[i]) {
			t.Errorf("B: message %d: sequence %d, retransmission %v\n got  %s\n want %s", i, r.GetSequence(), r.GetRetransmission(), r.GetPayload(), want[i])
		}
	}
	eventually(t, "both jobs reported done", func() bool {
		ps, err := db.ReplayProgressOf(t.Context(), hookA, []string{"11111111-0000-4000-8000-000000000001"})
		pb, err2 := db.ReplayProgressOf(t.Context(), hookB, []string{"22222222-0000-4000-8000-000000000002"})
		return err == nil && err2 == nil && ps["11111111-0000-4000-8000-000000000001"].Status == accountdb.ReplayDone &&
			pb["22222222-0000-4000-8000-000000000002"].Status == accountdb.ReplayDone
	})
	pb, _ := db.ReplayProgressOf(t.Context(), hookB, []string{"22222222-0000-4000-8000-000000000002"})
	if p := pb["22222222-0000-4000-8000-000000000002"]; p.Renumbered != 12 || p.Retransmitted != 0 || p.NextBlock != 7 {
		t.Errorf("B's report: %+v", p)
	}
	eventually(t, "the ledger holds B's numbers", func() bool {
		return count(t, conn, "SELECT count() FROM webhook_messages FINAL WHERE webhook_id = ?", hookB) == 12
	})
	// A second replay of B repeats its messages with their numbers.
	if err := db.PutReplayJob(t.Context(), accountdb.ReplayJob{WebhookID: hookB, ID: "33333333-0000-4000-8000-000000000003",
		AccountID: "acc", ChainID: devChain, FromBlock: 1, ToBlock: 6, CreatedAt: now, Version: 1}); err != nil {
		t.Fatal(err)
	}
	replayed.waitFor(t, "B's second replay", 60*time.Second, has(28+12+12))
	for _, a := range replayed.all()[40:] {
		r := a.rec
		if r.GetReplayId() != "33333333-0000-4000-8000-000000000003" || !r.GetRetransmission() ||
			!bytes.Equal(r.GetPayload(), want[r.GetSequence()-1]) {
			t.Errorf("B's second replay: %s sequence %d retransmission %v", r.GetMessageId(), r.GetSequence(), r.GetRetransmission())
		}
	}
	if v := metricLabeled(t, reg, "moraine_processor_replay_messages_total", "kind", "renumbered"); v != 12 {
		t.Errorf("replay_messages_total{kind=renumbered} = %v, want 12", v)
	}
	// The replays' transactions were fenced by the matcher's membership:
	// they committed the fence topic's offset in the matcher group.
	cl, err := kgo.NewClient(kcfg.BaseOpts(testenv.Logger(t), "replay-test-admin")...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(t.Context(), kcfg.TopicPrefix+cfg.Matcher.Group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(kcfg.Topic(topics.ReplayFence), 0); !ok || o.Err != nil || o.At != 0 {
		t.Errorf("the matcher group's offset of the replay fence: %+v (found %v), want 0", o, ok)
	}
}
