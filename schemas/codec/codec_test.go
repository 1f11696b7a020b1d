package codec

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/proto"

	"github.com/moraine-data/moraine/schemas/record"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current encoding")

func u64(v uint64) *uint64 { return &v }

func h(s string) []byte {
	b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	if err != nil {
		panic(err)
	}
	return b
}

// samples are fixed events covering every message and field kind. Changing
// one is a wire-format change: the golden files must be regenerated with
// -update and the change reviewed for compatibility.
func samples() map[string]*record.ChainEvent {
	block := &record.Block{
		ChainId: 43114, Number: 95033472,
		Hash:       h("0x1f4f8b1fbd4a18ad2ff0b0bfa2c37ec6d3a5d88de7fc13d6e0d1b8d3f4b0c201"),
		ParentHash: h("0x2a54f142fa3acee92a839b071bb6c7cca7abc2a797cf4aac68b07f79406ac0cb"),
		Timestamp:  1760000000, TimestampMilliseconds: u64(1760000000123), MinDelayExcess: u64(7970124),
		BaseFee: "25000000000", GasUsed: 53608, GasLimit: 15000000, BlockGasCost: "0", ExtDataGasUsed: "0",
		FeesSpent: "1435117553916960", CumulativeTransactions: 500325352,
		Miner: h("0x0100000000000000000000000000000000000000"),
		Size:  1080, TracesIncluded: true, FetchedAtUnixMs: 1760000000456,
		Transactions: []*record.Transaction{{
			Hash: h("0xf6a791920652e87ccc91d2f1b20c1505a94452b88f359acdeb5a6fa8205638c4"), Index: 0, Type: 2,
			From: h("0xf73166f0c75a3df444fabdfdc7e5ee4a73fa51c7"), To: h("0x1dac23e41fc8ce857e86fd8c1ae5b6121c67d96d"),
			Value: "30576074978046450", Gas: 651108, GasPrice: "31466275484", MaxFeePerGas: "52000000000",
			MaxPriorityFeePerGas: "1000000000", Nonce: 4, Input: h("0xa9059cbb"), Status: 1, GasUsed: 212125,
			CumulativeGasUsed: 212125, EffectiveGasPrice: "31466275484",
			Logs: []*record.Log{{
				Address:  h("0xb31f66aa3c1e785363f0875a1b74e27b85fd66c7"),
				Topics:   [][]byte{h("0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef")},
				Data:     h("0x00"),
				LogIndex: 19,
			}},
			InternalTransactions: []*record.InternalTransaction{{
				CallIndex: "call_0", TracePosition: 0, Type: "CALL",
				From: h("0xf73166f0c75a3df444fabdfdc7e5ee4a73fa51c7"), To: h("0x1dac23e41fc8ce857e86fd8c1ae5b6121c67d96d"),
				Value: "30576074978046450", Gas: 651108, GasUsed: 212125, Error: "execution reverted",
				RevertReason: "nope", Input: h("0xa9059cbb"), Output: h("0x"), Depth: 0,
			}},
			AccessList: []*record.AccessTuple{{Address: h("0xb31f66aa3c1e785363f0875a1b74e27b85fd66c7"), StorageKeys: [][]byte{make([]byte, 32)}}},
		}},
	}
	return map[string]*record.ChainEvent{
		"chain_event_block": {Event: &record.ChainEvent_Block{Block: block}},
		"chain_event_reorg": {Event: &record.ChainEvent_Reorg{Reorg: &record.Reorg{
			ChainId: 43112, ForkNumber: 100,
			Orphaned: []*record.OrphanedBlock{{Number: 100, Hash: h("0x56ce38b18e185b3574b8d6e620029449309707c31663236245d5d53f6b4e8549")}},
		}}},
	}
}

// watchSamples are fixed address-watch entries, one per kind, under the same
// rules as samples.
func watchSamples() map[string]*record.WatchEntry {
	return map[string]*record.WatchEntry{
		"watch_entry_webhook": {Version: 1760000000123456789, Entry: &record.WatchEntry_Webhook{Webhook: &record.WatchedWebhook{
			WebhookId: "401da7d9-d6d7-46c8-b431-72ff1e1543f4", AccountId: "7c1e3b0a-5d4f-4e2a-9b8c-0d1e2f3a4b5c",
			ChainId: 43114, EventType: "address_activity", Status: record.WebhookStatus_WEBHOOK_STATUS_ACTIVE,
			Url: "https://example.com/hook", IncludeInternalTxs: true, IncludeLogs: true,
			EventSignatures: [][]byte{h("0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef")},
			CreatedAtUnixMs: 1715621587726,
		}}},
		"watch_entry_address": {Version: 1760000000123456790, Entry: &record.WatchEntry_Address{Address: &record.WatchedAddress{
			WebhookId: "401da7d9-d6d7-46c8-b431-72ff1e1543f4", ChainId: 43114,
			Address: h("0x9702230a8ea53601f5cd2dc00fdbc13d4df4a8c7"),
		}}},
		"watch_entry_account": {Version: 1760000000123456791, Entry: &record.WatchEntry_Account{Account: &record.WatchedAccount{
			AccountId: "7c1e3b0a-5d4f-4e2a-9b8c-0d1e2f3a4b5c", Plan: "free",
			SharedSecret: "c13cc017c4ed63bcc842c8edfb49df37512280326a32826de3b885340b8a3d53",
		}}},
	}
}

func TestWatchKeys(t *testing.T) {
	const id = "401da7d9-d6d7-46c8-b431-72ff1e1543f4"
	for _, tc := range []struct {
		name      string
		key       string
		want      WatchKey
		wantErr   bool
		partition string
	}{
		{name: "webhook", key: WatchWebhookKey(id), want: WatchKey{Kind: WatchKeyWebhook, WebhookID: id}, partition: id},
		{
			name: "address is lower-cased", key: WatchAddressKey(id, "0x9702230A8Ea53601f5cD2dc00fDBc13d4dF4A8c7"),
			want:      WatchKey{Kind: WatchKeyAddress, WebhookID: id, Address: "0x9702230a8ea53601f5cd2dc00fdbc13d4df4a8c7"},
			partition: id,
		},
		{name: "account", key: WatchAccountKey("acc-1"), want: WatchKey{Kind: WatchKeyAccount, AccountID: "acc-1"}, partition: "account:acc-1"},
		{name: "empty", key: "", wantErr: true},
		{name: "short address", key: id + "/0x12", wantErr: true},
		{name: "upper-case address", key: id + "/0x9702230A8Ea53601f5cD2dc00fDBc13d4dF4A8c7", wantErr: true},
		{name: "not hex", key: id + "/0xzz02230a8ea53601f5cd2dc00fdbc13d4df4a8c7", wantErr: true},
		{name: "empty account", key: "account:", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseWatchKey(tc.key)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("want an error, got %+v", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseWatchKey(%q) = %+v, %v; want %+v", tc.key, got, err, tc.want)
			}
			if p := string(WatchPartitionKey([]byte(tc.key))); p != tc.partition {
				t.Fatalf("partition key %q, want %q", p, tc.partition)
			}
		})
	}
}

func TestVersionHeaderRoundTrip(t *testing.T) {
	v, err := ParseVersion(FormatVersion(1760000000123456789))
	if err != nil || v != 1760000000123456789 {
		t.Fatalf("got %d, %v", v, err)
	}
	if _, err := ParseVersion([]byte("x")); err == nil {
		t.Fatal("want an error")
	}
}

func TestDecodeRejectsEmptyAndGarbage(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"garbage", []byte{0xff, 0xff, 0xff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeChainEvent(tc.in); err == nil {
				t.Fatal("want an error")
			}
			if _, err := DecodeWatchEntry(tc.in); err == nil {
				t.Fatal("want an error from DecodeWatchEntry")
			}
		})
	}
}

func BenchmarkEncodeDecodeBlock(b *testing.B) {
	ev := samples()["chain_event_block"]
	for b.Loop() {
		buf, _ := EncodeChainEvent(ev)
		if _, err := DecodeChainEvent(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// activitySamples are fixed activity messages under the same rules as samples.
func activitySamples() map[string]*record.Activity {
	return map[string]*record.Activity{
		"activity": {
			WebhookId: "401da7d9-d6d7-46c8-b431-72ff1e1543f4", MessageId: "94df1881-5d93-49d1-a1bd-607830608de2",
			AccountId: "7c1e3b0a-5d4f-4e2a-9b8c-0d1e2f3a4b5c", ChainId: 43114, BlockNumber: 44568834,
			BlockHash:            h("0xbd093536009f7dd785e9a5151d80069a93cc322f8b2df63d373865af4f6ee5be"),
			TxHash:               h("0xf6a791920652e87ccc91d2f1b20c1505a94452b88f359acdeb5a6fa8205638c4"),
			Payload:              []byte(`{"event":{"transaction":{}},"eventType":"address_activity"}`),
			BlockFetchedAtUnixMs: 1713884373000, MatchedAtUnixMs: 1713884373050,
		},
		// A replayed message repeating one the stream carried: its original
		// sequence, the replay's id, the settings its payload was built with.
		"activity_replay": {
			WebhookId: "401da7d9-d6d7-46c8-b431-72ff1e1543f4", MessageId: "94df1881-5d93-49d1-a1bd-607830608de2",
			AccountId: "7c1e3b0a-5d4f-4e2a-9b8c-0d1e2f3a4b5c", ChainId: 43114, BlockNumber: 44568834,
			BlockHash:       h("0xbd093536009f7dd785e9a5151d80069a93cc322f8b2df63d373865af4f6ee5be"),
			TxHash:          h("0xf6a791920652e87ccc91d2f1b20c1505a94452b88f359acdeb5a6fa8205638c4"),
			Payload:         []byte(`{"event":{"logs":[],"transaction":{}},"eventType":"address_activity"}`),
			MatchedAtUnixMs: 1713884373050, Sequence: 42, ReplayId: "5b0f7a6e-3c2d-4e1f-8a9b-0c1d2e3f4a5b",
			IncludeLogs: true, IncludeInternalTxs: true, Retransmission: true,
			ReceiptsRoot: h("0x1c3bd0e5a3bcc28a4b2e1c3f4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70"),
		},
	}
}

// streamSamples are fixed webhook-stream entries, and a retraction message.
func streamSamples() map[string]*record.StreamEntry {
	return map[string]*record.StreamEntry{
		"stream_entry_sequence": {Version: 42, Entry: &record.StreamEntry_Sequence{Sequence: &record.WebhookSequence{
			WebhookId: "401da7d9-d6d7-46c8-b431-72ff1e1543f4", Last: 42}}},
		"stream_entry_emitted": {Version: 1234, Entry: &record.StreamEntry_Emitted{Emitted: &record.EmittedBlock{
			ChainId: 43114, Number: 44568834, Hash: h("0xbd093536009f7dd785e9a5151d80069a93cc322f8b2df63d373865af4f6ee5be"),
			Messages: []*record.EmittedMessage{{WebhookId: "401da7d9-d6d7-46c8-b431-72ff1e1543f4",
				AccountId: "7c1e3b0a-5d4f-4e2a-9b8c-0d1e2f3a4b5c", MessageId: "94df1881-5d93-49d1-a1bd-607830608de2",
				TxHash: h("0xf6a791920652e87ccc91d2f1b20c1505a94452b88f359acdeb5a6fa8205638c4")}},
		}}},
		"stream_entry_pending": {Version: 1235, Entry: &record.StreamEntry_Pending{Pending: &record.PendingBlock{
			ChainId: 43114, Number: 44568834, Hash: h("0xbd093536009f7dd785e9a5151d80069a93cc322f8b2df63d373865af4f6ee5be"),
			WebhookId: "401da7d9-d6d7-46c8-b431-72ff1e1543f4", Messages: []*record.Activity{activitySamples()["activity"]},
		}}},
		"stream_entry_replay": {Version: 3, Entry: &record.StreamEntry_Replay{Replay: &record.ReplayProgress{
			ReplayId: "5b0f7a6e-3c2d-4e1f-8a9b-0c1d2e3f4a5b", WebhookId: "401da7d9-d6d7-46c8-b431-72ff1e1543f4",
			ChainId: 43114, NextBlock: 44568835, Retransmitted: 120, Renumbered: 7, Chunks: 3, ToBlock: 44600000,
		}}},
	}
}

func nftRequestSamples() map[string]*record.NftMetadataRequest {
	return map[string]*record.NftMetadataRequest{
		"nft_metadata_request": {
			ChainId: 43114, Contract: h("0x71c7656ec7ab88b098defb751b7401b5f6d8976f"), TokenId: "145", Standard: 721,
			SeenBlock: 44568834, Reason: record.NftMetadataRequest_REASON_DISCOVERED, RequestedAtUnixMs: 1713884373000,
			Attempt: 2, DueUnixMs: 1713884433000,
		},
	}
}

func txDetailSamples() map[string]*record.TxDetail {
	return map[string]*record.TxDetail{
		"tx_detail": {
			Type: 2, From: h("0xf73166f0c75a3df444fabdfdc7e5ee4a73fa51c7"), To: h("0x1dac23e41fc8ce857e86fd8c1ae5b6121c67d96d"),
			Value: "30576074978046450", Gas: 651108, GasPrice: "31466275484", MaxFeePerGas: "52000000000",
			MaxPriorityFeePerGas: "1000000000", Nonce: 4, Input: h("0xb80c2f09"), Status: 1, GasUsed: 212125,
			EffectiveGasPrice: "27000000000",
			Transfers: []*record.TokenTransfer{{Kind: 1, Token: h("0xb31f66aa3c1e785363f0875a1b74e27b85fd66c7"),
				From: h("0x1dac23e41fc8ce857e86fd8c1ae5b6121c67d96d"), To: h("0xbe882fb094143b59dc5335d32cecb711570ebdd4"),
				LogIndex: 2, Value: "30576074978046450"}},
			InternalTransactions: []*record.CallDetail{{Type: "CALL", From: h("0x1dac23e41fc8ce857e86fd8c1ae5b6121c67d96d"),
				To: h("0xb31f66aa3c1e785363f0875a1b74e27b85fd66c7"), Value: "30576074978046450", Gas: 600000, GasUsed: 23974,
				Reverted: true}},
		},
	}
}

// activityRetraction is a retraction message with a sequence number.
var activityRetraction = &record.Activity{
	WebhookId: "401da7d9-d6d7-46c8-b431-72ff1e1543f4", MessageId: "2c0e4d5a-1b2c-8d3e-8f40-516273849a0b",
	AccountId: "7c1e3b0a-5d4f-4e2a-9b8c-0d1e2f3a4b5c", ChainId: 43114, BlockNumber: 44568834,
	BlockHash: h("0xbd093536009f7dd785e9a5151d80069a93cc322f8b2df63d373865af4f6ee5be"),
	TxHash:    h("0xf6a791920652e87ccc91d2f1b20c1505a94452b88f359acdeb5a6fa8205638c4"),
	Payload:   []byte(`{"event":{"retractedMessageId":"94df1881-5d93-49d1-a1bd-607830608de2"},"eventType":"address_activity_retraction"}`),
	Sequence:  43, Kind: record.ActivityKind_ACTIVITY_KIND_RETRACTION, RetractedMessageId: "94df1881-5d93-49d1-a1bd-607830608de2",
	ReplayId:        "",
	MatchedAtUnixMs: 1713884373050,
}

// golden is one sample record with its codec.
type golden struct {
	msg    proto.Message
	encode func() ([]byte, error)
	decode func([]byte) (proto.Message, error)
}

func goldenCases() map[string]golden {
	out := map[string]golden{}
	for name, ev := range samples() {
		out[name] = golden{ev, func() ([]byte, error) { return EncodeChainEvent(ev) },
			func(b []byte) (proto.Message, error) { return DecodeChainEvent(b) }}
	}
	for name, e := range watchSamples() {
		out[name] = golden{e, func() ([]byte, error) { return EncodeWatchEntry(e) },
			func(b []byte) (proto.Message, error) { return DecodeWatchEntry(b) }}
	}
	for name, a := range activitySamples() {
		out[name] = golden{a, func() ([]byte, error) { return EncodeActivity(a) },
			func(b []byte) (proto.Message, error) { return DecodeActivity(b) }}
	}
	for name, e := range streamSamples() {
		out[name] = golden{e, func() ([]byte, error) { return EncodeStreamEntry(e) },
			func(b []byte) (proto.Message, error) { return DecodeStreamEntry(b) }}
	}
	out["activity_retraction"] = golden{activityRetraction, func() ([]byte, error) { return EncodeActivity(activityRetraction) },
		func(b []byte) (proto.Message, error) { return DecodeActivity(b) }}
	for name, r := range nftRequestSamples() {
		out[name] = golden{r, func() ([]byte, error) { return EncodeNftMetadataRequest(r) },
			func(b []byte) (proto.Message, error) { return DecodeNftMetadataRequest(b) }}
	}
	for name, d := range txDetailSamples() {
		out[name] = golden{d, func() ([]byte, error) { return EncodeTxDetail(d) },
			func(b []byte) (proto.Message, error) { return DecodeTxDetail(b) }}
	}
	req := &record.ApiRequest{Id: h("0x3f2b1c0d4e5f46a7b8c9d0e1f2a3b4c5"), At: 1764180000123, AccountId: "7c1e3b0a-5d4f-4e2a-9b8c-0d1e2f3a4b5c",
		KeyId: "0b6c1f4e-2d3a-4b5c-8d9e-0f1a2b3c4d5e", KeyAlias: "mk_3f2b1c0d", Route: "/v1/chains/:chainId/blocks/:blockId",
		Operation: "getBlock", Method: "GET", ChainId: "43114", Status: 200, DurationMicros: 1834, ComputeUnits: 10,
		ClientIp: "203.0.113.7", UserAgent: "speakeasy-sdk/typescript 0.3.13", Host: "api.example.com", Region: "eu-west-1"}
	out["api_request"] = golden{req, func() ([]byte, error) { return EncodeAPIRequest(req) },
		func(b []byte) (proto.Message, error) { return DecodeAPIRequest(b) }}
	task := &record.OperationTask{OperationId: "aa22054a-cb7c-4a4e-9b83-59f2ede74138"}
	out["operation_task"] = golden{task, func() ([]byte, error) { return EncodeOperationTask(task) },
		func(b []byte) (proto.Message, error) { return DecodeOperationTask(b) }}
	return out
}

// TestGoldenWireFormat fails when the encoding of a sample record changes
// and when the golden bytes no longer decode to the sample: both mean the
// wire contract between the services drifted (blocks: ingest -> processor;
// address-watch: query -> processor and delivery; activity: processor ->
// delivery; nft metadata request: processor and query -> processor; tx
// detail: processor -> query through ClickHouse; API requests: query ->
// processor; operation tasks: query -> query).
func TestGoldenWireFormat(t *testing.T) {
	for name, g := range goldenCases() {
		t.Run(name, func(t *testing.T) {
			got, err := g.encode()
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("..", "testdata", name+".golden.hex")
			if *update {
				if err := os.WriteFile(path, []byte(hex.EncodeToString(got)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run go test ./codec -update to create): %v", err)
			}
			want, err := hex.DecodeString(strings.TrimSpace(string(raw)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("wire format drifted for %s:\n got %x\nwant %x\nIf the change is intended and compatible, regenerate with -update.", name, got, want)
			}
			back, err := g.decode(want)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(back, g.msg) {
				t.Fatalf("golden bytes decode to a different record:\n%v", back)
			}
		})
	}
}

// TestActivityMessageID pins the messageId derivation: it is part of the
// contract (receivers deduplicate on it; ledgers in tests recompute it).
func TestRetractionMessageID(t *testing.T) {
	block := h("0xbd093536009f7dd785e9a5151d80069a93cc322f8b2df63d373865af4f6ee5be")
	other := h("0x0d093536009f7dd785e9a5151d80069a93cc322f8b2df63d373865af4f6ee5be")
	const msg = "94df1881-5d93-49d1-a1bd-607830608de2"
	a := RetractionMessageID(msg, block)
	if a != RetractionMessageID(msg, block) {
		t.Fatal("not deterministic")
	}
	if a == RetractionMessageID(msg, other) || a == msg {
		t.Fatal("the retraction of another block's inclusion, or the message itself, has the same id")
	}
	if len(a) != 36 || a[14] != '8' {
		t.Fatalf("%q is not a version 8 UUID", a)
	}
}

func TestActivityMessageID(t *testing.T) {
	const hook = "3718a368-f4d7-4bab-a790-6eda1b0e6d07"
	tx := h("0xb8ba5e8c941dadac65110b6a23dd662ed713b6ccd30338e810876ed2e81ef468")
	id := ActivityMessageID(hook, 43113, tx)
	// The first 16 bytes of sha256("3718a368-…-6eda1b0e6d07|43113|0xb8ba5e8c…f468")
	// with the version and variant bits set, computed independently (Python
	// hashlib) when the scheme was fixed.
	const want = "6e86d17b-f8ad-884a-a213-aad03bcf83db"
	if id != want {
		t.Fatalf("ActivityMessageID = %s, want %s", id, want)
	}
	if len(id) != 36 || id[14] != '8' || !strings.ContainsAny(id[19:20], "89ab") || strings.Count(id, "-") != 4 {
		t.Fatalf("%s is not a version 8 UUID", id)
	}
	if ActivityMessageID(hook, 43113, tx) != id {
		t.Fatal("not deterministic")
	}
	for name, other := range map[string]string{
		"webhook": ActivityMessageID("263942d1-74a4-4416-aeb4-948b9b9bb7cc", 43113, tx),
		"chain":   ActivityMessageID(hook, 43114, tx),
		"tx":      ActivityMessageID(hook, 43113, h("0x00")),
	} {
		if other == id {
			t.Errorf("another %s gives the same id", name)
		}
	}
}

// DecodeChainEvent's result points into its input instead of copying it
// (its documented contract: callers must leave the input alone).
func TestDecodeChainEventAliasesItsInput(t *testing.T) {
	ev := samples()["chain_event_block"]
	b, err := EncodeChainEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeChainEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, ev) {
		t.Fatalf("round trip: got %v, want %v", got, ev)
	}
	hash := got.GetBlock().GetHash()
	start, end := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))+uintptr(len(b))
	if p := uintptr(unsafe.Pointer(unsafe.SliceData(hash))); len(hash) != 32 || p < start || p >= end {
		t.Fatalf("block hash %x is a copy, not a view of the input", hash)
	}
}
