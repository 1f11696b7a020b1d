package convert

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkGunzilla converts the whole Gunzilla recording (1,001 blocks,
// 9,887 txs, 207,990 frames) per iteration and reports transactions per
// second on one core.
func BenchmarkGunzilla(b *testing.B) {
	lines := readJSONL(b, "avalanche/gunzilla_14M/GUNZILLA_BLOCKS.jsonl.zst")
	txs := 0
	for _, l := range lines {
		blk, err := Block(43419, l.raw(), true)
		require.NoError(b, err)
		txs += len(blk.Transactions)
	}
	b.ResetTimer()
	for b.Loop() {
		for _, l := range lines {
			if _, err := Block(43419, l.raw(), true); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(txs*b.N)/b.Elapsed().Seconds(), "tx/s")
}

// BenchmarkGunzillaStdlib is the same conversion's JSON decoding done by
// encoding/json into typed structs, for comparison with jsonx.
func BenchmarkGunzillaStdlib(b *testing.B) {
	lines := readJSONL(b, "avalanche/gunzilla_14M/GUNZILLA_BLOCKS.jsonl.zst")
	type frame struct {
		Type, From, To, Value, Gas, GasUsed, Input, Output, Error, RevertReason string
		Calls                                                                   []frame
	}
	b.ResetTimer()
	for b.Loop() {
		for _, l := range lines {
			var blk struct {
				Transactions []map[string]any
			}
			var receipts []struct {
				GasUsed, EffectiveGasPrice string
				Logs                       []struct {
					Address, Data string
					Topics        []string
				}
			}
			var traces []struct {
				TxHash string
				Result frame
			}
			if json.Unmarshal(l.Block, &blk) != nil || json.Unmarshal(l.Receipts, &receipts) != nil || json.Unmarshal(l.Traces, &traces) != nil {
				b.Fatal("decode")
			}
		}
	}
}
