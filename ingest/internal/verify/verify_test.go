package verify

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/ingest/internal/chaintest"
	"github.com/moraine-data/moraine/ingest/internal/convert"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/schemas/record"
)

var all = Checks{ReceiptsRoot: true, LogsBloom: true, TransactionsRoot: true}

func convertAll(t testing.TB, blocks []chaintest.Block) []*record.Block {
	out := make([]*record.Block, len(blocks))
	for i, b := range blocks {
		rb, err := convert.Block(1, convert.Raw{Block: b.Block, Receipts: b.Receipts, Traces: b.Traces}, true)
		require.NoError(t, err)
		out[i] = rb
	}
	return out
}

// TestRealBlocksVerify: every recorded block passes every check with
// go-ethereum's derivation, Gunzilla's and the C-Chain's (whose recording
// writes a contract creation's "to" as "", read as null).
func TestRealBlocksVerify(t *testing.T) {
	for _, tc := range []struct {
		file   string
		checks Checks
	}{
		{"avalanche/gunzilla_14M/GUNZILLA_BLOCKS.jsonl.zst", all},
		{"avalanche/cchain_1_100/blocks_1_100.jsonl.zst", all},
	} {
		t.Run(tc.file, func(t *testing.T) {
			blocks := chaintest.Load(t, tc.file)
			recs := convertAll(t, blocks)
			logs := 0
			start := time.Now()
			for i, b := range recs {
				require.NoError(t, Block(tc.checks, b, blocks[i].Block), "block %d", b.Number)
				for _, tx := range b.Transactions {
					logs += len(tx.Logs)
				}
			}
			t.Logf("%d blocks, %d logs verified in %v", len(recs), logs, time.Since(start))
			require.Positive(t, logs)
		})
	}
}

// TestIncompleteBlocksFail: a log or a receipt missing, or a transaction
// altered, fails the check that covers it.
func TestIncompleteBlocksFail(t *testing.T) {
	blocks := chaintest.Load(t, "avalanche/gunzilla_14M/GUNZILLA_BLOCKS.jsonl.zst")
	var raw chaintest.Block
	var b *record.Block
	for i, rb := range convertAll(t, blocks) {
		for _, tx := range rb.Transactions {
			if len(tx.Logs) > 1 && b == nil {
				raw, b = blocks[i], rb
			}
		}
	}
	require.NotNil(t, b)
	clone := func() *record.Block {
		c, err := convert.Block(1, convert.Raw{Block: raw.Block, Receipts: raw.Receipts, Traces: raw.Traces}, true)
		require.NoError(t, err)
		return c
	}
	check := func(name string, c *record.Block, rawBlock json.RawMessage, want string, checks Checks) {
		t.Run(name, func(t *testing.T) {
			err := Block(checks, c, rawBlock)
			var f *Failure
			require.True(t, errors.As(err, &f), "%v", err)
			require.Equal(t, want, f.Check)
			t.Log(err)
		})
	}
	dropLog := clone()
	for _, tx := range dropLog.Transactions {
		if len(tx.Logs) > 1 {
			tx.Logs = tx.Logs[1:]
			break
		}
	}
	check("log dropped", dropLog, raw.Block, chains.CheckReceiptsRoot, all)
	// The bloom alone misses a dropped log whose address and topics other
	// logs share (the usual Transfer); an address no other log has shows.
	moved := clone()
	moved.Transactions[0].Logs[0].Address = []byte("\xde\xad\xbe\xef\xde\xad\xbe\xef\xde\xad\xbe\xef\xde\xad\xbe\xef\xde\xad\xbe\xef")
	check("log address altered, bloom only", moved, raw.Block, chains.CheckLogsBloom, Checks{LogsBloom: true})
	dropReceipt := clone()
	dropReceipt.Transactions = dropReceipt.Transactions[:len(dropReceipt.Transactions)-1]
	check("receipt dropped", dropReceipt, raw.Block, chains.CheckReceiptsRoot, all)
	gas := clone()
	gas.Transactions[0].CumulativeGasUsed++
	check("cumulative gas", gas, raw.Block, chains.CheckReceiptsRoot, all)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw.Block, &m))
	txs := m["transactions"].([]any)
	m["transactions"] = txs[:len(txs)-1]
	short, err := json.Marshal(m)
	require.NoError(t, err)
	check("transaction dropped", clone(), short, chains.CheckTransactionsRoot, all)
	require.NoError(t, Block(Checks{}, dropLog, raw.Block), "no checks, no failure")
}

// BenchmarkVerify is verification's CPU per block on the Gunzilla
// recording (all three checks), beside the conversion it follows.
func BenchmarkVerify(b *testing.B) {
	blocks := chaintest.Load(b, "avalanche/gunzilla_14M/GUNZILLA_BLOCKS.jsonl.zst")
	recs := convertAll(b, blocks)
	for _, tc := range []struct {
		name   string
		checks Checks
	}{{"receipts+bloom", Checks{ReceiptsRoot: true, LogsBloom: true}}, {"all", all}} {
		b.Run(tc.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				if err := Block(tc.checks, recs[i], blocks[i].Block); err != nil {
					b.Fatal(err)
				}
				i = (i + 1) % len(recs)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/block")
		})
	}
	b.Run("convert", func(b *testing.B) {
		i := 0
		for b.Loop() {
			bl := blocks[i]
			if _, err := convert.Block(1, convert.Raw{Block: bl.Block, Receipts: bl.Receipts, Traces: bl.Traces}, true); err != nil {
				b.Fatal(err)
			}
			i = (i + 1) % len(blocks)
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/block")
	})
}
