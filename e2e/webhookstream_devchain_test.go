package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// streamMsg is one delivery as a receiver of the webhook stream reads it.
type streamMsg struct {
	seq       uint64
	kind      string // activity | retraction
	messageID string
	retracts  string // for a retraction: the messageId it withdraws
	txHash    string
	blockHash string
	block     uint64
}

func readStreamMsg(t testing.TB, m delivered, key []byte) streamMsg {
	t.Helper()
	var p struct {
		EventType string `json:"eventType"`
		MessageID string `json:"messageId"`
		Event     struct {
			RetractedMessageID string `json:"retractedMessageId"`
			TxHash             string `json:"txHash"`
			BlockHash          string `json:"blockHash"`
			BlockNumber        string `json:"blockNumber"`
			Transaction        struct {
				TxHash      string `json:"txHash"`
				BlockHash   string `json:"blockHash"`
				BlockNumber string `json:"blockNumber"`
			} `json:"transaction"`
		} `json:"event"`
	}
	if err := json.Unmarshal(m.body, &p); err != nil {
		t.Fatalf("body %s: %v", m.body, err)
	}
	seq, err := strconv.ParseUint(m.hdr.Get("moraine-sequence"), 10, 64)
	if err != nil || seq == 0 {
		t.Fatalf("%s: moraine-sequence %q", m.path, m.hdr.Get("moraine-sequence"))
	}
	// moraine-signature covers the stream headers and the body.
	mac := hmac.New(sha256.New, key)
	for _, h := range []string{"webhook-id", "webhook-timestamp", "moraine-sequence", "moraine-message-kind", "moraine-replay"} {
		mac.Write([]byte(m.hdr.Get(h) + "."))
	}
	mac.Write(m.body)
	if want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)); m.hdr.Get("moraine-signature") != want {
		t.Errorf("%s seq %d: moraine-signature %q, want %q", m.path, seq, m.hdr.Get("moraine-signature"), want)
	}
	s := streamMsg{seq: seq, kind: m.hdr.Get("moraine-message-kind"), messageID: p.MessageID}
	switch s.kind {
	case "activity":
		s.txHash, s.blockHash = lower(p.Event.Transaction.TxHash), lower(p.Event.Transaction.BlockHash)
		s.block, _ = strconv.ParseUint(p.Event.Transaction.BlockNumber, 10, 64)
		if p.EventType != "address_activity" {
			t.Errorf("%s seq %d: activity with eventType %q", m.path, seq, p.EventType)
		}
	case "retraction":
		s.retracts, s.txHash, s.blockHash = p.Event.RetractedMessageID, lower(p.Event.TxHash), lower(p.Event.BlockHash)
		s.block, _ = strconv.ParseUint(p.Event.BlockNumber, 10, 64)
		if p.EventType != "address_activity_retraction" || s.retracts == "" {
			t.Errorf("%s seq %d: retraction %s", m.path, seq, m.body)
		}
	default:
		t.Errorf("%s seq %d: moraine-message-kind %q", m.path, seq, s.kind)
	}
	return s
}

// streamView is a receiver's final view of one webhook: its messages by
// sequence (a redelivery repeats a sequence), applied in sequence order,
// an activity adding its transaction and a retraction removing the one it
// names. It fails the test on a sequence that names two messages.
type streamView struct {
	bySeq map[uint64]streamMsg
}

func newStreamView(t testing.TB, msgs []streamMsg) streamView {
	t.Helper()
	v := streamView{bySeq: map[uint64]streamMsg{}}
	for _, m := range msgs {
		if prev, ok := v.bySeq[m.seq]; ok && prev.messageID != m.messageID {
			t.Errorf("sequence %d names two messages: %s and %s", m.seq, prev.messageID, m.messageID)
		}
		v.bySeq[m.seq] = m
	}
	return v
}

// gaps lists the sequence numbers missing below the highest received.
func (v streamView) gaps() []uint64 {
	var hi uint64
	for s := range v.bySeq {
		hi = max(hi, s)
	}
	var out []uint64
	for s := uint64(1); s <= hi; s++ {
		if _, ok := v.bySeq[s]; !ok {
			out = append(out, s)
		}
	}
	return out
}

// final returns the kept transactions (tx hash -> block hash) after every
// message in sequence order, and the retractions seen.
func (v streamView) final() (kept map[string]string, retractions int) {
	seqs := make([]uint64, 0, len(v.bySeq))
	for s := range v.bySeq {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	kept = map[string]string{}
	byID := map[string]string{} // messageId -> tx hash
	for _, s := range seqs {
		m := v.bySeq[s]
		if m.kind == "retraction" {
			retractions++
			delete(kept, byID[m.retracts])
			continue
		}
		byID[m.messageID] = m.txHash
		kept[m.txHash] = m.blockHash
	}
	return kept, retractions
}

// TestWebhookStreamDevchain reorganises the development chain by 3, 12 and
// 40 blocks while two webhooks watch its busiest accounts, one with
// confirmations 0 and one with confirmations 8, and checks what a receiver
// keeps: applying each webhook's messages in sequence order (retractions
// removing what they name) gives exactly the canonical chain's activity
// (from the node, after the reorgs) up to the head, or up to head-8 for the
// confirmed webhook; the sequence has no gap; the confirmed webhook never
// received anything of a block orphaned 3 deep (less than its
// confirmations), and got retractions only for the deeper reorgs.
func TestWebhookStreamDevchain(t *testing.T) {
	const confirmations = 8
	rpcAddr := freeAddr(t)
	start(t, "devchain", "--rpc.listen-address", rpcAddr, "--block.interval", "250ms", "--traffic.tx-per-block", "8")
	rpcURL := "http://" + rpcAddr
	eventually(t, 60*time.Second, "devchain RPC", func() bool {
		_, err := rpcCall(rpcURL, "eth_blockNumber")
		return err == nil
	})
	var accounts []string
	raw, err := rpcCall(rpcURL, "moraine_accounts")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &accounts); err != nil || len(accounts) < 3 {
		t.Fatalf("moraine_accounts: %v %s", err, raw)
	}
	watched := accounts[:3]

	recv := newReceiver(t)
	var secret string
	s := startServices(t, fmt.Sprintf(`{"evmChainId":"43112","name":"Development chain","network":"devnet",
		"rpcUrls":["%s"],"wsUrl":"ws://%s","networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},
		"traces":true,"webhooks":true,"startBlock":0}`, rpcURL, rpcAddr), pipelineOpts{
		delivery: true,
		beforeIngest: func(s *stackUp) {
			key := devKey(t, s)
			var sec struct {
				Secret string `json:"secret"`
			}
			if code := call(t, "POST", s.api+"/v1/webhooks:generateOrRotateSharedSecret", key, nil, &sec); code != http.StatusCreated {
				t.Fatalf("generate secret: %d", code)
			}
			secret = sec.Secret
			for _, path := range []string{"/c0", "/c8"} {
				var w struct {
					ID            string `json:"id"`
					Confirmations uint32 `json:"confirmations"`
				}
				body := map[string]any{
					"url": recv.srv.URL + path, "chainId": "43112", "eventType": "address_activity",
					"metadata": map[string]any{"addresses": watched},
				}
				if path == "/c8" {
					body["confirmations"] = confirmations
				}
				if code := call(t, "POST", s.api+"/v1/webhooks", key, body, &w); code != http.StatusCreated {
					t.Fatalf("create webhook %s: %d", path, code)
				}
				if path == "/c8" && w.Confirmations != confirmations {
					t.Fatalf("webhook %s created with confirmations %d", path, w.Confirmations)
				}
			}
		}})

	head := func() uint64 {
		raw, err := rpcCall(rpcURL, "eth_blockNumber")
		if err != nil {
			t.Fatal(err)
		}
		var h string
		_ = json.Unmarshal(raw, &h)
		return hexToBig(h).Uint64()
	}
	// Reorgs of depth 3, 12 and 40, each once the chain is long enough and
	// the matcher has had blocks to deliver; the hashes they orphan.
	orphanedAt := map[int][]string{}
	reorgAt := map[int]time.Time{}
	for _, depth := range []int{3, 12, 40} {
		target := head() + 15
		if target < uint64(depth)+20 {
			target = uint64(depth) + 20
		}
		eventually(t, 60*time.Second, fmt.Sprintf("block %d", target), func() bool { return head() >= target })
		reorgAt[depth] = time.Now()
		raw, err := rpcCall(rpcURL, "moraine_reorg", depth)
		if err != nil {
			t.Fatalf("moraine_reorg(%d): %v", depth, err)
		}
		var res struct {
			Removed []string `json:"removed"`
		}
		if err := json.Unmarshal(raw, &res); err != nil || len(res.Removed) != depth {
			t.Fatalf("moraine_reorg(%d): %v %s", depth, err, raw)
		}
		for _, h := range res.Removed {
			orphanedAt[depth] = append(orphanedAt[depth], lower(h))
		}
	}
	// Blocks on top of the last reorg, then the expected activity from the
	// node: the canonical chain as it is now.
	final := head() + 12
	eventually(t, 60*time.Second, fmt.Sprintf("block %d", final), func() bool { return head() >= final })
	ledger := rpcTxs(t, rpcURL, 1, final)
	set := map[string]bool{}
	for _, a := range watched {
		set[lower(a)] = true
	}
	want := map[string]map[string]bool{"/c0": {}, "/c8": {}}
	for hash, g := range ledger {
		if !g.matches(set, false, nil) {
			continue
		}
		n, _ := strconv.ParseUint(g.tx["BLOCKNUMBER"], 10, 64)
		want["/c0"][hash] = true
		if n+confirmations <= final {
			want["/c8"][hash] = true
		}
	}
	if len(want["/c0"]) < 30 {
		t.Fatalf("only %d matching transactions up to block %d: traffic too thin to test", len(want["/c0"]), final)
	}
	key, err := hex.DecodeString(secret)
	if err != nil {
		t.Fatal(err)
	}
	views := func() map[string][]streamMsg {
		out := map[string][]streamMsg{}
		for _, m := range recv.snapshot() {
			out[m.path] = append(out[m.path], readStreamMsg(t, m, key))
		}
		return out
	}
	blockOK := map[string]bool{} // canonical block hashes up to final
	for _, g := range ledger {
		blockOK[lower(g.tx["BLOCKHASH"])] = true
	}
	// Wait until each receiver's view holds the expected transactions, and
	// nothing of a block up to its bound that the canonical chain lacks.
	check := func(path string, bound uint64, msgs []streamMsg) (missing, extra []string) {
		kept, _ := newStreamView(t, msgs).final()
		for h := range want[path] {
			if _, ok := kept[h]; !ok {
				missing = append(missing, h)
			}
		}
		for h := range kept {
			if g := ledger[h]; g == nil || !want[path][h] {
				// Kept but not canonical at or below the bound: only
				// activity of later blocks may still be in flight.
				var n uint64
				for _, m := range msgs {
					if m.txHash == h {
						n = m.block
					}
				}
				if n <= bound {
					extra = append(extra, h)
				}
			}
		}
		return missing, extra
	}
	eventually(t, 2*time.Minute, "each receiver's view equals the canonical chain's activity", func() bool {
		v := views()
		m0, x0 := check("/c0", final, v["/c0"])
		m8, x8 := check("/c8", final-confirmations, v["/c8"])
		return len(m0)+len(x0)+len(m8)+len(x8) == 0
	})
	v := views()
	for path, bound := range map[string]uint64{"/c0": final, "/c8": final - confirmations} {
		missing, extra := check(path, bound, v[path])
		view := newStreamView(t, v[path])
		kept, retractions := view.final()
		t.Logf("%s: %d deliveries, %d messages, %d retractions, %d transactions kept (%d expected up to block %d)",
			path, len(v[path]), len(view.bySeq), retractions, len(kept), len(want[path]), bound)
		if len(missing) > 0 || len(extra) > 0 {
			t.Errorf("%s: %d expected transactions missing, %d kept that the canonical chain lacks", path, len(missing), len(extra))
		}
		if g := view.gaps(); len(g) > 0 {
			t.Errorf("%s: sequence gaps %v", path, g)
		}
		if retractions == 0 {
			t.Errorf("%s: no retraction: the reorgs retracted nothing", path)
		}
	}
	// Confirmations 8: nothing of a block orphaned 3 deep ever arrived;
	// what the deeper reorgs orphaned was delivered, then retracted.
	shallow := map[string]bool{}
	for _, h := range orphanedAt[3] {
		shallow[h] = true
	}
	for _, m := range v["/c8"] {
		if m.kind == "activity" && shallow[m.blockHash] {
			t.Errorf("/c8 (confirmations %d) received %s of block %s, orphaned 3 deep", confirmations, m.txHash, m.blockHash)
		}
	}
	for _, m := range v["/c0"] {
		if m.kind == "retraction" && strings.HasPrefix(m.blockHash, "0x") && blockOK[m.blockHash] {
			t.Errorf("/c0: retraction of %s in canonical block %s", m.retracts, m.blockHash)
		}
	}
	// Retraction latency (bench/results.md): from the reorg on the node to
	// the receiver's first and last retraction of the blocks it orphaned
	// (ingest's head polling, the matcher, delivery).
	for _, depth := range []int{3, 12, 40} {
		orphaned := map[string]bool{}
		for _, h := range orphanedAt[depth] {
			orphaned[h] = true
		}
		var first, last time.Duration
		n := 0
		for _, m := range recv.snapshot() {
			if m.path != "/c0" || m.hdr.Get("moraine-message-kind") != "retraction" {
				continue
			}
			if sm := readStreamMsg(t, m, key); orphaned[sm.blockHash] {
				d := m.at.Sub(reorgAt[depth])
				if n == 0 || d < first {
					first = d
				}
				last = max(last, d)
				n++
			}
		}
		t.Logf("reorg of depth %d: %d retractions to /c0, first %v and last %v after the reorg", depth, n, first.Round(time.Millisecond), last.Round(time.Millisecond))
	}
	_ = s
}
