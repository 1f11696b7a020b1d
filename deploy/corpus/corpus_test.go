package corpus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/moraine-data/moraine/deploy/internal/shareddata"
	"github.com/moraine-data/moraine/deploy/replay"
)

const (
	gunzillaFile = "avalanche/gunzilla_14M/GUNZILLA_BLOCKS.jsonl.zst"
	cchainFile   = "avalanche/cchain_1_100/blocks_1_100.jsonl.zst"
)

// line is one block of a recording or corpus, decoded with encoding/json,
// independently of the generator.
type line struct {
	Block    map[string]any   `json:"block"`
	Receipts []map[string]any `json:"receipts"`
	Traces   []map[string]any `json:"traces"`
}

func readLines(t testing.TB, path string) []line {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	data, err := io.ReadAll(dec)
	if err != nil {
		t.Fatal(err)
	}
	var out []line
	for _, l := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var ln line
		if err := json.Unmarshal(l, &ln); err != nil {
			t.Fatal(err)
		}
		out = append(out, ln)
	}
	return out
}

func str(v any) string { s, _ := v.(string); return s }

func quantity(n uint64) string { return fmt.Sprintf("0x%x", n) }

// without returns a copy of m without keys.
func without(m map[string]any, keys ...string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

// TestGenerate builds a corpus of a cycle and a quarter from the real
// recordings and checks every block against its source: renumbered,
// contiguous, parent links holding, hashes unique and repeated consistently
// wherever a block or transaction hash appears, everything else as recorded.
func TestGenerate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Sources = []string{shareddata.Path(t, gunzillaFile), shareddata.Path(t, cchainFile)}
	cfg.Out = t.TempDir()
	cfg.Blocks, cfg.Transactions = 1400, 0
	cfg.First = 7
	cfg.Level = zstd.SpeedFastest
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	meta, err := Generate(t.Context(), cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Blocks != 1400 || meta.First != 7 || meta.Last != 1406 || meta.ChainID != cfg.ChainID {
		t.Fatalf("meta %+v", meta)
	}

	// The cycle, as the test reads it: both sources by block number, each
	// spread evenly.
	gun := readLines(t, cfg.Sources[0])
	cch := readLines(t, cfg.Sources[1])
	if len(gun) != 1001 || len(cch) != 100 {
		t.Fatalf("sources: %d and %d blocks", len(gun), len(cch))
	}
	got := readLines(t, filepath.Join(cfg.Out, "blocks.jsonl.zst"))
	if len(got) != 1400 {
		t.Fatalf("%d blocks in the corpus", len(got))
	}
	blockHashes := map[string]uint64{}
	txHashes := map[string]bool{}
	var txs, logs, frames uint64
	prevHash := ""
	fromC := 0
	for i, g := range got {
		n := cfg.First + uint64(i)
		// Which source block: the cycle has 1,101 blocks; the C-Chain block j
		// sits at (j+0.5)/100, the Gunzilla block j at (j+0.5)/1001.
		var src line
		pos := i % 1101
		jg, jc := 0, 0
		for k := 0; k <= pos; k++ {
			ag := (float64(jg) + 0.5) / 1001
			ac := (float64(jc) + 0.5) / 100
			if jg < 1001 && (jc >= 100 || ag <= ac) {
				src = gun[jg]
				jg++
			} else {
				src = cch[jc]
				jc++
				if k == pos {
					fromC++
				}
			}
		}
		b := g.Block
		if str(b["number"]) != quantity(n) {
			t.Fatalf("block %d has number %s", n, b["number"])
		}
		hash := str(b["hash"])
		if prev, dup := blockHashes[hash]; dup {
			t.Fatalf("blocks %d and %d share hash %s", prev, n, hash)
		}
		blockHashes[hash] = n
		if prevHash != "" && str(b["parentHash"]) != prevHash {
			t.Fatalf("block %d: parentHash %s, block %d's hash is %s", n, b["parentHash"], n-1, prevHash)
		}
		prevHash = hash
		if want := quantity(uint64(cfg.StartTime.Unix()) + uint64(i)*2); str(b["timestamp"]) != want {
			t.Fatalf("block %d: timestamp %s, want %s", n, b["timestamp"], want)
		}
		// The block's other fields are the source's.
		skip := []string{"number", "hash", "parentHash", "timestamp", "transactions"}
		if !reflect.DeepEqual(without(b, skip...), without(src.Block, skip...)) {
			t.Fatalf("block %d differs from its source block %s beyond number, hashes and time", n, src.Block["number"])
		}
		gtxs, _ := b["transactions"].([]any)
		stxs, _ := src.Block["transactions"].([]any)
		if len(gtxs) != len(stxs) || len(g.Receipts) != len(src.Receipts) || len(g.Traces) != len(src.Traces) {
			t.Fatalf("block %d: %d txs, %d receipts, %d traces; source %d, %d, %d", n,
				len(gtxs), len(g.Receipts), len(g.Traces), len(stxs), len(src.Receipts), len(src.Traces))
		}
		// Each transaction's new hash, by its recorded hash.
		newHash := map[string]string{}
		for j, v := range gtxs {
			tx := v.(map[string]any)
			st := stxs[j].(map[string]any)
			h := str(tx["hash"])
			if txHashes[h] {
				t.Fatalf("block %d: transaction hash %s seen before", n, h)
			}
			txHashes[h] = true
			newHash[str(st["hash"])] = h
			if str(tx["blockHash"]) != hash || str(tx["blockNumber"]) != quantity(n) {
				t.Fatalf("block %d tx %d: blockHash %s, blockNumber %s", n, j, tx["blockHash"], tx["blockNumber"])
			}
			skip := []string{"hash", "blockHash", "blockNumber"}
			if !reflect.DeepEqual(without(tx, skip...), without(st, skip...)) {
				t.Fatalf("block %d tx %d differs from its source beyond hashes and number", n, j)
			}
		}
		txs += uint64(len(gtxs))
		for j, r := range g.Receipts {
			sr := src.Receipts[j]
			if str(r["transactionHash"]) != newHash[str(sr["transactionHash"])] || str(r["blockHash"]) != hash || str(r["blockNumber"]) != quantity(n) {
				t.Fatalf("block %d receipt %d: transactionHash %s, blockHash %s, blockNumber %s", n, j, r["transactionHash"], r["blockHash"], r["blockNumber"])
			}
			gl, _ := r["logs"].([]any)
			sl, _ := sr["logs"].([]any)
			for k := range gl {
				l, s := gl[k].(map[string]any), sl[k].(map[string]any)
				if str(l["transactionHash"]) != newHash[str(s["transactionHash"])] || str(l["blockHash"]) != hash || str(l["blockNumber"]) != quantity(n) {
					t.Fatalf("block %d receipt %d log %d refers elsewhere", n, j, k)
				}
				skip := []string{"transactionHash", "blockHash", "blockNumber"}
				if !reflect.DeepEqual(without(l, skip...), without(s, skip...)) {
					t.Fatalf("block %d receipt %d log %d differs from its source", n, j, k)
				}
			}
			logs += uint64(len(gl))
			skip := []string{"transactionHash", "blockHash", "blockNumber", "logs"}
			if !reflect.DeepEqual(without(r, skip...), without(sr, skip...)) {
				t.Fatalf("block %d receipt %d differs from its source", n, j)
			}
		}
		for j, tr := range g.Traces {
			str0 := src.Traces[j]
			if str(tr["txHash"]) != newHash[str(str0["txHash"])] {
				t.Fatalf("block %d trace %d: txHash %s", n, j, tr["txHash"])
			}
			if !reflect.DeepEqual(tr["result"], str0["result"]) {
				t.Fatalf("block %d trace %d differs from its source", n, j)
			}
			frames += countFramesJSON(tr["result"])
		}
	}
	if fromC < 100 {
		t.Errorf("%d blocks came from the C-Chain recording, want every one of its 100 blocks in the whole cycle", fromC)
	}
	if txs != meta.Transactions || logs != meta.Logs || frames != meta.CallFrames {
		t.Errorf("counted %d txs, %d logs, %d frames; meta says %d, %d, %d", txs, logs, frames, meta.Transactions, meta.Logs, meta.CallFrames)
	}

	// The same configuration gives the same bytes.
	again := cfg
	again.Out = t.TempDir()
	if _, err := Generate(t.Context(), again, logger); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"blocks.jsonl.zst", "frames.idx", "corpus.json"} {
		a, _ := os.ReadFile(filepath.Join(cfg.Out, f))
		b, _ := os.ReadFile(filepath.Join(again.Out, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs with the same configuration", f)
		}
	}

	t.Run("served", func(t *testing.T) { checkServed(t, cfg.Out, got, cfg.First) })
}

func countFramesJSON(v any) uint64 {
	m, ok := v.(map[string]any)
	if !ok {
		return 0
	}
	n := uint64(1)
	calls, _ := m["calls"].([]any)
	for _, c := range calls {
		n += countFramesJSON(c)
	}
	return n
}

// checkServed serves the corpus with the replay source and reads blocks,
// transactions and receipts back by number and by hash, from frames in
// any order.
func checkServed(t *testing.T, dir string, want []line, first uint64) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := replay.Start(ctx, replay.Config{File: dir, ListenAddress: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	call := func(method string, params ...any) json.RawMessage {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		resp, err := http.Post(s.HTTPURL(), "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Result json.RawMessage `json:"result"`
			Error  *struct{ Message string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		if out.Error != nil {
			t.Fatalf("%s%v: %s", method, params, out.Error.Message)
		}
		return out.Result
	}
	if got := string(call("eth_chainId")); got != `"0x18649"` {
		t.Errorf("eth_chainId = %s", got)
	}
	if got := string(call("eth_blockNumber")); got != `"`+quantity(first+uint64(len(want))-1)+`"` {
		t.Errorf("eth_blockNumber = %s", got)
	}
	// Backwards, then a stride across frames: the cache must not matter.
	var order []int
	for i := len(want) - 1; i >= len(want)-40; i-- {
		order = append(order, i)
	}
	for i := 0; i < len(want); i += 97 {
		order = append(order, i)
	}
	for _, i := range order {
		w := want[i]
		n := quantity(first + uint64(i))
		var got map[string]any
		if err := json.Unmarshal(call("eth_getBlockByNumber", n, true), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, w.Block) {
			t.Fatalf("block %s served differs from the file", n)
		}
		if err := json.Unmarshal(call("eth_getBlockByHash", w.Block["hash"], false), &got); err != nil || str(got["number"]) != n {
			t.Fatalf("block %s by hash: %v %v", n, got["number"], err)
		}
		txs, _ := w.Block["transactions"].([]any)
		for j, v := range txs {
			h := str(v.(map[string]any)["hash"])
			var tx, rc map[string]any
			if err := json.Unmarshal(call("eth_getTransactionByHash", h), &tx); err != nil || !reflect.DeepEqual(tx, v) {
				t.Fatalf("block %s tx %d by hash differs (%v)", n, j, err)
			}
			if err := json.Unmarshal(call("eth_getTransactionReceipt", h), &rc); err != nil || !reflect.DeepEqual(rc, w.Receipts[j]) {
				t.Fatalf("block %s receipt %d by hash differs (%v)", n, j, err)
			}
		}
	}
	// A hash of no block of the corpus, and one of the scheme beyond its end.
	for _, h := range []string{"0x" + strings.Repeat("ab", 32), "0x" + fmt.Sprintf("%x", mustScheme(t).Block(first+uint64(len(want))))} {
		if got := string(call("eth_getBlockByHash", h, false)); got != "null" {
			t.Errorf("eth_getBlockByHash(%s) = %.80s, want null", h, got)
		}
		if got := string(call("eth_getTransactionByHash", h)); got != "null" {
			t.Errorf("eth_getTransactionByHash(%s) = %.80s, want null", h, got)
		}
	}
}

func mustScheme(t *testing.T) *replay.HashScheme {
	s, err := replay.NewHashScheme(Key(DefaultConfig().Seed))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
