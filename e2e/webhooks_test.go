package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// receiver is a webhook endpoint on loopback that records every request.
type receiver struct {
	mu   sync.Mutex
	got  []delivered
	srv  *httptest.Server
	code int // status to answer; 200 by default
}

type delivered struct {
	path string
	body []byte
	hdr  http.Header
	at   time.Time
}

func newReceiver(t testing.TB) *receiver {
	r := &receiver{code: http.StatusOK}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, delivered{path: req.URL.Path, body: body, hdr: req.Header.Clone(), at: time.Now()})
		code := r.code
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) snapshot() []delivered {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivered(nil), r.got...)
}

// devKey creates an account and API key with moraine-admin, as make run does.
func devKey(t testing.TB, s *stackUp) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(binaries(t), "moraine-admin"), "dev-key", "--out", filepath.Join(t.TempDir(), "key"),
		"--clickhouse.addr", s.ch.Addr, "--clickhouse.database", s.ch.Database).Output()
	if err != nil {
		t.Fatalf("moraine-admin dev-key: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// call sends a JSON request to the API with a key and decodes the answer.
func call(t testing.TB, method, url, key string, body, into any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("x-glacier-api-key", key)
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if into != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	if resp.StatusCode >= 300 {
		t.Logf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return resp.StatusCode
}

const (
	topicTransfer       = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
	topicTransferSingle = "0xc3d58168c5ae7397731d063d5bbf3d657854427343f4c083240f7aacaa2d0f62"
	topicTransferBatch  = "0x4a39dc06d4c0dbc64b70af90fd698a233a518aa5d07e595d983b8c0526c8f7fb"
)

// topicAddr is the address in the low 20 bytes of a 32-byte topic.
func topicAddr(topic string) string {
	topic = lower(topic)
	if len(topic) != 66 {
		return ""
	}
	return "0x" + topic[26:]
}

// goldenTx is one transaction of the golden tables with what matching needs.
type goldenTx struct {
	tx       map[string]string
	receipt  map[string]string
	logs     []map[string]string // by LOGINDEX
	internal []map[string]string // by TRACE_POSITION
}

func goldenTxs(t testing.TB, d dataset) map[string]*goldenTx {
	out := map[string]*goldenTx{}
	for _, r := range d.goldenTable(t, "TRANSACTIONS") {
		out[lower(r["TRANSACTIONHASH"])] = &goldenTx{tx: r}
	}
	for _, r := range d.goldenTable(t, "RECEIPTS") {
		out[lower(r["TRANSACTIONHASH"])].receipt = r
	}
	for _, r := range d.goldenTable(t, "LOGS") {
		g := out[lower(r["TRANSACTIONHASH"])]
		g.logs = append(g.logs, r)
	}
	for _, r := range d.goldenTable(t, "INTERNAL_TRANSACTIONS") {
		g := out[lower(r["TRANSACTIONHASH"])]
		g.internal = append(g.internal, r)
	}
	num := func(s string) int { n, _ := strconv.Atoi(s); return n }
	for _, g := range out {
		sort.Slice(g.logs, func(i, j int) bool { return num(g.logs[i]["LOGINDEX"]) < num(g.logs[j]["LOGINDEX"]) })
		sort.Slice(g.internal, func(i, j int) bool {
			return num(g.internal[i]["TRACE_POSITION"]) < num(g.internal[j]["TRACE_POSITION"])
		})
	}
	return out
}

// matches decides, from the golden tables alone, whether a webhook watching
// addrs is triggered by g (CONTRACT.md 5.6 and the decisions table).
func (g *goldenTx) matches(addrs map[string]bool, internal bool, signatures []string) bool {
	if len(signatures) > 0 {
		ok := false
		for _, l := range g.logs {
			for _, s := range signatures {
				ok = ok || lower(l["TOPICHEX_0"]) == s
			}
		}
		if !ok {
			return false
		}
	}
	parties := []string{g.tx["TRANSACTIONFROM"], g.tx["TRANSACTIONTO"], g.receipt["TRANSACTIONRECEIPTCONTRACTADDRESS"]}
	for _, l := range g.logs {
		parties = append(parties, l["LOGADDRESS"])
		switch lower(l["TOPICHEX_0"]) {
		case topicTransfer:
			parties = append(parties, topicAddr(l["TOPICHEX_1"]), topicAddr(l["TOPICHEX_2"]))
		case topicTransferSingle, topicTransferBatch:
			parties = append(parties, topicAddr(l["TOPICHEX_2"]), topicAddr(l["TOPICHEX_3"]))
		}
	}
	if internal {
		for _, f := range g.internal {
			parties = append(parties, f["FROM"], f["TO"])
		}
	}
	for _, p := range parties {
		if addrs[lower(p)] {
			return true
		}
	}
	return false
}

// webhookSpec is one webhook the test creates.
type webhookSpec struct {
	path       string
	addresses  []string
	logs       bool
	internal   bool
	signatures []string
}

// TestWebhooksGunzilla replays the Gunzilla recording with webhooks on some
// of its busiest addresses and checks every delivered payload against the
// golden tables: which transactions arrive, and their transaction fields,
// transfers, internal transactions and logs, and the signature.
func TestWebhooksGunzilla(t *testing.T) {
	d := gunzilla
	golden := goldenTxs(t, d)
	recv := newReceiver(t)
	specs := []webhookSpec{
		// Two busy senders/recipients, with logs and internal transactions.
		{path: "/busy", addresses: []string{"0x49B56864e092065CCCBA8536C81e9071506C619E", "0x44403314129a4d994098cfcb690a3fb96a9cc69a"},
			logs: true, internal: true},
		// A token contract, gated on Transfer events, without internal calls.
		{path: "/token", addresses: []string{"0x4c9b291874fb5363e3a46cd3bf4a352ffa26a124"}, logs: true,
			signatures: []string{topicTransfer}},
	}
	var secret string
	ids := map[string]string{} // webhook id -> spec path
	s := runPipeline(t, d, 14000000, pipelineOpts{delivery: true, beforeIngest: func(s *stackUp) {
		key := devKey(t, s)
		var sec struct {
			Secret string `json:"secret"`
		}
		if code := call(t, "POST", s.api+"/v1/webhooks:generateOrRotateSharedSecret", key, nil, &sec); code != http.StatusCreated {
			t.Fatalf("generate secret: %d", code)
		}
		secret = sec.Secret
		for _, sp := range specs {
			meta := map[string]any{"addresses": sp.addresses}
			if len(sp.signatures) > 0 {
				meta["eventSignatures"] = sp.signatures
			}
			var wh struct {
				ID string `json:"id"`
			}
			code := call(t, "POST", s.api+"/v1/webhooks", key, map[string]any{
				"url": recv.srv.URL + sp.path, "chainId": "43419", "eventType": "address_activity",
				"metadata": meta, "includeLogs": sp.logs, "includeInternalTxs": sp.internal, "name": sp.path,
			}, &wh)
			if code != http.StatusCreated {
				t.Fatalf("create webhook %s: %d", sp.path, code)
			}
			ids[wh.ID] = sp.path
		}
	}})
	_ = s

	// What must arrive, from the golden tables alone.
	want := map[string]bool{} // path + " " + tx hash
	for hash, g := range golden {
		for _, sp := range specs {
			set := map[string]bool{}
			for _, a := range sp.addresses {
				set[lower(a)] = true
			}
			if g.matches(set, sp.internal, sp.signatures) {
				want[sp.path+" "+hash] = true
			}
		}
	}
	t.Logf("expecting %d messages", len(want))
	eventually(t, 5*time.Minute, fmt.Sprintf("%d webhook messages", len(want)), func() bool {
		seen := map[string]bool{}
		for _, m := range recv.snapshot() {
			var p struct {
				Event struct {
					Transaction struct {
						TxHash string `json:"txHash"`
					} `json:"transaction"`
				} `json:"event"`
			}
			_ = json.Unmarshal(m.body, &p)
			seen[m.path+" "+lower(p.Event.Transaction.TxHash)] = true
		}
		return len(seen) >= len(want)
	})
	time.Sleep(time.Second) // let stragglers (duplicates, extras) arrive

	key, _ := hex.DecodeString(secret)
	messageIDs := map[string]string{}
	got := map[string]bool{}
	mm := &mismatches{t: t, where: "webhook payload"}
	for _, m := range recv.snapshot() {
		mac := hmac.New(sha256.New, key)
		mac.Write(m.body)
		if sig := base64.StdEncoding.EncodeToString(mac.Sum(nil)); m.hdr.Get("x-signature") != sig {
			t.Errorf("%s: x-signature %q does not verify", m.path, m.hdr.Get("x-signature"))
		}
		if bytes.Contains(m.body, []byte("null")) {
			t.Errorf("%s: payload contains null: %.200s", m.path, m.body)
		}
		var p map[string]any
		dec := json.NewDecoder(bytes.NewReader(m.body))
		dec.UseNumber() // numbers as written, not float64
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("payload is not JSON: %v", err)
		}
		ev, _ := p["event"].(map[string]any)
		tx, _ := ev["transaction"].(map[string]any)
		hash := lower(str(tx["txHash"]))
		k := m.path + " " + hash
		if prev, ok := messageIDs[k]; ok && prev != str(p["messageId"]) {
			t.Errorf("%s: redelivery with another messageId (%s, %s)", k, prev, p["messageId"])
		}
		messageIDs[k] = str(p["messageId"])
		if ids[str(p["webhookId"])] != m.path {
			t.Errorf("%s: webhookId %v is not the webhook of this URL", k, p["webhookId"])
		}
		if !want[k] {
			t.Errorf("unexpected message %s", k)
			continue
		}
		got[k] = true
		var sp webhookSpec
		for _, x := range specs {
			if x.path == m.path {
				sp = x
			}
		}
		checkPayload(mm, k, sp, golden[hash], tx, ev)
	}
	mm.done(len(got))
	for k := range want {
		if !got[k] {
			t.Errorf("missing message %s", k)
		}
	}
}

// checkPayload compares one delivered payload with the golden rows of its
// transaction.
func checkPayload(m *mismatches, k string, sp webhookSpec, g *goldenTx, tx, ev map[string]any) {
	m.check(k, "blockNumber", str(tx["blockNumber"]), g.tx["BLOCKNUMBER"])
	m.check(k, "blockHash", lower(str(tx["blockHash"])), lower(g.tx["BLOCKHASH"]))
	m.check(k, "from", lower(str(tx["from"])), lower(g.tx["TRANSACTIONFROM"]))
	m.check(k, "to", lower(str(tx["to"])), lower(g.tx["TRANSACTIONTO"]))
	m.check(k, "value", str(tx["value"]), g.tx["TRANSACTIONVALUE"])
	m.check(k, "gas", str(tx["gas"]), g.tx["TRANSACTIONGAS"])
	m.check(k, "nonce", str(tx["nonce"]), g.tx["TRANSACTIONNONCE"])
	m.check(k, "input", lower(str(tx["input"])), lower(g.tx["TRANSACTIONINPUT"]))
	m.check(k, "transactionIndex", fmt.Sprint(tx["transactionIndex"]), g.tx["TRANSACTIONINDEX"])
	m.check(k, "type", fmt.Sprint(tx["type"]), g.tx["TRANSACTIONTYPE"])
	m.check(k, "blockTimestamp", fmt.Sprint(tx["blockTimestamp"]), g.tx["BLOCKTIMESTAMP"])
	m.check(k, "txStatus", str(tx["txStatus"]), g.receipt["TRANSACTIONRECEIPTSTATUS"])
	m.check(k, "receiptGasUsed", str(tx["receiptGasUsed"]), g.receipt["TRANSACTIONRECEIPTGASUSED"])
	m.check(k, "receiptCumulativeGasUsed", str(tx["receiptCumulativeGasUsed"]), g.receipt["TRANSACTIONRECEIPTCUMULATIVEGASUSED"])
	m.check(k, "receiptEffectiveGasPrice", str(tx["receiptEffectiveGasPrice"]), g.receipt["TRANSACTIONRECEIPTEFFECTIVEGASPRICE"])
	m.check(k, "chainId", str(tx["chainId"]), "43419")

	// Transfers: one per Transfer log, ERC-20 with 3 topics, ERC-721 with 4.
	var erc20, erc721 []map[string]string
	for _, l := range g.logs {
		if lower(l["TOPICHEX_0"]) != topicTransfer {
			continue
		}
		if l["TOPICHEX_3"] == "" {
			erc20 = append(erc20, l)
		} else {
			erc721 = append(erc721, l)
		}
	}
	for _, c := range []struct {
		field string
		want  []map[string]string
	}{{"erc20Transfers", erc20}, {"erc721Transfers", erc721}} {
		arr, ok := tx[c.field].([]any)
		if !ok {
			m.check(k, c.field, "missing", "an array")
			continue
		}
		m.check(k, c.field+" count", strconv.Itoa(len(arr)), strconv.Itoa(len(c.want)))
		for i := 0; i < len(arr) && i < len(c.want); i++ {
			tr, _ := arr[i].(map[string]any)
			m.check(k, c.field+" from", lower(str(tr["from"])), topicAddr(c.want[i]["TOPICHEX_1"]))
			m.check(k, c.field+" to", lower(str(tr["to"])), topicAddr(c.want[i]["TOPICHEX_2"]))
		}
	}
	if _, ok := tx["erc1155Transfers"].([]any); !ok {
		m.check(k, "erc1155Transfers", "missing", "an array")
	}

	// Internal transactions: only with includeInternalTxs; the callTracer
	// tree depth-first, root first.
	internal, present := tx["internalTransactions"].([]any)
	if !sp.internal {
		m.check(k, "internalTransactions present", strconv.FormatBool(present), "false")
	} else {
		m.check(k, "internalTransactions count", strconv.Itoa(len(internal)), strconv.Itoa(len(g.internal)))
		for i := 0; i < len(internal) && i < len(g.internal); i++ {
			f, _ := internal[i].(map[string]any)
			gf := g.internal[i]
			m.check(k, "internal type", str(f["internalTxType"]), gf["TYPE"])
			m.check(k, "internal from", lower(str(f["from"])), lower(gf["FROM"]))
			m.check(k, "internal to", lower(str(f["to"])), lower(gf["TO"]))
			m.check(k, "internal value", str(f["value"]), gf["VALUE"])
			if i > 0 { // the root's gas is the transaction's (CONTRACT.md 5.2)
				m.check(k, "internal gasLimit", str(f["gasLimit"]), gf["GAS"])
				m.check(k, "internal gasUsed", str(f["gasUsed"]), gf["GASUSED"])
			}
		}
	}

	// Logs: all the transaction's logs, only with includeLogs.
	logs, present := ev["logs"].([]any)
	if !sp.logs {
		m.check(k, "logs present", strconv.FormatBool(present), "false")
		return
	}
	m.check(k, "logs count", strconv.Itoa(len(logs)), strconv.Itoa(len(g.logs)))
	for i := 0; i < len(logs) && i < len(g.logs); i++ {
		l, _ := logs[i].(map[string]any)
		gl := g.logs[i]
		m.check(k, "log address", lower(str(l["address"])), lower(gl["LOGADDRESS"]))
		m.check(k, "log index", fmt.Sprint(l["logIndex"]), gl["LOGINDEX"])
		m.check(k, "log data", lower(str(l["data"])), lower(gl["LOGDATA"]))
		for j := 0; j < 4; j++ {
			m.check(k, fmt.Sprintf("log topic%d", j), lower(str(l[fmt.Sprintf("topic%d", j)])), lower(gl[fmt.Sprintf("TOPICHEX_%d", j)]))
		}
	}
}
