package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHistoryDevchain runs the development chain's traffic (native, ERC-20,
// ERC-721, ERC-1155 single and batch transfers, value sent through nested
// calls, contracts created by transactions and by contracts with CREATE and
// CREATE2, reverted transactions and caught failed calls) through the
// pipeline, then replaces its last blocks with another branch (a reorg),
// and checks every transaction route against the node's own answers: the
// lists computed from the canonical blocks, receipts and traces the node
// serves, the token and contract metadata from eth_call.
func TestHistoryDevchain(t *testing.T) {
	rpcAddr := freeAddr(t)
	start(t, "devchain", "--rpc.listen-address", rpcAddr, "--block.interval", "0s", "--traffic.tx-per-block", "48")
	rpcURL := "http://" + rpcAddr
	eventually(t, 60*time.Second, "devchain RPC", func() bool {
		_, err := rpcCall(rpcURL, "eth_blockNumber")
		return err == nil
	})
	if _, err := rpcCall(rpcURL, "moraine_mine", 24); err != nil {
		t.Fatal(err)
	}
	s := startServices(t, `{"evmChainId":"43112","name":"Development chain","network":"devnet",
		"rpcUrls":["`+rpcURL+`"],"wsUrl":"ws://`+rpcAddr+`","networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},
		"traces":true,"webhooks":true,"startBlock":0}`,
		// A window just over the reorg's depth: the orphaned blocks settle
		// once the chain has grown past them (below).
		pipelineOpts{queryArgs: []string{"--query.reorg-window", "4"}})
	waitHead := func() uint64 {
		var head struct {
			Number string `json:"number"`
			Hash   string `json:"hash"`
		}
		raw, err := rpcCall(rpcURL, "eth_getBlockByNumber", "latest", false)
		if err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(raw, &head)
		n := hexToBig(head.Number).Uint64()
		eventually(t, 2*time.Minute, "head "+head.Hash+" in ClickHouse", func() bool {
			var got string
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.conn.QueryRow(ctx, "SELECT lower(hex(hash)) FROM chain_heads FINAL WHERE chain_id = 43112 AND number = ?", n).Scan(&got)
			return "0x"+got == lower(head.Hash)
		})
		return n
	}
	head := waitHead()
	before, _ := rpcGolden(t, rpcURL, head-2, head)

	// Replace the last three blocks: their transactions must vanish from
	// every list, the new branch's appear.
	if _, err := rpcCall(rpcURL, "moraine_reorg", 3); err != nil {
		t.Fatal(err)
	}
	// Grow the chain until the orphaned blocks are deeper than the reorg
	// window, and let the query service's snapshot of settled blocks
	// refresh (every 5 s): the lists then drop the orphaned branch's rows
	// by orphaned_blocks, not by reading the blocks.
	if _, err := rpcCall(rpcURL, "moraine_mine", 6); err != nil {
		t.Fatal(err)
	}
	head = waitHead()
	time.Sleep(6 * time.Second)
	golden, blocks := rpcGolden(t, rpcURL, 1, head) // the genesis has no transactions (and no trace)
	orphaned := 0
	for h := range before {
		if golden[h] != nil {
			continue
		}
		orphaned++
		if code := getJSON(t, fmt.Sprintf("%s/v1/chains/43112/transactions/%s", s.api, h), nil); code != http.StatusNotFound {
			t.Errorf("orphaned transaction %s: %d, want 404", h, code)
		}
	}
	if orphaned == 0 {
		t.Fatal("the reorg orphaned no transaction")
	}
	m := buildModel(golden, blocks)

	// The traffic has every kind the routes list.
	kinds := map[string]int{}
	for _, x := range m.txs {
		if x.status == "0" {
			kinds["failed transaction"]++
		}
		for _, tr := range x.transfers {
			kinds[fmt.Sprintf("ERC-%d transfer", tr.kind)]++
			if tr.sub > 0 {
				kinds["ERC-1155 batch"]++
			}
		}
		for _, in := range x.internals {
			kinds["internal "+in.typ]++
			if in.reverted {
				kinds["reverted internal"]++
			}
		}
		for _, c := range x.creations {
			if c.creator == "" {
				kinds["top-level creation"]++
			} else {
				kinds["creation by a contract"]++
			}
		}
	}
	for _, k := range []string{"failed transaction", "ERC-20 transfer", "ERC-721 transfer", "ERC-1155 transfer", "ERC-1155 batch",
		"internal CALL", "internal CREATE", "internal CREATE2", "reverted internal", "top-level creation", "creation by a contract"} {
		if kinds[k] == 0 {
			t.Errorf("the traffic has no %s: %v", k, kinds)
		}
	}
	t.Logf("%d transactions, %d orphaned by the reorg: %v", len(m.txs), orphaned, kinds)

	answers := map[string]contractAnswer{}
	oracle := func(a string) contractAnswer {
		if ans, ok := answers[a]; ok {
			return ans
		}
		ans := ethAnswers(t, rpcURL, a)
		answers[a] = ans
		return ans
	}
	compareHistory(t, historyCheck{m: m, chainID: 43112, api: s.api, contract: oracle})

	t.Run("official SDK", func(t *testing.T) { runHistorySDK(t, s.api, m, oracle) })

	// Contract metadata: every token and every created contract.
	t.Run("contract metadata", func(t *testing.T) {
		mm := &mismatches{t: t, where: "getContractMetadata"}
		var addrs []string
		for a := range m.tokens {
			addrs = append(addrs, a)
		}
		for a := range m.creations {
			addrs = append(addrs, a)
		}
		for _, a := range addrs {
			want := oracle(a)
			var got map[string]any
			code := getJSON(t, fmt.Sprintf("%s/v1/chains/43112/addresses/%s", s.api, a), &got)
			if !want.hasCode {
				mm.check(a, "status", strconv.Itoa(code), "404")
				continue
			}
			mm.check(a, "status", strconv.Itoa(code), "200")
			mm.check(a, "address", lower(field(got, "address")), a)
			mm.check(a, "ercType", field(got, "ercType"), want.ercType())
			mm.check(a, "name", field(got, "name"), map[bool]string{true: want.name}[want.nameOK])
			if want.ercType() != "UNKNOWN" {
				mm.check(a, "symbol", field(got, "symbol"), map[bool]string{true: want.symbol}[want.symbolOK])
			}
			if want.ercType() == "ERC-20" {
				mm.check(a, "decimals", field(got, "decimals"), strconv.Itoa(want.decimals))
			}
			if rows := m.creations[a]; len(rows) > 0 {
				w := rows[len(rows)-1]
				mm.check(a, "deploymentDetails.txHash", field(got, "deploymentDetails", "txHash"), w.tx.hash)
				mm.check(a, "deploymentDetails.deployerAddress", lower(field(got, "deploymentDetails", "deployerAddress")), w.tx.from)
			}
		}
		mm.done(len(addrs))
		// An account holds no code.
		for a := range m.transactions {
			if !oracle(a).hasCode {
				if code := getJSON(t, fmt.Sprintf("%s/v1/chains/43112/addresses/%s", s.api, a), nil); code != http.StatusNotFound {
					t.Errorf("account %s: %d, want 404", a, code)
				}
				break
			}
		}
	})
}

// rpcGolden reads blocks from..to from a node and returns their
// transactions in the golden tables' shape, with the blocks.
func rpcGolden(t testing.TB, url string, from, to uint64) (map[string]*goldenTx, map[uint64]blockInfo) {
	t.Helper()
	out := map[string]*goldenTx{}
	blocks := map[uint64]blockInfo{}
	dec := func(h string) string { return cmpOr(hexToDec(h), "0") }
	for n := from; n <= to; n++ {
		num := fmt.Sprintf("0x%x", n)
		var block struct {
			Hash         string `json:"hash"`
			Timestamp    string `json:"timestamp"`
			BaseFee      string `json:"baseFeePerGas"`
			Transactions []struct {
				Hash, From, To, Value, Gas, GasPrice, Nonce, Input, Type string
				MaxFeePerGas, MaxPriorityFeePerGas                       string
				TransactionIndex                                         string
			} `json:"transactions"`
		}
		var receipts []struct {
			TxHash          string `json:"transactionHash"`
			Status          string `json:"status"`
			GasUsed         string `json:"gasUsed"`
			ContractAddress string `json:"contractAddress"`
			Logs            []struct {
				Address  string   `json:"address"`
				Topics   []string `json:"topics"`
				Data     string   `json:"data"`
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
		blocks[n] = blockInfo{lower(block.Hash), hexToBig(block.Timestamp).Uint64(), dec(block.BaseFee)}
		for _, tx := range block.Transactions {
			price := dec(tx.GasPrice)
			out[lower(tx.Hash)] = &goldenTx{tx: map[string]string{
				"TRANSACTIONHASH": tx.Hash, "TRANSACTIONFROM": tx.From, "TRANSACTIONTO": tx.To, "BLOCKNUMBER": strconv.FormatUint(n, 10),
				"TRANSACTIONINDEX": dec(tx.TransactionIndex), "TRANSACTIONVALUE": dec(tx.Value), "TRANSACTIONGAS": dec(tx.Gas),
				"TRANSACTIONGASPRICE": price, "TRANSACTIONNONCE": dec(tx.Nonce), "TRANSACTIONINPUT": tx.Input,
				"TRANSACTIONTYPE": dec(tx.Type),
				// As the warehouse writes them (and ingest): a legacy
				// transaction's fee caps are its gas price.
				"TRANSACTIONMAXFEEPERGAS": cmpOr(hexToDec(tx.MaxFeePerGas), price), "TRANSACTIONMAXPRIORITYFEEPERGAS": cmpOr(hexToDec(tx.MaxPriorityFeePerGas), price),
			}, receipt: map[string]string{}}
		}
		for _, r := range receipts {
			g := out[lower(r.TxHash)]
			g.receipt = map[string]string{"TRANSACTIONRECEIPTSTATUS": dec(r.Status), "TRANSACTIONRECEIPTGASUSED": dec(r.GasUsed),
				"TRANSACTIONRECEIPTCONTRACTADDRESS": r.ContractAddress}
			for _, l := range r.Logs {
				row := map[string]string{"LOGADDRESS": l.Address, "LOGINDEX": hexToDec(l.LogIndex), "LOGDATA": l.Data}
				for i, tp := range l.Topics {
					row[fmt.Sprintf("TOPICHEX_%d", i)] = tp
				}
				g.logs = append(g.logs, row)
			}
		}
		for _, tr := range traces {
			g := out[lower(tr.TxHash)]
			var walk func(raw json.RawMessage, path string)
			walk = func(raw json.RawMessage, path string) {
				var f struct {
					Type, From, To, Value, Gas, GasUsed, Error string
					Calls                                      []json.RawMessage
				}
				if err := json.Unmarshal(raw, &f); err != nil {
					t.Fatalf("trace of %s: %v", tr.TxHash, err)
				}
				g.internal = append(g.internal, map[string]string{
					"CALLINDEX": path, "TRACE_POSITION": strconv.Itoa(len(g.internal)), "TYPE": upper(f.Type), "FROM": f.From, "TO": f.To,
					"VALUE": dec(f.Value), "GAS": dec(f.Gas), "GASUSED": dec(f.GasUsed), "ERROR": f.Error,
					"REVERT": strconv.FormatBool(f.Error != ""),
				})
				for i, c := range f.Calls {
					walk(c, fmt.Sprintf("%s_%d", path, i))
				}
			}
			walk(tr.Result, "call_0")
		}
	}
	return out, blocks
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ethAnswers asks a contract about itself: its code, name(), symbol(),
// decimals() and ERC-165 supportsInterface for ERC-721 and ERC-1155.
func ethAnswers(t testing.TB, url, addr string) contractAnswer {
	t.Helper()
	call := func(data string) []byte {
		raw, err := rpcCall(url, "eth_call", map[string]string{"to": addr, "data": data}, "latest")
		if err != nil {
			return nil // reverted
		}
		var s string
		_ = json.Unmarshal(raw, &s)
		b, _ := hex.DecodeString(strings.TrimPrefix(s, "0x"))
		return b
	}
	var a contractAnswer
	raw, err := rpcCall(url, "eth_getCode", addr, "latest")
	if err != nil {
		t.Fatal(err)
	}
	var code string
	_ = json.Unmarshal(raw, &code)
	a.hasCode = len(code) > 2
	if !a.hasCode {
		return a
	}
	a.name, a.nameOK = abiText(call("0x06fdde03"))
	a.symbol, a.symbolOK = abiText(call("0x95d89b41"))
	if d := call("0x313ce567"); len(d) == 32 {
		v := new(big.Int).SetBytes(d)
		if v.IsUint64() && v.Uint64() <= 255 {
			a.decimals, a.decimalsOK = int(v.Uint64()), true
		}
	}
	supports := func(id string) bool {
		d := call("0x01ffc9a7" + id + strings.Repeat("0", 56))
		return len(d) == 32 && new(big.Int).SetBytes(d).Cmp(big.NewInt(1)) == 0
	}
	a.supports721, a.supports1155 = supports("80ac58cd"), supports("d9b67a26")
	return a
}

// abiText decodes a returned string (ABI-encoded, or bytes32).
func abiText(b []byte) (string, bool) {
	switch {
	case len(b) == 32:
		return strings.TrimRight(string(b), "\x00"), true
	case len(b) >= 64:
		off := new(big.Int).SetBytes(b[:32]).Uint64()
		if off+32 > uint64(len(b)) {
			return "", false
		}
		n := new(big.Int).SetBytes(b[off : off+32]).Uint64()
		if off+32+n > uint64(len(b)) {
			return "", false
		}
		return string(b[off+32 : off+32+n]), true
	}
	return "", false
}

// runHistorySDK runs query/sdktest/history.mjs: the official SDK calls every
// transaction, address and contract method and checks the answers against
// what the model (the node's own data) says.
func runHistorySDK(t *testing.T, api string, m *hModel, oracle func(string) contractAnswer) {
	count := func(rows []hRow, keep func(hRow) bool) int {
		n := 0
		for _, r := range rows {
			if keep(r) {
				n++
			}
		}
		return n
	}
	busy := busiest(m.transactions, 1)[0]
	rows := m.transactions[busy]
	var first []string
	for i := len(rows) - 1; i >= 0 && len(first) < 5; i-- {
		first = append(first, rows[i].tx.hash)
	}
	lo, hi := rows[0].seek.block, rows[len(rows)-1].seek.block
	start, end := lo+(hi-lo)/3, lo+2*(hi-lo)/3
	transfers, internals := 0, 0
	for _, r := range rows {
		for _, tr := range r.tx.transfers {
			if tr.from == busy || tr.to == busy {
				transfers++
			}
		}
		for _, in := range r.tx.internals {
			if in.from == busy || in.to == busy {
				internals++
			}
		}
	}
	holder := func(lists map[string][]hRow) map[string]any {
		a := busiest(lists, 1)[0]
		return map[string]any{"address": a, "count": len(lists[a])}
	}
	internalParty := busiest(m.internals, 1)[0]
	var tokens []map[string]any
	for _, kind := range []int{20, 721, 1155} {
		var best string
		for a, rs := range m.tokens {
			if rs[0].transfer.kind == kind && (best == "" || len(rs) > len(m.tokens[best])) {
				best = a
			}
		}
		tokens = append(tokens, map[string]any{"address": best, "ercType": fmt.Sprintf("ERC-%d", kind), "transfers": len(m.tokens[best])})
	}
	var txs []map[string]any
	picked := map[string]bool{}
	pick := func(keep func(x *hTx) bool) {
		for _, x := range m.txs {
			if keep(x) && !picked[x.hash] {
				picked[x.hash] = true
				byKind := map[int]int{}
				for _, tr := range x.transfers {
					byKind[tr.kind]++
				}
				txs = append(txs, map[string]any{"hash": x.hash, "status": x.status, "erc20": byKind[20], "erc721": byKind[721],
					"erc1155": byKind[1155], "internal": len(x.internals)})
				return
			}
		}
		t.Error("no transaction of a kind the SDK test needs")
	}
	kindOf := func(k int) func(x *hTx) bool {
		return func(x *hTx) bool {
			return slices.ContainsFunc(x.transfers, func(tr hTransfer) bool { return tr.kind == k })
		}
	}
	pick(kindOf(20))
	pick(kindOf(721))
	pick(kindOf(1155))
	pick(func(x *hTx) bool {
		return len(x.internals) > 1 && slices.ContainsFunc(x.internals, func(in hInternal) bool { return in.reverted })
	})
	pick(func(x *hTx) bool { return x.status == "0" })
	failed := 0
	for _, x := range m.txs {
		if x.status == "0" {
			failed++
		}
	}
	var contracts []map[string]any
	addContract := func(a string) {
		ans := oracle(a)
		c := map[string]any{"address": a, "ercType": ans.ercType(), "decimals": ans.decimals}
		if rs := m.creations[a]; len(rs) > 0 {
			c["deployTx"] = rs[len(rs)-1].tx.hash
		}
		contracts = append(contracts, c)
	}
	for _, tok := range tokens {
		addContract(tok["address"].(string))
	}
	for _, a := range busiest(m.creations, 3) {
		addContract(a)
	}
	deployer := busiest(m.deployments, 1)[0]
	fx, err := json.Marshal(map[string]any{
		"chainId": "43112",
		"busy": map[string]any{"address": busy, "transactions": len(rows), "firstHashes": first,
			"native":           count(rows, func(r hRow) bool { return r.roles&(roleSender|roleRecipient) != 0 }),
			"transfersAsParty": transfers, "internalsAsParty": internals, "rangeStart": start, "rangeEnd": end,
			"inRange": count(rows, func(r hRow) bool { return r.seek.block >= start && r.seek.block < end })},
		"erc20Holder": holder(m.erc20), "erc721Holder": holder(m.erc721), "erc1155Holder": holder(m.erc1155),
		"internalParty": map[string]any{"address": internalParty, "count": len(m.internals[internalParty]),
			"reverted": count(m.internals[internalParty], func(r hRow) bool { return r.internal.reverted })},
		"tokens": tokens, "txs": txs, "latest": len(m.txs), "failed": failed, "contracts": contracts,
		"deployer": map[string]any{"address": deployer, "count": len(m.deployments[deployer])},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "history.mjs")
	cmd.Dir = sdkDir(t)
	cmd.Env = append(os.Environ(), "MORAINE_SDKTEST_URL="+api, "MORAINE_SDKTEST_FIXTURE="+string(fx))
	out, err := cmd.CombinedOutput()
	t.Logf("node history.mjs:\n%s", out)
	if err != nil || !strings.Contains(string(out), ", 0 failures") {
		t.Fatalf("the official SDK's history calls failed: %v", err)
	}
}
