package convert

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/jsonx"
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

// BenchmarkSplitGunzilla finds the end of every block, receipts and traces
// value of the recording, as ingest's RPC client does to split a batch
// answer into its results: Extent (what it uses) against Raw.
func BenchmarkSplitGunzilla(b *testing.B) {
	lines := readJSONL(b, "avalanche/gunzilla_14M/GUNZILLA_BLOCKS.jsonl.zst")
	size := 0
	for _, l := range lines {
		size += len(l.Block) + len(l.Receipts) + len(l.Traces)
	}
	for _, bc := range []struct {
		name string
		skip func(*jsonx.Reader) ([]byte, error)
	}{{"Extent", (*jsonx.Reader).Extent}, {"Raw", (*jsonx.Reader).Raw}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				for _, l := range lines {
					for _, v := range [][]byte{l.Block, l.Receipts, l.Traces} {
						if _, err := bc.skip(jsonx.NewReader(v)); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		})
	}
}
