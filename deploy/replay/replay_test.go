package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/rpc"
	"github.com/klauspost/compress/zstd"

	"github.com/moraine-data/moraine/deploy/internal/jsonscan"
	"github.com/moraine-data/moraine/deploy/internal/shareddata"
)

const (
	cchainFile    = "avalanche/cchain_1_100/blocks_1_100.jsonl.zst"
	gunzillaFile  = "avalanche/gunzilla_14M/GUNZILLA_BLOCKS.jsonl.zst"
	tracerCfgJSON = `{"tracer":"callTracer"}`
)

var tracerCfg = json.RawMessage(tracerCfgJSON)

// fileBlock is one line of a recording, decoded independently of the replay
// package (encoding/json keeps the raw bytes of each value).
type fileBlock struct {
	Number   uint64
	Hash     string
	Block    json.RawMessage
	Receipts json.RawMessage
	Traces   json.RawMessage
}

// fileTxs are the per-transaction values of a block, decoded on demand.
type fileTxs struct {
	Txs      []json.RawMessage
	TxHashes []string
	Rcpts    []json.RawMessage
	TraceRes []json.RawMessage
}

func (fb fileBlock) txs(t *testing.T) fileTxs {
	t.Helper()
	var out fileTxs
	var blk struct {
		Transactions []json.RawMessage `json:"transactions"`
	}
	if err := json.Unmarshal(fb.Block, &blk); err != nil {
		t.Fatal(err)
	}
	out.Txs = blk.Transactions
	for _, tx := range blk.Transactions {
		var h struct {
			Hash string `json:"hash"`
		}
		if err := json.Unmarshal(tx, &h); err != nil {
			t.Fatal(err)
		}
		out.TxHashes = append(out.TxHashes, h.Hash)
	}
	if err := json.Unmarshal(fb.Receipts, &out.Rcpts); err != nil {
		t.Fatal(err)
	}
	var traces []struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(fb.Traces, &traces); err != nil {
		t.Fatal(err)
	}
	for _, tr := range traces {
		out.TraceRes = append(out.TraceRes, tr.Result)
	}
	return out
}

var (
	fileCache   = map[string][]fileBlock{}
	recCache    = map[string]*Recording{}
	fileCacheMu sync.Mutex
)

func readFile(t *testing.T, rel string) []fileBlock {
	t.Helper()
	fileCacheMu.Lock()
	defer fileCacheMu.Unlock()
	if fb, ok := fileCache[rel]; ok {
		return fb
	}
	f, err := os.Open(shareddata.Path(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	sc := bufio.NewScanner(dec)
	sc.Buffer(nil, 64<<20)
	var out []fileBlock
	for sc.Scan() {
		var line struct {
			Block    json.RawMessage `json:"block"`
			Receipts json.RawMessage `json:"receipts"`
			Traces   json.RawMessage `json:"traces"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		// number and hash come first in these files: decode only up to them.
		var blk struct {
			Number string `json:"number"`
			Hash   string `json:"hash"`
		}
		d := json.NewDecoder(bytes.NewReader(line.Block))
		if err := d.Decode(&blk); err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseUint(strings.TrimPrefix(blk.Number, "0x"), 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fileBlock{Number: n, Hash: blk.Hash, Block: line.Block, Receipts: line.Receipts, Traces: line.Traces})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	fileCache[rel] = out
	return out
}

func loadRecording(t *testing.T, rel string) *Recording {
	t.Helper()
	fileCacheMu.Lock()
	defer fileCacheMu.Unlock()
	if r, ok := recCache[rel]; ok {
		return r
	}
	r, err := Open(shareddata.Path(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	recCache[rel] = r
	return r
}

func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	cfg.ListenAddress = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func dial(t *testing.T, url string) *rpc.Client {
	t.Helper()
	cl, err := rpc.DialContext(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func hexNum(n uint64) string { return "0x" + strconv.FormatUint(n, 16) }

func callRaw(t *testing.T, cl *rpc.Client, method string, args ...any) json.RawMessage {
	t.Helper()
	var out json.RawMessage
	if err := cl.CallContext(t.Context(), &out, method, args...); err != nil {
		t.Fatalf("%s%v: %v", method, args, err)
	}
	return out
}

// sameJSON reports whether a and b are byte-identical; failing that, it says
// whether they are at least equal as JSON values.
func sameJSON(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	var g, w any
	_ = json.Unmarshal(got, &g)
	_ = json.Unmarshal(want, &w)
	if reflect.DeepEqual(g, w) {
		t.Errorf("%s: equal as JSON but not byte-identical", what)
		return
	}
	t.Errorf("%s differs:\n got %.300s\nwant %.300s", what, got, want)
}

func hashesOnly(t *testing.T, block json.RawMessage, hashes []string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(block, &m); err != nil {
		t.Fatal(err)
	}
	hs := make([]any, len(hashes))
	for i, h := range hashes {
		hs[i] = h
	}
	m["transactions"] = hs
	return m
}

// TestReplayCChain serves C-Chain blocks 1..100 and checks every method
// against the file, one call at a time and in batches.
func TestReplayCChain(t *testing.T) {
	file := readFile(t, cchainFile)
	s := startServer(t, Config{Recording: loadRecording(t, cchainFile)})
	cl := dial(t, s.HTTPURL())

	if got := string(callRaw(t, cl, "eth_chainId")); got != `"0xa86a"` {
		t.Fatalf("eth_chainId = %s (want 43114 read from the transactions)", got)
	}
	if got := string(callRaw(t, cl, "eth_blockNumber")); got != `"0x64"` {
		t.Fatalf("eth_blockNumber = %s", got)
	}
	sameJSON(t, "latest", callRaw(t, cl, "eth_getBlockByNumber", "latest", true), file[len(file)-1].Block)
	sameJSON(t, "earliest", callRaw(t, cl, "eth_getBlockByNumber", "earliest", true), file[0].Block)

	txs := 0
	for _, fb := range file {
		n := hexNum(fb.Number)
		ft := fb.txs(t)
		sameJSON(t, "block "+n, callRaw(t, cl, "eth_getBlockByNumber", n, true), fb.Block)
		sameJSON(t, "block by hash "+n, callRaw(t, cl, "eth_getBlockByHash", fb.Hash, true), fb.Block)
		var got any
		if err := json.Unmarshal(callRaw(t, cl, "eth_getBlockByNumber", n, false), &got); err != nil {
			t.Fatal(err)
		}
		if want := hashesOnly(t, fb.Block, ft.TxHashes); !reflect.DeepEqual(got, want) {
			t.Errorf("block %s without full transactions differs", n)
		}
		sameJSON(t, "receipts "+n, callRaw(t, cl, "eth_getBlockReceipts", n), fb.Receipts)
		sameJSON(t, "receipts by hash "+n, callRaw(t, cl, "eth_getBlockReceipts", fb.Hash), fb.Receipts)
		sameJSON(t, "traces "+n, callRaw(t, cl, "debug_traceBlockByNumber", n, tracerCfg), fb.Traces)
		sameJSON(t, "traces by hash "+n, callRaw(t, cl, "debug_traceBlockByHash", fb.Hash, tracerCfg), fb.Traces)
		for i, h := range ft.TxHashes {
			sameJSON(t, "tx "+h, callRaw(t, cl, "eth_getTransactionByHash", h), ft.Txs[i])
			sameJSON(t, "receipt "+h, callRaw(t, cl, "eth_getTransactionReceipt", h), ft.Rcpts[i])
			sameJSON(t, "trace "+h, callRaw(t, cl, "debug_traceTransaction", h, tracerCfg), ft.TraceRes[i])
			txs++
		}
	}
	if txs != 81 {
		t.Errorf("%d transactions, want 81", txs)
	}
	checkBatches(t, cl, file, 100)

	// Unknown blocks and transactions answer as geth does.
	for _, n := range []string{"0x0", "0x65", "0x5f5e100"} {
		for _, m := range []string{"eth_getBlockByNumber", "eth_getBlockReceipts"} {
			args := []any{n}
			if m == "eth_getBlockByNumber" {
				args = append(args, true)
			}
			if got := string(callRaw(t, cl, m, args...)); got != "null" {
				t.Errorf("%s(%s) = %.100s, want null", m, n, got)
			}
		}
	}
	missing := "0x" + strings.Repeat("ab", 32)
	for _, m := range []string{"eth_getBlockByHash", "eth_getTransactionByHash", "eth_getTransactionReceipt"} {
		args := []any{missing}
		if m == "eth_getBlockByHash" {
			args = append(args, false)
		}
		if got := string(callRaw(t, cl, m, args...)); got != "null" {
			t.Errorf("%s(unknown) = %s, want null", m, got)
		}
	}
	var out json.RawMessage
	err := cl.CallContext(t.Context(), &out, "debug_traceBlockByNumber", "0x65", tracerCfg)
	if err == nil || err.Error() != "block #101 not found" {
		t.Errorf("trace of a missing block: %v", err)
	}
	err = cl.CallContext(t.Context(), &out, "debug_traceBlockByHash", missing, tracerCfg)
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("trace of a missing hash: %v", err)
	}
	err = cl.CallContext(t.Context(), &out, "debug_traceBlockByNumber", "0x1", json.RawMessage(`{"tracer":"prestateTracer"}`))
	if err == nil {
		t.Error("prestateTracer accepted")
	}
	if got := string(callRaw(t, cl, "eth_call", map[string]any{"to": "0x0100000000000000000000000000000000000000", "data": "0x06fdde03"}, "latest")); got != `"0x"` {
		t.Errorf("eth_call = %s", got)
	}
	if got := string(callRaw(t, cl, "eth_getCode", "0x0100000000000000000000000000000000000000", "latest")); got != `"0x"` {
		t.Errorf("eth_getCode = %s", got)
	}
	err = cl.CallContext(t.Context(), &out, "eth_getLogsOfTheFuture")
	var rpcErr rpc.Error
	if err == nil || !asRPCError(err, &rpcErr) || rpcErr.ErrorCode() != -32601 {
		t.Errorf("unknown method: %v", err)
	}
	err = cl.CallContext(t.Context(), &out, "eth_subscribe", "newHeads")
	if err == nil {
		t.Error("eth_subscribe over HTTP accepted")
	}

	// Raw HTTP: a batch with a bad call, and a GET health check.
	resp, err := http.Post(s.HTTPURL(), "application/json", strings.NewReader(
		`[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":"x","method":"eth_getBlockByNumber","params":["zz",false]},{"jsonrpc":"2.0","method":"eth_blockNumber"}]`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var answers []map[string]json.RawMessage
	if err := json.Unmarshal(body, &answers); err != nil || len(answers) != 2 ||
		string(answers[0]["result"]) != `"0x64"` || answers[1]["error"] == nil || string(answers[1]["id"]) != `"x"` {
		t.Errorf("raw batch answer: %s (%v)", body, err)
	}
	resp, err = http.Get(s.HTTPURL())
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET: %v %v", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
}

// checkRawBatches posts batches of per blocks (block, receipts, traces for
// each) over plain HTTP and compares each whole answer with the answer built
// from the file's values: byte for byte, or else as JSON values.
func checkRawBatches(t *testing.T, url string, file []fileBlock, per int) {
	t.Helper()
	for start := 0; start < len(file); start += per {
		end := min(start+per, len(file))
		var req, want bytes.Buffer
		req.WriteByte('[')
		want.WriteByte('[')
		for i, fb := range file[start:end] {
			n := hexNum(fb.Number)
			for j, call := range []struct {
				method, params string
				result         []byte
			}{
				{"eth_getBlockByNumber", `["` + n + `",true]`, fb.Block},
				{"eth_getBlockReceipts", `["` + n + `"]`, fb.Receipts},
				{"debug_traceBlockByNumber", `["` + n + `",` + tracerCfgJSON + `]`, fb.Traces},
			} {
				if i > 0 || j > 0 {
					req.WriteByte(',')
					want.WriteByte(',')
				}
				id := strconv.Itoa(3*i + j)
				fmt.Fprintf(&req, `{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, call.method, call.params)
				fmt.Fprintf(&want, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, call.result)
			}
		}
		req.WriteByte(']')
		want.WriteByte(']')
		resp, err := http.Post(url, "application/json", &req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			sameJSON(t, fmt.Sprintf("batch of blocks %d..%d", file[start].Number, file[end-1].Number), got, want.Bytes())
		}
	}
}

func asRPCError(err error, target *rpc.Error) bool {
	e, ok := err.(rpc.Error)
	if ok {
		*target = e
	}
	return ok
}

// checkBatches fetches every block, its receipts and its traces through batch
// requests of per blocks each and compares them with the file.
func checkBatches(t *testing.T, cl *rpc.Client, file []fileBlock, per int) {
	t.Helper()
	for start := 0; start < len(file); start += per {
		end := min(start+per, len(file))
		var batch []rpc.BatchElem
		results := make([]json.RawMessage, 3*(end-start))
		for i, fb := range file[start:end] {
			n := hexNum(fb.Number)
			batch = append(batch,
				rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{n, true}, Result: &results[3*i]},
				rpc.BatchElem{Method: "eth_getBlockReceipts", Args: []any{n}, Result: &results[3*i+1]},
				rpc.BatchElem{Method: "debug_traceBlockByNumber", Args: []any{n, tracerCfg}, Result: &results[3*i+2]},
			)
		}
		if err := cl.BatchCallContext(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
		for i, fb := range file[start:end] {
			for j, want := range []json.RawMessage{fb.Block, fb.Receipts, fb.Traces} {
				if err := batch[3*i+j].Error; err != nil {
					t.Fatalf("batch %s block %d: %v", batch[3*i+j].Method, fb.Number, err)
				}
				sameJSON(t, fmt.Sprintf("batch %s block %d", batch[3*i+j].Method, fb.Number), results[3*i+j], want)
			}
		}
	}
}

// TestReplayGunzilla serves the 1,001 Gunzilla blocks (every 100th block) and
// checks all of them through batches, a sample one call at a time, and that
// the blocks in the gaps are unknown.
func TestReplayGunzilla(t *testing.T) {
	t0 := time.Now()
	file := readFile(t, gunzillaFile)
	t.Logf("file decoded in %v", time.Since(t0))
	t0 = time.Now()
	rec := loadRecording(t, gunzillaFile)
	t.Logf("recording loaded in %v", time.Since(t0))
	s := startServer(t, Config{Recording: rec, ChainID: 43419})
	cl := dial(t, s.HTTPURL())
	if len(file) != 1001 {
		t.Fatalf("%d blocks in the file", len(file))
	}
	if got := string(callRaw(t, cl, "eth_chainId")); got != `"0xa99b"` {
		t.Fatalf("eth_chainId = %s", got)
	}
	if got := string(callRaw(t, cl, "eth_blockNumber")); got != `"`+hexNum(14_100_000)+`"` {
		t.Fatalf("eth_blockNumber = %s", got)
	}
	start := time.Now()
	checkRawBatches(t, s.HTTPURL(), file, 50)
	elapsed := time.Since(start)
	t.Logf("batches: %d blocks, %d txs with receipts and traces in %v (%.0f tx/s)", len(file), s.Source().TxCount(), elapsed, float64(s.Source().TxCount())/elapsed.Seconds())
	t0 = time.Now()
	checkBatches(t, cl, file[:100], 25) // and through go-ethereum's client
	t.Logf("client batches in %v", time.Since(t0))
	t0 = time.Now()

	for i := 0; i < len(file); i += 50 {
		fb := file[i]
		n := hexNum(fb.Number)
		ft := fb.txs(t)
		sameJSON(t, "block "+n, callRaw(t, cl, "eth_getBlockByNumber", n, true), fb.Block)
		sameJSON(t, "receipts "+n, callRaw(t, cl, "eth_getBlockReceipts", n), fb.Receipts)
		sameJSON(t, "traces "+n, callRaw(t, cl, "debug_traceBlockByNumber", n, tracerCfg), fb.Traces)
		for j, h := range ft.TxHashes {
			sameJSON(t, "receipt "+h, callRaw(t, cl, "eth_getTransactionReceipt", h), ft.Rcpts[j])
		}
	}
	t.Logf("single calls in %v", time.Since(t0))

	// The sparse recording lists its numbers: every 100th from 14,000,000.
	numbers := func(from, to any) []string {
		var got []string
		if err := json.Unmarshal(callRaw(t, cl, "moraine_recordedBlockNumbers", from, to), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := numbers(hexNum(14_000_050), hexNum(14_000_300)); !slices.Equal(got, []string{hexNum(14_000_100), hexNum(14_000_200), hexNum(14_000_300)}) {
		t.Errorf("moraine_recordedBlockNumbers(14000050, 14000300) = %v", got)
	}
	if got := numbers("earliest", "latest"); len(got) != len(file) || got[0] != hexNum(file[0].Number) || got[len(got)-1] != hexNum(file[len(file)-1].Number) {
		t.Errorf("moraine_recordedBlockNumbers(earliest, latest): %d numbers, want %d", len(got), len(file))
	}
	if got := numbers(hexNum(14_000_001), hexNum(14_000_099)); len(got) != 0 {
		t.Errorf("moraine_recordedBlockNumbers over a gap = %v", got)
	}
	var out json.RawMessage
	var rpcErr rpc.Error
	if err := cl.CallContext(t.Context(), &out, "moraine_recordedBlockNumbers", hexNum(1)); !asRPCError(err, &rpcErr) || rpcErr.ErrorCode() != -32602 {
		t.Errorf("moraine_recordedBlockNumbers with one argument: %v, want invalid params", err)
	}
	if err := cl.CallContext(t.Context(), &out, "moraine_recordedBlockNumbers", "0x1", "12"); !asRPCError(err, &rpcErr) || err.Error() != "invalid argument 1: hex string without 0x prefix" {
		t.Errorf("moraine_recordedBlockNumbers with a bad bound: %v", err)
	}

	for _, n := range []uint64{14_000_001, 14_000_099, 13_999_900, 14_100_100} {
		if got := string(callRaw(t, cl, "eth_getBlockByNumber", hexNum(n), true)); got != "null" {
			t.Errorf("block %d = %.80s, want null", n, got)
		}
		if got := string(callRaw(t, cl, "eth_getBlockReceipts", hexNum(n))); got != "null" {
			t.Errorf("receipts of %d = %.80s, want null", n, got)
		}
		var out json.RawMessage
		err := cl.CallContext(t.Context(), &out, "debug_traceBlockByNumber", hexNum(n), tracerCfg)
		if want := fmt.Sprintf("block #%d not found", n); err == nil || err.Error() != want {
			t.Errorf("trace of %d: %v, want %q", n, err, want)
		}
	}
}

// TestReplayLive releases blocks progressively and delivers them to newHeads
// subscribers over WebSocket.
func TestReplayLive(t *testing.T) {
	file := readFile(t, cchainFile)
	s := startServer(t, Config{Recording: loadRecording(t, cchainFile), Mode: ModeLive, Rate: 25})
	ws := dial(t, s.WSURL())
	ctx := t.Context()

	heads := make(chan json.RawMessage, 100)
	sub, err := ws.Subscribe(ctx, "eth", heads, "newHeads")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	first := s.Head()
	if first >= 10 {
		t.Fatalf("head %d already at start", first)
	}
	// A block far above the head is unknown, with its transactions.
	late := file[len(file)-1]
	if got := string(callRaw(t, ws, "eth_getBlockByNumber", hexNum(late.Number), false)); got != "null" {
		t.Fatalf("unreleased block served: %.80s", got)
	}
	var lateTx string
	for _, fb := range file[50:] {
		if ft := fb.txs(t); len(ft.TxHashes) > 0 {
			lateTx = ft.TxHashes[0]
			break
		}
	}
	if got := string(callRaw(t, ws, "eth_getTransactionReceipt", lateTx)); got != "null" {
		t.Fatalf("unreleased receipt served: %.80s", got)
	}
	var out json.RawMessage
	if err := ws.CallContext(ctx, &out, "debug_traceBlockByNumber", hexNum(late.Number), tracerCfg); err == nil {
		t.Fatal("unreleased block traced")
	}

	prev := first
	for got := 0; got < 8; got++ {
		select {
		case h := <-heads:
			var hdr struct {
				Number, Hash string
				Transactions json.RawMessage
			}
			if err := json.Unmarshal(h, &hdr); err != nil {
				t.Fatal(err)
			}
			n, _ := strconv.ParseUint(strings.TrimPrefix(hdr.Number, "0x"), 16, 64)
			if n != prev+1 || hdr.Hash != file[n-1].Hash || hdr.Transactions != nil {
				t.Fatalf("head %d (%s) after %d; file hash %s", n, hdr.Hash, prev, file[n-1].Hash)
			}
			prev = n
			// The head is served once announced.
			sameJSON(t, "released block", callRaw(t, ws, "eth_getBlockByNumber", hdr.Number, true), file[n-1].Block)
		case err := <-sub.Err():
			t.Fatal(err)
		case <-time.After(5 * time.Second):
			t.Fatalf("no head after %d", prev)
		}
	}
	var bn string
	if err := ws.CallContext(ctx, &bn, "eth_blockNumber"); err != nil {
		t.Fatal(err)
	}
	if n, _ := strconv.ParseUint(strings.TrimPrefix(bn, "0x"), 16, 64); n < prev {
		t.Fatalf("eth_blockNumber %d below the last announced head %d", n, prev)
	}
	// Only released blocks are listed.
	var listed []string
	if err := ws.CallContext(ctx, &listed, "moraine_recordedBlockNumbers", "0x0", hexNum(late.Number)); err != nil {
		t.Fatal(err)
	}
	if len(listed) < int(prev) || len(listed) >= len(file) {
		t.Errorf("moraine_recordedBlockNumbers in live mode listed %d blocks; %d announced of %d", len(listed), prev, len(file))
	}
	for i, n := range listed {
		if n != hexNum(file[i].Number) {
			t.Fatalf("moraine_recordedBlockNumbers in live mode: %s at %d, want %s", n, i, hexNum(file[i].Number))
		}
	}
	// Batches work over WebSocket too.
	checkBatches(t, ws, file[:prev], 10)
}

func TestScanner(t *testing.T) {
	obj := []byte(` { "a" : "x\\\"y\\\\" , "b":[1, {"c":"]}"}, -2.5e3, true],"d":null ,"e":{}} `)
	var keys []string
	var vals []string
	err := jsonscan.EachField(obj, func(k, raw, v []byte) error {
		keys = append(keys, string(k))
		vals = append(vals, string(v))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`"x\\\"y\\\\"`, `[1, {"c":"]}"}, -2.5e3, true]`, `null`, `{}`}
	if fmt.Sprint(keys) != "[a b d e]" || !reflect.DeepEqual(vals, want) {
		t.Fatalf("keys %q vals %q", keys, vals)
	}
	var elems []string
	if err := jsonscan.EachElement([]byte(vals[1]), func(v []byte) error { elems = append(elems, string(v)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(elems) != 4 || elems[1] != `{"c":"]}"}` {
		t.Fatalf("elements %q", elems)
	}
	for _, bad := range []string{`{"a":`, `{"a" 1}`, `{"a":"x}`, `[1 2]`} {
		var err error
		if bad[0] == '{' {
			err = jsonscan.EachField([]byte(bad), func(_, _, _ []byte) error { return nil })
		} else {
			err = jsonscan.EachElement([]byte(bad), func([]byte) error { return nil })
		}
		if err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// BenchmarkReplayGunzilla measures what an indexer sees: each block, its
// receipts and its traces fetched in one HTTP batch per block, bodies read but
// not decoded. Reports transactions per second.
func BenchmarkReplayGunzilla(b *testing.B) {
	rec, err := Open(shareddata.Path(b, gunzillaFile))
	if err != nil {
		b.Fatal(err)
	}
	s, err := Start(b.Context(), Config{Recording: rec, ListenAddress: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8, DisableCompression: true}}
	bodies := make([]string, rec.Len())
	for i := range rec.Len() {
		n := hexNum(rec.Block(i).Number)
		bodies[i] = `[{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["` + n + `",true]},` +
			`{"jsonrpc":"2.0","id":2,"method":"eth_getBlockReceipts","params":["` + n + `"]},` +
			`{"jsonrpc":"2.0","id":3,"method":"debug_traceBlockByNumber","params":["` + n + `",` + tracerCfgJSON + `]}]`
	}
	b.ResetTimer()
	var bytesRead int64
	for range b.N {
		for _, body := range bodies {
			resp, err := client.Post(s.HTTPURL(), "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			bytesRead += n
		}
	}
	b.ReportMetric(float64(rec.TxCount()*b.N)/b.Elapsed().Seconds(), "tx/s")
	b.ReportMetric(float64(bytesRead)/b.Elapsed().Seconds()/1e6, "MB/s")
}

// TestHashScheme checks that the corpus hashes read back to their block and
// position, and that other hashes are not taken for them.
func TestHashScheme(t *testing.T) {
	s, err := NewHashScheme([]byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[Hash]bool{}
	for _, n := range []uint64{0, 1, 2, 1 << 40} {
		for _, i := range []uint32{0, 1, 4000} {
			h := s.Tx(n, i)
			kind, gn, gi, ok := s.decode(h)
			if !ok || kind != hashKindTx || gn != n || gi != i {
				t.Errorf("Tx(%d, %d) decodes to %d %d %d %v", n, i, kind, gn, gi, ok)
			}
			seen[h] = true
		}
		b := s.Block(n)
		if kind, gn, _, ok := s.decode(b); !ok || kind != hashKindBlock || gn != n {
			t.Errorf("Block(%d) decodes to %d %d %v", n, kind, gn, ok)
		}
		seen[b] = true
	}
	if len(seen) != 16 {
		t.Errorf("%d distinct hashes of 16", len(seen))
	}
	h := s.Block(5)
	h[31] ^= 1
	if _, _, _, ok := s.decode(h); ok {
		t.Error("a changed hash still decodes")
	}
	if _, _, _, ok := s.decode(Hash{}); ok {
		t.Error("the zero hash decodes")
	}
}
