package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rpcTxs reads blocks from..to (inclusive) from a node and returns their
// transactions in the shape of the golden tables (goldenTx), so the same
// matching oracle applies to the development chain.
func rpcTxs(t testing.TB, url string, from, to uint64) map[string]*goldenTx {
	t.Helper()
	out := map[string]*goldenTx{}
	for n := from; n <= to; n++ {
		num := fmt.Sprintf("0x%x", n)
		var block struct {
			Hash         string `json:"hash"`
			Transactions []struct {
				Hash string `json:"hash"`
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"transactions"`
		}
		var receipts []struct {
			TxHash          string `json:"transactionHash"`
			ContractAddress string `json:"contractAddress"`
			Logs            []struct {
				Address  string   `json:"address"`
				Topics   []string `json:"topics"`
				LogIndex string   `json:"logIndex"`
			} `json:"logs"`
		}
		var traces []struct {
			TxHash string          `json:"txHash"`
			Result json.RawMessage `json:"result"`
		}
		for _, c := range []struct {
			method string
			params []any
			into   any
		}{
			{"eth_getBlockByNumber", []any{num, true}, &block},
			{"eth_getBlockReceipts", []any{num}, &receipts},
			{"debug_traceBlockByNumber", []any{num, map[string]string{"tracer": "callTracer"}}, &traces},
		} {
			raw, err := rpcCall(url, c.method, c.params...)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, c.into); err != nil {
				t.Fatalf("%s %d: %v", c.method, n, err)
			}
		}
		for _, tx := range block.Transactions {
			out[lower(tx.Hash)] = &goldenTx{tx: map[string]string{
				"TRANSACTIONFROM": tx.From, "TRANSACTIONTO": tx.To, "BLOCKNUMBER": strconv.FormatUint(n, 10), "BLOCKHASH": block.Hash,
			}, receipt: map[string]string{}}
		}
		for _, r := range receipts {
			g := out[lower(r.TxHash)]
			g.receipt["TRANSACTIONRECEIPTCONTRACTADDRESS"] = r.ContractAddress
			for _, l := range r.Logs {
				row := map[string]string{"LOGADDRESS": l.Address, "LOGINDEX": hexToDec(l.LogIndex)}
				for i, tp := range l.Topics {
					row[fmt.Sprintf("TOPICHEX_%d", i)] = tp
				}
				g.logs = append(g.logs, row)
			}
		}
		for _, tr := range traces {
			var walk func(raw json.RawMessage)
			walk = func(raw json.RawMessage) {
				var f struct {
					From, To string
					Calls    []json.RawMessage
				}
				_ = json.Unmarshal(raw, &f)
				g := out[lower(tr.TxHash)]
				g.internal = append(g.internal, map[string]string{"FROM": f.From, "TO": f.To})
				for _, c := range f.Calls {
					walk(c)
				}
			}
			walk(tr.Result)
		}
	}
	return out
}

// blockOf is the block number carried by a payload.
func payloadTx(body []byte) (hash string, block uint64, messageID string) {
	var p struct {
		MessageID string `json:"messageId"`
		Event     struct {
			Transaction struct {
				TxHash      string `json:"txHash"`
				BlockNumber string `json:"blockNumber"`
			} `json:"transaction"`
		} `json:"event"`
	}
	_ = json.Unmarshal(body, &p)
	block, _ = strconv.ParseUint(p.Event.Transaction.BlockNumber, 10, 64)
	return lower(p.Event.Transaction.TxHash), block, p.MessageID
}

// TestWebhooksDevchain watches accounts and token contracts of the
// development chain's traffic, kills the processor and delivery with SIGKILL
// while blocks keep coming, and checks against a ledger computed from the
// node that every expected message arrived at least once, that duplicates
// repeat their messageId, and that every payload passes the official SDK's
// validateWebhook (signature and schema).
func TestWebhooksDevchain(t *testing.T) {
	rpcAddr := freeAddr(t)
	start(t, "devchain", "--rpc.listen-address", rpcAddr, "--block.interval", "300ms", "--traffic.tx-per-block", "12")
	rpcURL := "http://" + rpcAddr
	eventually(t, 60*time.Second, "devchain RPC", func() bool {
		_, err := rpcCall(rpcURL, "eth_blockNumber")
		return err == nil
	})
	var contracts struct {
		USD, WMOR, NFT, Items, Factory string
		Relays                         []string
	}
	raw, err := rpcCall(rpcURL, "moraine_contracts")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &contracts); err != nil {
		t.Fatalf("moraine_contracts: %v: %s", err, raw)
	}
	var accounts []string
	raw, err = rpcCall(rpcURL, "moraine_accounts")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(raw, &accounts)
	if len(accounts) < 2 || contracts.USD == "" || len(contracts.Relays) == 0 {
		t.Fatalf("devchain contracts %s / accounts %v", raw, accounts)
	}

	recv := newReceiver(t)
	specs := []webhookSpec{
		{path: "/tokens", addresses: []string{accounts[0], accounts[1], contracts.USD, contracts.NFT, contracts.Items}, logs: true, internal: true},
		{path: "/relays", addresses: []string{contracts.Relays[len(contracts.Relays)-1], contracts.Factory}, internal: true},
	}
	var secret string
	s := startServices(t, fmt.Sprintf(`{"evmChainId":"43112","name":"Development chain","network":"devnet",
		"rpcUrls":["%s"],"wsUrl":"ws://%s","networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},
		"traces":true,"webhooks":true,"startBlock":0}`, rpcURL, rpcAddr), pipelineOpts{
		delivery: true,
		// The official SDK's validateWebhook keys the HMAC with the secret's UTF-8 bytes.
		deliveryArgs: []string{"--delivery.signature-key-encoding", "utf8"},
		beforeIngest: func(s *stackUp) {
			key := devKey(t, s)
			var sec struct {
				Secret string `json:"secret"`
			}
			if code := call(t, "POST", s.api+"/v1/webhooks:generateOrRotateSharedSecret", key, nil, &sec); code != http.StatusCreated {
				t.Fatalf("generate secret: %d", code)
			}
			secret = sec.Secret
			for _, sp := range specs {
				code := call(t, "POST", s.api+"/v1/webhooks", key, map[string]any{
					"url": recv.srv.URL + sp.path, "chainId": "43112", "eventType": "address_activity",
					"metadata": map[string]any{"addresses": sp.addresses}, "includeLogs": sp.logs, "includeInternalTxs": sp.internal,
				}, nil)
				if code != http.StatusCreated {
					t.Fatalf("create webhook %s: %d", sp.path, code)
				}
			}
		}})

	// Traffic flows; crash the processor, then delivery, then both.
	time.Sleep(3 * time.Second)
	s.crash("processor")
	time.Sleep(2 * time.Second)
	s.crash("delivery")
	time.Sleep(2 * time.Second)
	s.crash("processor")
	s.crash("delivery")
	time.Sleep(3 * time.Second)

	// The ledger: every block up to the current head, from the node.
	headRaw, _ := rpcCall(rpcURL, "eth_blockNumber")
	var headHex string
	_ = json.Unmarshal(headRaw, &headHex)
	head := hexToBig(headHex).Uint64()
	ledger := rpcTxs(t, rpcURL, 1, head)
	want := map[string]bool{}
	for hash, g := range ledger {
		for _, sp := range specs {
			set := map[string]bool{}
			for _, a := range sp.addresses {
				set[lower(a)] = true
			}
			if g.matches(set, sp.internal, nil) {
				want[sp.path+" "+hash] = true
			}
		}
	}
	if len(want) < 20 {
		t.Fatalf("the ledger expects only %d messages up to block %d: traffic too thin to test", len(want), head)
	}
	eventually(t, 2*time.Minute, fmt.Sprintf("%d messages up to block %d", len(want), head), func() bool {
		seen := map[string]bool{}
		for _, m := range recv.snapshot() {
			hash, _, _ := payloadTx(m.body)
			if want[m.path+" "+hash] {
				seen[m.path+" "+hash] = true
			}
		}
		return len(seen) == len(want)
	})

	ids := map[string]string{}
	dups := 0
	var captured []map[string]any
	for _, m := range recv.snapshot() {
		hash, block, id := payloadTx(m.body)
		k := m.path + " " + hash
		if prev, ok := ids[k]; ok {
			dups++
			if prev != id {
				t.Errorf("%s delivered twice with different messageIds %s, %s", k, prev, id)
			}
		}
		ids[k] = id
		if block <= head && !want[k] {
			t.Errorf("unexpected message %s (block %d)", k, block)
		}
		hdr := map[string]string{}
		for name := range m.hdr {
			hdr[strings.ToLower(name)] = m.hdr.Get(name)
		}
		captured = append(captured, map[string]any{"url": recv.srv.URL + m.path, "headers": hdr, "body": string(m.body)})
	}
	t.Logf("%d messages expected up to block %d, %d deliveries received, %d duplicates", len(want), head, len(recv.snapshot()), dups)

	// Every payload through the official SDK.
	file := filepath.Join(t.TempDir(), "deliveries.json")
	b, _ := json.Marshal(captured)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "validate-webhooks.mjs")
	cmd.Dir = sdkDir(t)
	cmd.Env = append(os.Environ(), "MORAINE_SDKTEST_DELIVERIES="+file, "MORAINE_SDKTEST_SECRET="+secret)
	out, err := cmd.CombinedOutput()
	t.Logf("validateWebhook:\n%s", out)
	if err != nil {
		t.Fatalf("the official SDK rejected deliveries: %v", err)
	}
	for _, kind := range []string{"erc20", "erc721", "erc1155", "internal", "logs"} {
		if !strings.Contains(string(out), `"`+kind+`":true`) {
			t.Errorf("no delivered payload showed %s activity", kind)
		}
	}
}

// sdkDir is query/sdktest with its node_modules installed.
func sdkDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "query", "sdktest")
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: this test needs Node.js >= 20 and npm")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@avalanche-sdk", "chainkit")); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	return dir
}
