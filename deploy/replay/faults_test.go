package replay

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFaults: each fault does what the node fault suite relies on, set at
// run time through moraine_setFaults.
func TestFaults(t *testing.T) {
	rec := loadRecording(t, "avalanche/cchain_1_100/blocks_1_100.jsonl.zst")
	s := startServer(t, Config{Recording: rec, ChainID: 43114, FaultControl: true})
	cl := dial(t, s.HTTPURL())
	set := func(f Faults) {
		t.Helper()
		callRaw(t, cl, "moraine_setFaults", f)
	}
	logs := func(receipts json.RawMessage) int {
		var rs []struct{ Logs []json.RawMessage }
		if err := json.Unmarshal(receipts, &rs); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range rs {
			n += len(r.Logs)
		}
		return n
	}
	// Block 80 of the recording has logs; find one that has.
	var withLogs uint64
	for n := uint64(1); n <= 100 && withLogs == 0; n++ {
		if logs(callRaw(t, cl, "eth_getBlockReceipts", hexNum(n))) > 0 {
			withLogs = n
		}
	}
	clean := callRaw(t, cl, "eth_getBlockReceipts", hexNum(withLogs))

	set(Faults{DropLog: 1})
	if got := logs(callRaw(t, cl, "eth_getBlockReceipts", hexNum(withLogs))); got != logs(clean)-1 {
		t.Errorf("dropLog: %d logs, want %d", got, logs(clean)-1)
	}
	set(Faults{DropReceipt: 1})
	var rs []json.RawMessage
	_ = json.Unmarshal(callRaw(t, cl, "eth_getBlockReceipts", hexNum(withLogs)), &rs)
	var want []json.RawMessage
	_ = json.Unmarshal(clean, &want)
	if len(rs) != len(want)-1 {
		t.Errorf("dropReceipt: %d receipts, want %d", len(rs), len(want)-1)
	}
	set(Faults{TruncateTraces: 1})
	var tr, trWant []json.RawMessage
	_ = json.Unmarshal(callRaw(t, cl, "debug_traceBlockByNumber", hexNum(withLogs), map[string]string{"tracer": "callTracer"}), &tr)
	set(Faults{})
	_ = json.Unmarshal(callRaw(t, cl, "debug_traceBlockByNumber", hexNum(withLogs), map[string]string{"tracer": "callTracer"}), &trWant)
	if len(tr) != len(trWant)-1 {
		t.Errorf("truncateTraces: %d traces, want %d", len(tr), len(trWant)-1)
	}

	set(Faults{Fork: 1})
	forked := callRaw(t, cl, "eth_getBlockByNumber", hexNum(withLogs), false)
	forkedReceipts := callRaw(t, cl, "eth_getBlockReceipts", hexNum(withLogs))
	var h struct{ Hash string }
	_ = json.Unmarshal(forked, &h)
	if !strings.HasSuffix(h.Hash, "f0f0f0f0") || !bytes.Contains(forkedReceipts, []byte(h.Hash)) {
		t.Errorf("fork: block hash %s, receipts agree: %v", h.Hash, bytes.Contains(forkedReceipts, []byte(h.Hash)))
	}

	set(Faults{LagBlocks: 30})
	var head string
	_ = json.Unmarshal(callRaw(t, cl, "eth_blockNumber"), &head)
	if head != hexNum(70) || string(callRaw(t, cl, "eth_getBlockByNumber", hexNum(80), false)) != "null" {
		t.Errorf("lag: head %s", head)
	}

	set(Faults{RateLimit: 1})
	resp, err := http.Post(s.HTTPURL(), "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("rateLimit: %d", resp.StatusCode)
	}
	set(Faults{})
	var counts map[string]int64
	_ = json.Unmarshal(callRaw(t, cl, "moraine_faultCounts"), &counts)
	if counts["dropLog"] != 1 || counts["rateLimit"] != 1 {
		t.Errorf("counts %v", counts)
	}
}

// TestFaultControlIsOff: without FaultControl nobody can make a replay
// source misbehave.
func TestFaultControlIsOff(t *testing.T) {
	s := startServer(t, Config{Recording: loadRecording(t, "avalanche/cchain_1_100/blocks_1_100.jsonl.zst"), ChainID: 43114})
	cl := dial(t, s.HTTPURL())
	var out json.RawMessage
	if err := cl.CallContext(t.Context(), &out, "moraine_setFaults", Faults{DropLog: 1}); err == nil {
		t.Fatal("moraine_setFaults accepted without FaultControl")
	}
}

// TestTracedBlocksPerSecond: the tracer cap paces traced blocks.
func TestTracedBlocksPerSecond(t *testing.T) {
	s := startServer(t, Config{Recording: loadRecording(t, "avalanche/cchain_1_100/blocks_1_100.jsonl.zst"), ChainID: 43114, TracedBlocksPerSecond: 50})
	cl := dial(t, s.HTTPURL())
	start := time.Now()
	for n := uint64(1); n <= 26; n++ {
		callRaw(t, cl, "debug_traceBlockByNumber", hexNum(n), map[string]string{"tracer": "callTracer"})
	}
	if d := time.Since(start); d < 480*time.Millisecond {
		t.Errorf("26 traced blocks at 50/s took %v", d)
	}
}
