package payload

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/processor/internal/jcs"
	"github.com/moraine-data/moraine/processor/internal/watchlist"
	"github.com/moraine-data/moraine/schemas/record"
)

var update = flag.Bool("update", false, "rewrite the golden payloads")

func h(s string) []byte {
	b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	if err != nil {
		panic(err)
	}
	return b
}

func addr(s string) evm.Address {
	a, ok := evm.AddressFrom(h(s))
	if !ok {
		panic(s)
	}
	return a
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

// fuji is the transaction of the real delivered payload in testdata, as
// ingest records it (gasPrice is what the node reports for a mined
// dynamic-fee transaction: the effective price).
func fuji() (*record.Block, *record.Transaction) {
	tx := &record.Transaction{
		Hash: h("0xb8ba5e8c941dadac65110b6a23dd662ed713b6ccd30338e810876ed2e81ef468"), Index: 0, Type: 2,
		From: h("0x47a2c5701db0d39408fef68a4d0c1e628b1c35ff"), To: h("0xc4d983c497e45a614c1d9449a8a8214d08f52e6f"),
		Value: "0", Gas: 35494, GasPrice: "2", MaxFeePerGas: "3", MaxPriorityFeePerGas: "1", Nonce: 15,
		Input:  h("0xa9059cbb000000000000000000000000da8770ef037cf2738a79b4478d78d1172ce7f71000000000000000000000000000000000000000000000021e19e0c9bab2400000"),
		Status: 1, GasUsed: 35134, CumulativeGasUsed: 35134, EffectiveGasPrice: "2",
		Logs: []*record.Log{{
			Address: h("0xc4d983c497e45a614c1d9449a8a8214d08f52e6f"),
			Topics: [][]byte{
				evm.TopicTransfer[:],
				h("0x00000000000000000000000047a2c5701db0d39408fef68a4d0c1e628b1c35ff"),
				h("0x000000000000000000000000da8770ef037cf2738a79b4478d78d1172ce7f710"),
			},
			Data:     h("0x00000000000000000000000000000000000000000000021e19e0c9bab2400000"),
			LogIndex: 0,
		}},
		InternalTransactions: []*record.InternalTransaction{{
			CallIndex: "call_0", TracePosition: 0, Type: "CALL",
			From: h("0x47a2c5701db0d39408fef68a4d0c1e628b1c35ff"), To: h("0xc4d983c497e45a614c1d9449a8a8214d08f52e6f"),
			Value: "0", Gas: 35494, GasUsed: 35134, Input: h("0xa9059cbb"),
		}},
	}
	b := &record.Block{
		ChainId: 43113, Number: 47689400, Timestamp: 1763111216,
		Hash:         h("0xb3729a7bb82d07757e06b318d47fff7c496fb5feef1e39ace476e42d719550c8"),
		ReceiptsRoot: h("0xb78a3373b2f342ca859b19e1dbc0c85711be9e04722954b486988a96207d222e"),
		Transactions: []*record.Transaction{tx},
	}
	return b, tx
}

var blob = map[evm.Address]*tokenmeta.Token{
	addr("0xc4d983c497e45a614c1d9449a8a8214d08f52e6f"): {Name: "Blobcoin", Symbol: "BLOB", Decimals: 18, HasDecimals: true},
}

var avax = &chains.Token{Name: "Avalanche", Symbol: "AVAX", Decimals: 18}

// TestMatchesRealPayload builds the payload of the transaction of a real
// payload delivered by the hosted service (Fuji block 47689400, a webhook
// with logs and internal transactions) and compares it with the delivery,
// field by field, values included. Two differences are by design:
//
//   - topic3: the hosted service sent null; null breaks the official SDK's
//     schema (CONTRACT.md 5.2), so missing topics are omitted;
//   - erc20Token.valueWithDecimals: the hosted value "1.864712049423024"
//     does not follow from the payload's own value (10^22 at 18 decimals is
//     10000) nor from the contract's toFixed rule; ours applies the rule.
//
// messageId is ours (deterministic); everything else is equal.
func TestMatchesRealPayload(t *testing.T) {
	raw, err := os.ReadFile("testdata/avacloud_webhook_address_activity_fuji_47689400.json")
	if err != nil {
		t.Fatal(err)
	}
	real := decode(t, raw)
	b, tx := fuji()
	w := &watchlist.Webhook{ID: real["webhookId"].(string), ChainID: 43113, Active: true, IncludeLogs: true, IncludeInternalTxs: true}
	body, id, err := Build(Input{Webhook: w, Block: b, Tx: tx, Native: avax, Tokens: blob})
	if err != nil {
		t.Fatal(err)
	}
	ours := decode(t, body)
	if ours["messageId"] != id || id != MessageID(w.ID, 43113, tx.Hash) {
		t.Fatalf("messageId %v, returned %s", ours["messageId"], id)
	}
	ourTok := ours["event"].(map[string]any)["transaction"].(map[string]any)["erc20Transfers"].([]any)[0].(map[string]any)["erc20Token"].(map[string]any)
	if ourTok["valueWithDecimals"] != "10000.000000000000000000" {
		t.Errorf("valueWithDecimals = %v", ourTok["valueWithDecimals"])
	}
	for _, v := range []map[string]any{real, ours} {
		delete(v, "messageId")
		delete(v["event"].(map[string]any)["transaction"].(map[string]any)["erc20Transfers"].([]any)[0].(map[string]any)["erc20Token"].(map[string]any), "valueWithDecimals")
	}
	realLog := real["event"].(map[string]any)["logs"].([]any)[0].(map[string]any)
	if v, ok := realLog["topic3"]; !ok || v != nil {
		t.Fatalf("the real payload's topic3 = %v; the test's premise changed", v)
	}
	delete(realLog, "topic3")
	if !reflect.DeepEqual(real, ours) {
		for _, d := range diff("", real, ours) {
			t.Error(d)
		}
	}
}

// diff lists the paths where a and b differ.
func diff(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		for k := range am {
			if _, ok := bm[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: missing from ours (real: %v)", path, k, am[k]))
				continue
			}
			out = append(out, diff(path+"."+k, am[k], bm[k])...)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: not in the real payload (ours: %v)", path, k, bm[k]))
			}
		}
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok {
		if len(al) != len(bl) {
			return []string{fmt.Sprintf("%s: %d items, ours %d", path, len(al), len(bl))}
		}
		var out []string
		for i := range al {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(a, b) {
		return []string{fmt.Sprintf("%s: real %#v, ours %#v", path, a, b)}
	}
	return nil
}

// nulls lists the paths holding null.
func nulls(path string, v any) []string {
	switch x := v.(type) {
	case nil:
		return []string{path}
	case map[string]any:
		var out []string
		for k, e := range x {
			out = append(out, nulls(path+"."+k, e)...)
		}
		return out
	case []any:
		var out []string
		for i, e := range x {
			out = append(out, nulls(fmt.Sprintf("%s[%d]", path, i), e)...)
		}
		return out
	}
	return nil
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func word(n uint64) []byte {
	w := make([]byte, 32)
	for i := 31; n > 0; i-- {
		w[i] = byte(n)
		n >>= 8
	}
	return w
}

// kitchenSink is a transaction with every kind of content: native value,
// ERC-20/721/1155 single and batch transfers, a non-transfer LOG0 and a
// 4-topic event, an access list and nested internal calls.
func kitchenSink() (*record.Block, *record.Transaction) {
	from, to := h("0xf73166f0c75a3df444fabdfdc7e5ee4a73fa51c7"), h("0x1dac23e41fc8ce857e86fd8c1ae5b6121c67d96d")
	usdc, nft, multi := h("0xb97ef9ef8734c71904d8002f8b6bc66dd9c48a6e"), h("0x9702230a8ea53601f5cd2dc00fdbc13d4df4a8c7"), h("0xb31f66aa3c1e785363f0875a1b74e27b85fd66c7")
	tp := func(a []byte) []byte { return append(make([]byte, 12), a...) }
	batch := append(append(word(64), word(160)...), append(append(word(2), word(7)...), word(8)...)...)
	batch = append(batch, append(append(word(2), word(70)...), word(80)...)...)
	tx := &record.Transaction{
		Hash: h("0xf6a791920652e87ccc91d2f1b20c1505a94452b88f359acdeb5a6fa8205638c4"), Index: 3, Type: 0,
		From: from, To: to, Value: "30576074978046450", Gas: 651108, GasPrice: "31466275484",
		MaxFeePerGas: "31466275484", MaxPriorityFeePerGas: "31466275484", Nonce: 4, Input: h("0xb80c2f09"),
		Status: 1, GasUsed: 212125, CumulativeGasUsed: 500000, EffectiveGasPrice: "31466275484",
		Logs: []*record.Log{
			{Address: usdc, Topics: [][]byte{evm.TopicTransfer[:], tp(from), tp(to)}, Data: word(1195737), LogIndex: 17},
			{Address: nft, Topics: [][]byte{evm.TopicTransfer[:], tp(to), tp(from), word(42)}, LogIndex: 18},
			{Address: multi, Topics: [][]byte{evm.TopicTransferSingle[:], tp(to), tp(from), tp(to)}, Data: append(word(5), word(9)...), LogIndex: 19},
			{Address: multi, Topics: [][]byte{evm.TopicTransferBatch[:], tp(to), tp(from), tp(to)}, Data: batch, LogIndex: 20},
			{Address: to, Data: h("0x01"), LogIndex: 21},
			{Address: to, Topics: [][]byte{word(1), word(2), word(3), word(4)}, LogIndex: 22},
		},
		InternalTransactions: []*record.InternalTransaction{
			{CallIndex: "call_0", TracePosition: 0, Type: "CALL", From: from, To: to, Value: "30576074978046450", Gas: 651108, GasUsed: 212125},
			{CallIndex: "call_0_0", TracePosition: 1, Depth: 1, Type: "DELEGATECALL", From: to, To: usdc, Value: "0", Gas: 600000, GasUsed: 5000},
			{CallIndex: "call_0_0_0", TracePosition: 2, Depth: 2, Type: "STATICCALL", From: usdc, To: nft, Value: "0", Gas: 500000, GasUsed: 100},
			{CallIndex: "call_0_1", TracePosition: 3, Depth: 1, Type: "CREATE2", From: to, To: multi, Value: "1", Gas: 90000, GasUsed: 80000},
			{CallIndex: "call_0_2", TracePosition: 4, Depth: 1, Type: "CREATE", From: to, Value: "0", Gas: 100, GasUsed: 100, Error: "out of gas"},
		},
		AccessList: []*record.AccessTuple{{Address: usdc, StorageKeys: [][]byte{word(1), word(2)}}},
	}
	b := &record.Block{ChainId: 43114, Number: 44568834, Timestamp: 1713884373,
		Hash:         h("0xbd093536009f7dd785e9a5151d80069a93cc322f8b2df63d373865af4f6ee5be"),
		ReceiptsRoot: h("0xf355b81f3e76392e1b4926429d6abf8ec24601cc3d36d0916de3113aa80dd674"),
		Transactions: []*record.Transaction{tx}}
	return b, tx
}

func kitchenTokens() map[evm.Address]*tokenmeta.Token {
	return map[evm.Address]*tokenmeta.Token{
		addr("0xb97ef9ef8734c71904d8002f8b6bc66dd9c48a6e"): {Name: "USD Coin", Symbol: "USDC", Decimals: 6, HasDecimals: true},
		addr("0x9702230a8ea53601f5cd2dc00fdbc13d4df4a8c7"): {Name: "Dokyo", Symbol: "DOKYO"},
		// 0xb31f… (the ERC-1155) does not answer.
	}
}

// TestShape checks the payload's keys, types and the inclusion rules on a
// transaction with every kind of content, with and without the options,
// and that no value anywhere is null.
func TestShape(t *testing.T) {
	b, tx := kitchenSink()
	for _, tc := range []struct {
		name             string
		logs, internal   bool
		wantEvent        []string
		wantTransactionX []string // keys beyond the always-present ones
	}{
		{name: "plain", wantEvent: []string{"transaction"}, wantTransactionX: []string{"accessList", "networkToken"}},
		{name: "logs", logs: true, wantEvent: []string{"logs", "transaction"}, wantTransactionX: []string{"accessList", "networkToken"}},
		{name: "internal", internal: true, wantEvent: []string{"transaction"}, wantTransactionX: []string{"accessList", "internalTransactions", "networkToken"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watchlist.Webhook{ID: "401da7d9-d6d7-46c8-b431-72ff1e1543f4", Active: true, IncludeLogs: tc.logs, IncludeInternalTxs: tc.internal}
			body, _, err := Build(Input{Webhook: w, Block: b, Tx: tx, Native: avax, Tokens: kitchenTokens()})
			if err != nil {
				t.Fatal(err)
			}
			v := decode(t, body)
			if n := nulls("$", v); len(n) > 0 {
				t.Fatalf("null at %v", n)
			}
			if got := keys(v); !slices.Equal(got, []string{"event", "eventType", "messageId", "webhookId"}) {
				t.Fatalf("top-level keys %v", got)
			}
			ev := v["event"].(map[string]any)
			if got := keys(ev); !slices.Equal(got, tc.wantEvent) {
				t.Fatalf("event keys %v, want %v", got, tc.wantEvent)
			}
			txm := ev["transaction"].(map[string]any)
			want := append([]string{"blockHash", "blockNumber", "blockTimestamp", "chainId", "erc1155Transfers", "erc20Transfers",
				"erc721Transfers", "from", "gas", "gasPrice", "input", "maxFeePerGas", "maxPriorityFeePerGas", "nonce",
				"receiptCumulativeGasUsed", "receiptEffectiveGasPrice", "receiptGasUsed", "receiptRoot", "to", "transactionIndex",
				"txHash", "txStatus", "type", "value"}, tc.wantTransactionX...)
			slices.Sort(want)
			if got := keys(txm); !slices.Equal(got, want) {
				t.Fatalf("transaction keys\n got %v\nwant %v", got, want)
			}
			// JSON types of the numbers-vs-strings fields (CONTRACT.md 5.2).
			for k, isNumber := range map[string]bool{"blockNumber": false, "gas": false, "nonce": false, "value": false,
				"transactionIndex": true, "type": true, "blockTimestamp": true, "chainId": false, "txStatus": false} {
				_, num := txm[k].(float64)
				if num != isNumber {
					t.Errorf("%s is %T", k, txm[k])
				}
			}
			if txm["from"] != "0xf73166f0c75a3DF444fAbdFDC7e5EE4a73fA51C7" || txm["to"] != "0x1dac23e41fc8ce857e86fd8c1ae5b6121c67d96d" {
				t.Errorf("from %v (checksummed), to %v (lowercase)", txm["from"], txm["to"])
			}
			// Legacy transaction: both caps are the gas price.
			if txm["gasPrice"] != "31466275484" || txm["maxFeePerGas"] != "31466275484" || txm["maxPriorityFeePerGas"] != "31466275484" {
				t.Errorf("gas prices %v %v %v", txm["gasPrice"], txm["maxFeePerGas"], txm["maxPriorityFeePerGas"])
			}
			nt := txm["networkToken"].(map[string]any)
			if nt["valueWithDecimals"] != "0.030576074978046448" || nt["tokenSymbol"] != "AVAX" || nt["tokenDecimals"] != 18.0 {
				t.Errorf("networkToken %v", nt)
			}
			al := txm["accessList"].([]any)[0].(map[string]any)
			if al["accessAddresses"] != "0xB97EF9Ef8734C71904D8002F8b6Bc66Dd9c48a6E" || len(al["storageKeys"].([]any)) != 2 {
				t.Errorf("accessList %v", al)
			}
			checkTransfers(t, txm)
			if tc.internal {
				checkInternals(t, txm["internalTransactions"].([]any))
			}
			if tc.logs {
				checkLogs(t, ev["logs"].([]any))
			}
		})
	}
}

func checkTransfers(t *testing.T, txm map[string]any) {
	t.Helper()
	erc20 := txm["erc20Transfers"].([]any)
	erc721 := txm["erc721Transfers"].([]any)
	erc1155 := txm["erc1155Transfers"].([]any)
	if len(erc20) != 1 || len(erc721) != 1 || len(erc1155) != 3 {
		t.Fatalf("transfers %d/%d/%d, want 1/1/3", len(erc20), len(erc721), len(erc1155))
	}
	e20 := erc20[0].(map[string]any)
	if got := keys(e20); !slices.Equal(got, []string{"blockTimestamp", "erc20Token", "from", "logIndex", "to", "transactionHash", "type", "value"}) {
		t.Errorf("erc20 transfer keys %v", got)
	}
	tok := e20["erc20Token"].(map[string]any)
	if tok["valueWithDecimals"] != "1.195737" || tok["decimals"] != 6.0 || tok["address"] != "0xB97EF9Ef8734C71904D8002F8b6Bc66Dd9c48a6E" || e20["logIndex"] != 0.0 || e20["type"] != "ERC20" {
		t.Errorf("erc20 transfer %v", e20)
	}
	e721 := erc721[0].(map[string]any)
	tok = e721["erc721Token"].(map[string]any)
	if e721["tokenId"] != "42" || e721["value"] != "1" || e721["logIndex"] != 1.0 || tok["decimals"] != 0.0 || tok["valueWithDecimals"] != "1" || e721["type"] != "ERC721" {
		t.Errorf("erc721 transfer %v", e721)
	}
	var ids []string
	for _, x := range erc1155 {
		m := x.(map[string]any)
		if _, ok := m["erc1155Token"]; ok {
			t.Errorf("token object for a token that does not answer: %v", m)
		}
		ids = append(ids, fmt.Sprintf("%v:%v@%v", m["tokenId"], m["value"], m["logIndex"]))
	}
	if !slices.Equal(ids, []string{"5:9@2", "7:70@3", "8:80@3"}) {
		t.Errorf("erc1155 transfers %v", ids)
	}
}

func checkInternals(t *testing.T, its []any) {
	t.Helper()
	var got []string
	for _, x := range its {
		m := x.(map[string]any)
		if k := keys(m); !slices.Equal(k, []string{"from", "gasLimit", "gasUsed", "internalTxType", "to", "transactionHash", "value"}) {
			t.Errorf("internal transaction keys %v", k)
		}
		got = append(got, fmt.Sprintf("%v %v->%v %v/%v", m["internalTxType"], m["from"].(string)[:6], m["to"].(string)[:6], m["gasUsed"], m["gasLimit"]))
	}
	want := []string{
		"CALL 0xf731->0x1daC 212125/651108", // root from the transaction, listed once
		"DELEGATECALL 0x1daC->0xB97E 5000/600000",
		"STATICCALL 0xB97E->0x9702 100/500000",
		"CREATE2 0x1daC->0xB31f 80000/90000",
		"CREATE 0x1daC->0x0000 100/100", // failed create: no address, never null
	}
	if !slices.Equal(got, want) {
		t.Errorf("internal transactions\n got %v\nwant %v", got, want)
	}
}

func checkLogs(t *testing.T, ls []any) {
	t.Helper()
	if len(ls) != 6 {
		t.Fatalf("%d logs", len(ls))
	}
	for i, x := range ls {
		m := x.(map[string]any)
		if m["removed"] != false || m["transactionIndex"] != 3.0 || m["logIndex"] != float64(17+i) {
			t.Errorf("log %d: %v", i, m)
		}
	}
	if k := keys(ls[0].(map[string]any)); !slices.Equal(k, []string{"address", "data", "logIndex", "removed", "topic0", "topic1", "topic2", "transactionIndex"}) {
		t.Errorf("3-topic log keys %v", k)
	}
	if m := ls[4].(map[string]any); m["topic0"] != "0x" || m["data"] != "0x01" || len(m) != 6 {
		t.Errorf("LOG0 %v", m)
	}
	if m := ls[5].(map[string]any); m["topic3"] == nil || m["data"] != "0x" {
		t.Errorf("4-topic log %v", m)
	}
	if ls[0].(map[string]any)["address"] != "0xB97EF9Ef8734C71904D8002F8b6Bc66Dd9c48a6E" {
		t.Errorf("log address not checksummed")
	}
}

// TestCanonicalBytes: the body is RFC 8785 canonical JSON (re-canonicalizing
// it changes nothing; no whitespace; no HTML escaping) and matches the
// golden file byte for byte.
func TestCanonicalBytes(t *testing.T) {
	b, tx := kitchenSink()
	tx.Input = []byte("<&>") // bytes, hex-encoded: only to show nothing is HTML-escaped anywhere
	w := &watchlist.Webhook{ID: "401da7d9-d6d7-46c8-b431-72ff1e1543f4", Active: true, IncludeLogs: true, IncludeInternalTxs: true}
	tokens := kitchenTokens()
	tokens[addr("0xb97ef9ef8734c71904d8002f8b6bc66dd9c48a6e")].Name = "USD <Coin> & co"
	body, _, err := Build(Input{Webhook: w, Block: b, Tx: tx, Native: avax, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	again, err := jcs.Marshal(decodeAny(t, body))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, again) {
		t.Fatalf("not canonical:\n%s\n%s", body, again)
	}
	if bytes.ContainsAny(bytes.ReplaceAll(body, []byte("USD <Coin> & co"), nil), " \n\t\r") {
		t.Fatal("whitespace in the body")
	}
	if !bytes.Contains(body, []byte(`"name":"USD <Coin> & co"`)) {
		t.Fatalf("HTML-escaped or missing token name: %s", body)
	}
	path := filepath.Join("testdata", "kitchen_sink.golden.json")
	if *update {
		if err := os.WriteFile(path, append(body, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/payload -update)", err)
	}
	if !bytes.Equal(append(body, '\n'), want) {
		t.Fatalf("payload drifted from %s:\n got %s\nwant %s", path, body, want)
	}
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return numbersToInts(v)
}

// numbersToInts turns json.Number into int64 (every number in a payload is
// an integer) so jcs accepts the tree.
func numbersToInts(v any) any {
	switch x := v.(type) {
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			panic(err)
		}
		return n
	case map[string]any:
		for k, e := range x {
			x[k] = numbersToInts(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbersToInts(e)
		}
	}
	return v
}

func TestMessageIDDeterministic(t *testing.T) {
	b, tx := kitchenSink()
	w := &watchlist.Webhook{ID: "401da7d9-d6d7-46c8-b431-72ff1e1543f4", Active: true}
	_, id1, _ := Build(Input{Webhook: w, Block: b, Tx: tx})
	// Reprocessing the block (another token answer, another settings
	// snapshot) repeats the id.
	w2 := *w
	w2.IncludeLogs = true
	_, id2, _ := Build(Input{Webhook: &w2, Block: b, Tx: tx, Native: avax, Tokens: kitchenTokens()})
	if id1 != id2 {
		t.Fatalf("%s != %s", id1, id2)
	}
	w3 := *w
	w3.ID = "263942d1-74a4-4416-aeb4-948b9b9bb7cc"
	_, id3, _ := Build(Input{Webhook: &w3, Block: b, Tx: tx})
	if id3 == id1 {
		t.Fatal("another webhook, same id")
	}
}

func TestCreationAndEdgeCases(t *testing.T) {
	created := h("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed")
	tx := &record.Transaction{Hash: word(9), Type: 2, From: h("0xf73166f0c75a3df444fabdfdc7e5ee4a73fa51c7"), ContractAddress: created,
		Value: "0", GasPrice: "25000000000", MaxFeePerGas: "30000000000", MaxPriorityFeePerGas: "1", EffectiveGasPrice: "25000000001", Status: 0,
		InternalTransactions: []*record.InternalTransaction{{Type: "CREATE", From: h("0xf73166f0c75a3df444fabdfdc7e5ee4a73fa51c7"), To: created, Value: "0"}}}
	b := &record.Block{ChainId: 43112, Number: 1, Transactions: []*record.Transaction{tx}}
	w := &watchlist.Webhook{ID: "x", Active: true, IncludeInternalTxs: true}
	body, _, err := Build(Input{Webhook: w, Block: b, Tx: tx, Native: avax})
	if err != nil {
		t.Fatal(err)
	}
	txm := decode(t, body)["event"].(map[string]any)["transaction"].(map[string]any)
	for k, want := range map[string]any{
		"to":              "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed", // the created contract, lowercase like every "to"
		"contractAddress": "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
		"gasPrice":        "30000000000", // dynamic fee: the cap
		"maxFeePerGas":    "30000000000",
		"txStatus":        "0",
		"input":           "0x",
		"receiptRoot":     "0x0000000000000000000000000000000000000000000000000000000000000000",
	} {
		if txm[k] != want {
			t.Errorf("%s = %v, want %v", k, txm[k], want)
		}
	}
	if _, ok := txm["networkToken"]; ok {
		t.Error("networkToken without value")
	}
	if _, ok := txm["accessList"]; ok {
		t.Error("empty accessList present")
	}
	its := txm["internalTransactions"].([]any)
	if len(its) != 1 || its[0].(map[string]any)["internalTxType"] != "CREATE" || its[0].(map[string]any)["to"] != "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed" {
		t.Errorf("creation internal transactions %v", its)
	}
	// Non-creation: no contractAddress key at all (the real payload has none).
	_, tx2 := fuji()
	body, _, _ = Build(Input{Webhook: w, Block: b, Tx: tx2})
	if _, ok := decode(t, body)["event"].(map[string]any)["transaction"].(map[string]any)["contractAddress"]; ok {
		t.Error("contractAddress on a call")
	}
}

func TestTokenAddresses(t *testing.T) {
	_, tx := kitchenSink()
	got := TokenAddresses(tx, nil)
	want := []evm.Address{addr("0xb97ef9ef8734c71904d8002f8b6bc66dd9c48a6e"), addr("0x9702230a8ea53601f5cd2dc00fdbc13d4df4a8c7"), addr("0xb31f66aa3c1e785363f0875a1b74e27b85fd66c7")}
	if !slices.Equal(got, want) {
		t.Fatalf("got %x", got)
	}
}

func TestValueWithDecimals(t *testing.T) {
	for _, tc := range []struct {
		value    string
		decimals int
		want     string
	}{
		// CONTRACT.md 5.2 vectors.
		{"30576074978046450", 18, "0.030576074978046448"},
		{"1195737", 6, "1.195737"},
		// toFixed rules (checked against Node): ties go up, float rounding
		// shows, large values switch to exponent form.
		{"10000000000000000000000", 18, "10000.000000000000000000"},
		{"125", 3, "0.125"},
		{"125", 2, "1.25"},
		{"1", 0, "1"},
		{"0", 6, "0.000000"},
		{"5", 1, "0.5"},
		{"1005", 3, "1.005"},
		{"1000000000000000000000000000000000000000000", 18, "1e+24"},
		{"115792089237316195423570985008687907853269984665640564039457584007913129639935", 0, "1.157920892373162e+77"},
	} {
		got, ok := ValueWithDecimals(tc.value, tc.decimals)
		if !ok || got != tc.want {
			t.Errorf("ValueWithDecimals(%s, %d) = %q, %v; want %q", tc.value, tc.decimals, got, ok, tc.want)
		}
	}
	for _, tc := range []struct {
		x    float64
		f    int
		want string
	}{
		{0.125, 2, "0.13"}, // exact tie: the larger n (Go's FormatFloat gives 0.12)
		{2.5, 0, "3"},
		{0.5, 0, "1"},
		{1.005, 2, "1.00"}, // 1.005 is 1.00499999999999989…
		{1.45, 1, "1.4"},
		{8.345, 2, "8.35"},
		{1.0 / 3, 20, "0.33333333333333331483"},
		{0.000001, 7, "0.0000010"},
		{5e-324, 3, "0.000"},
		{1e21, 2, "1e+21"},
	} {
		if got := toFixed(tc.x, tc.f); got != tc.want {
			t.Errorf("toFixed(%v, %d) = %s, want %s", tc.x, tc.f, got, tc.want)
		}
	}
	for _, bad := range []struct {
		v string
		d int
	}{{"", 1}, {"-1", 1}, {"1.5", 1}, {"0x10", 1}, {"1", -1}, {"1", 101}} {
		if _, ok := ValueWithDecimals(bad.v, bad.d); ok {
			t.Errorf("ValueWithDecimals(%q, %d) accepted", bad.v, bad.d)
		}
	}
}

func BenchmarkBuild(b *testing.B) {
	blk, tx := kitchenSink()
	w := &watchlist.Webhook{ID: "401da7d9-d6d7-46c8-b431-72ff1e1543f4", Active: true, IncludeLogs: true, IncludeInternalTxs: true}
	in := Input{Webhook: w, Block: blk, Tx: tx, Native: avax, Tokens: kitchenTokens()}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Build(in); err != nil {
			b.Fatal(err)
		}
	}
}
