package codec

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
		Hash:                  h("0x1f4f8b1fbd4a18ad2ff0b0bfa2c37ec6d3a5d88de7fc13d6e0d1b8d3f4b0c201"),
		ParentHash:            h("0x2a54f142fa3acee92a839b071bb6c7cca7abc2a797cf4aac68b07f79406ac0cb"),
		Timestamp:             1760000000, TimestampMilliseconds: u64(1760000000123), MinDelayExcess: u64(7970124),
		BaseFee: "25000000000", GasUsed: 53608, GasLimit: 15000000, BlockGasCost: "0", ExtDataGasUsed: "0",
		FeesSpent: "1435117553916960", CumulativeTransactions: 500325352,
		Miner:  h("0x0100000000000000000000000000000000000000"),
		Size:   1080, TracesIncluded: true, FetchedAtUnixMs: 1760000000456,
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

// TestGoldenWireFormat fails when the encoding of the sample events changes
// and when the golden bytes no longer decode to the samples: both mean the
// wire contract between ingest and the processor drifted.
func TestGoldenWireFormat(t *testing.T) {
	for name, ev := range samples() {
		t.Run(name, func(t *testing.T) {
			got, err := EncodeChainEvent(ev)
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
			back, err := DecodeChainEvent(want)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(back, ev) {
				t.Fatalf("golden bytes decode to a different event:\n%v", back)
			}
		})
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
