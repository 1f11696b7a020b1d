package e2e

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The transaction-history routes checked against what the golden warehouse
// tables imply: the lists are computed here from TRANSACTIONS, RECEIPTS,
// LOGS, INTERNAL_TRANSACTIONS and BLOCKS alone (with this file's own decoding
// of transfer logs), following the decisions of docs/transactions.md
// (section 4), and the API must serve exactly them, field by field, page by
// page.

// hTx is one golden transaction with what the lists need.
type hTx struct {
	hash, from, to, contract                string // lowercase 0x; to "" for a creation, contract "" unless one was created
	block, index                            uint64
	blockHash                               string
	timestamp                               uint64
	baseFee                                 string
	value, gas, gasPrice, nonce, gasUsed    string
	maxFee, maxPriority, input, status, typ string
	transfers                               []hTransfer
	internals                               []hInternal
	creations                               []hCreation
}

type hTransfer struct {
	kind            int // 20, 721, 1155
	token, from, to string
	logIndex, sub   uint64
	value, tokenID  string
}

type hInternal struct {
	pos                  uint64
	typ, from, to, value string
	gas, gasUsed         string
	reverted             bool
}

type hCreation struct {
	contract, creator string // creator "" for a top-level creation
	pos               uint64
}

// hSeek orders list rows: block, tx index, position, sub-index.
type hSeek struct{ block, index, pos, sub uint64 }

func (a hSeek) cmp(b hSeek) int {
	return cmp.Or(cmp.Compare(a.block, b.block), cmp.Compare(a.index, b.index), cmp.Compare(a.pos, b.pos), cmp.Compare(a.sub, b.sub))
}

// hRow is one row of an expected address list.
type hRow struct {
	seek     hSeek
	tx       *hTx
	roles    int
	transfer *hTransfer
	internal *hInternal
	creation *hCreation
}

// Roles, as docs/transactions.md defines them (section 2, list 1).
const (
	roleSender = 1 << iota
	roleRecipient
	roleTransferParty
	roleToken
	roleInternalParty
)

// hModel holds every expected list, by address.
type hModel struct {
	txs          []*hTx // block, index order
	byHash       map[string]*hTx
	transactions map[string][]hRow
	erc20        map[string][]hRow
	erc721       map[string][]hRow
	erc1155      map[string][]hRow
	tokens       map[string][]hRow
	internals    map[string][]hRow
	deployments  map[string][]hRow
	creations    map[string][]hRow
}

func num(s string) uint64 { n, _ := strconv.ParseUint(s, 10, 64); return n }

// wordDec is the decimal value of a 32-byte hex word.
func wordDec(w string) string {
	n, _ := new(big.Int).SetString(strings.TrimPrefix(w, "0x"), 16)
	if n == nil {
		return "0"
	}
	return n.String()
}

// decodeTransfers reads the token transfers of a golden log (ERC-20 and
// ERC-721 Transfer, ERC-1155 TransferSingle and TransferBatch).
func decodeTransfers(l map[string]string) []hTransfer {
	t := []string{lower(l["TOPICHEX_0"]), lower(l["TOPICHEX_1"]), lower(l["TOPICHEX_2"]), lower(l["TOPICHEX_3"])}
	n := 0
	for _, x := range t {
		if x != "" {
			n++
		}
	}
	data := strings.TrimPrefix(lower(l["LOGDATA"]), "0x")
	token, idx := lower(l["LOGADDRESS"]), num(l["LOGINDEX"])
	switch {
	case t[0] == topicTransfer && n == 3 && len(data) == 64:
		return []hTransfer{{kind: 20, token: token, from: topicAddr(t[1]), to: topicAddr(t[2]), logIndex: idx, value: wordDec(data)}}
	case t[0] == topicTransfer && n == 4 && data == "":
		return []hTransfer{{kind: 721, token: token, from: topicAddr(t[1]), to: topicAddr(t[2]), logIndex: idx, value: "1", tokenID: wordDec(t[3])}}
	case t[0] == topicTransferSingle && n == 4 && len(data) == 128:
		return []hTransfer{{kind: 1155, token: token, from: topicAddr(t[2]), to: topicAddr(t[3]), logIndex: idx,
			tokenID: wordDec(data[:64]), value: wordDec(data[64:])}}
	case t[0] == topicTransferBatch && n == 4:
		w := func(i int) uint64 { return num(wordDec(data[64*i : 64*i+64])) }
		idsAt, valuesAt := int(w(0)/32), int(w(1)/32)
		count := int(w(idsAt))
		var out []hTransfer
		for i := range count {
			out = append(out, hTransfer{kind: 1155, token: token, from: topicAddr(t[2]), to: topicAddr(t[3]), logIndex: idx, sub: uint64(i),
				tokenID: wordDec(data[64*(idsAt+1+i) : 64*(idsAt+2+i)]), value: wordDec(data[64*(valuesAt+1+i) : 64*(valuesAt+2+i)])})
		}
		return out
	}
	return nil
}

// blockInfo is what the lists say of a block.
type blockInfo struct {
	hash      string
	timestamp uint64
	baseFee   string
}

// goldenModel is the model of a dataset's warehouse tables.
func goldenModel(t testing.TB, d dataset) *hModel {
	blocks := map[uint64]blockInfo{}
	for _, b := range d.goldenTable(t, "BLOCKS") {
		blocks[num(b["BLOCKNUMBER"])] = blockInfo{lower(b["BLOCKHASH"]), num(b["BLOCKTIMESTAMP"]), orZero(b["BLOCKBASEFEEPERGAS"])}
	}
	return buildModel(goldenTxs(t, d), blocks)
}

// buildModel computes every list from transactions in the golden tables'
// shape (goldenTx: TRANSACTIONS, RECEIPTS, LOGS, INTERNAL_TRANSACTIONS rows).
func buildModel(golden map[string]*goldenTx, blocks map[uint64]blockInfo) *hModel {
	m := &hModel{byHash: map[string]*hTx{}, transactions: map[string][]hRow{}, erc20: map[string][]hRow{}, erc721: map[string][]hRow{},
		erc1155: map[string][]hRow{}, tokens: map[string][]hRow{}, internals: map[string][]hRow{}, deployments: map[string][]hRow{},
		creations: map[string][]hRow{}}
	for _, g := range golden {
		r, rc := g.tx, g.receipt
		x := &hTx{hash: lower(r["TRANSACTIONHASH"]), from: lower(r["TRANSACTIONFROM"]), to: addr(r["TRANSACTIONTO"]),
			block: num(r["BLOCKNUMBER"]), index: num(r["TRANSACTIONINDEX"]), value: r["TRANSACTIONVALUE"], gas: r["TRANSACTIONGAS"],
			gasPrice: r["TRANSACTIONGASPRICE"], nonce: r["TRANSACTIONNONCE"], gasUsed: rc["TRANSACTIONRECEIPTGASUSED"],
			maxFee: r["TRANSACTIONMAXFEEPERGAS"], maxPriority: r["TRANSACTIONMAXPRIORITYFEEPERGAS"], input: lower(r["TRANSACTIONINPUT"]),
			status: rc["TRANSACTIONRECEIPTSTATUS"], typ: r["TRANSACTIONTYPE"]}
		if c := addr(rc["TRANSACTIONRECEIPTCONTRACTADDRESS"]); c != "0x0000000000000000000000000000000000000000" {
			x.contract = c
		}
		b := blocks[x.block]
		x.blockHash, x.timestamp, x.baseFee = b.hash, b.timestamp, b.baseFee
		for _, l := range g.logs {
			x.transfers = append(x.transfers, decodeTransfers(l)...)
		}
		failed := map[string]bool{} // call index -> the frame or an ancestor failed
		for _, f := range g.internal {
			ci := f["CALLINDEX"]
			rev := f["REVERT"] == "true"
			if i := strings.LastIndexByte(ci, '_'); i > len("call") && failed[ci[:i]] {
				rev = true
			}
			failed[ci] = rev
			depth := strings.Count(ci, "_") - 1
			typ, value := f["TYPE"], f["VALUE"]
			listed := depth > 0 && ((typ == "CALL" || typ == "CALLCODE") && value != "0" && value != "" || strings.HasPrefix(typ, "CREATE"))
			if !listed {
				continue
			}
			to := addr(f["TO"])
			if f["ERROR"] != "" && strings.HasPrefix(typ, "CREATE") {
				to = "" // the warehouse stores the address a failed CREATE would have had; the trace has none
			}
			in := hInternal{pos: num(f["TRACE_POSITION"]), typ: typ, from: addr(f["FROM"]), to: to, value: value,
				gas: f["GAS"], gasUsed: f["GASUSED"], reverted: rev}
			x.internals = append(x.internals, in)
			if strings.HasPrefix(typ, "CREATE") && !rev && to != "" {
				x.creations = append(x.creations, hCreation{contract: to, creator: in.from, pos: in.pos})
			}
		}
		if x.to == "" && x.contract != "" && x.status == "1" {
			x.creations = append([]hCreation{{contract: x.contract}}, x.creations...)
		}
		m.txs = append(m.txs, x)
		m.byHash[x.hash] = x
	}
	slices.SortFunc(m.txs, func(a, b *hTx) int { return cmp.Or(cmp.Compare(a.block, b.block), cmp.Compare(a.index, b.index)) })

	for _, x := range m.txs {
		roles := map[string]int{}
		var order []string
		party := func(a string, r int) {
			if a == "" {
				return
			}
			if _, ok := roles[a]; !ok {
				order = append(order, a)
			}
			roles[a] |= r
		}
		party(x.from, roleSender)
		party(cmp.Or(x.to, x.contract), roleRecipient)
		for i := range x.transfers {
			tr := &x.transfers[i]
			row := hRow{seek: hSeek{x.block, x.index, tr.logIndex, tr.sub}, tx: x, transfer: tr}
			lists := map[int]map[string][]hRow{20: m.erc20, 721: m.erc721, 1155: m.erc1155}[tr.kind]
			lists[tr.from] = append(lists[tr.from], row)
			if tr.to != tr.from {
				lists[tr.to] = append(lists[tr.to], row)
			}
			m.tokens[tr.token] = append(m.tokens[tr.token], row)
			party(tr.from, roleTransferParty)
			party(tr.to, roleTransferParty)
			party(tr.token, roleToken)
		}
		for i := range x.internals {
			in := &x.internals[i]
			row := hRow{seek: hSeek{x.block, x.index, in.pos, 0}, tx: x, internal: in}
			m.internals[in.from] = append(m.internals[in.from], row)
			party(in.from, roleInternalParty)
			if in.to != "" {
				if in.to != in.from {
					m.internals[in.to] = append(m.internals[in.to], row)
				}
				party(in.to, roleInternalParty)
			}
		}
		for i := range x.creations {
			c := &x.creations[i]
			row := hRow{seek: hSeek{x.block, x.index, c.pos, 0}, tx: x, creation: c}
			m.creations[c.contract] = append(m.creations[c.contract], row)
			m.deployments[x.from] = append(m.deployments[x.from], row)
			if c.creator != "" && c.creator != x.from {
				m.deployments[c.creator] = append(m.deployments[c.creator], row)
			}
		}
		for _, a := range order {
			m.transactions[a] = append(m.transactions[a], hRow{seek: hSeek{x.block, x.index, 0, 0}, tx: x, roles: roles[a]})
		}
	}
	for _, lists := range []map[string][]hRow{m.transactions, m.erc20, m.erc721, m.erc1155, m.tokens, m.internals, m.deployments, m.creations} {
		for a := range lists {
			slices.SortStableFunc(lists[a], func(x, y hRow) int { return x.seek.cmp(y.seek) })
		}
	}
	return m
}

// busiest returns up to n addresses with the most rows in lists.
func busiest(lists map[string][]hRow, n int) []string {
	var out []string
	for a := range lists {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		return cmp.Or(-cmp.Compare(len(lists[out[i]]), len(lists[out[j]])), strings.Compare(out[i], out[j])) < 0
	})
	return out[:min(n, len(out))]
}

// walk reads every page of a list route and returns its items.
func walk(t *testing.T, base, key string, pageSize int) []map[string]any {
	t.Helper()
	var out []map[string]any
	token := ""
	for page := 0; ; page++ {
		if page > 5000 {
			t.Fatalf("%s: no end after 5000 pages", base)
		}
		u := base + sep(base) + "pageSize=" + strconv.Itoa(pageSize)
		if token != "" {
			u += "&pageToken=" + url.QueryEscape(token)
		}
		var resp map[string]any
		if code := getJSON(t, u, &resp); code != http.StatusOK {
			t.Fatalf("GET %s: %d", u, code)
		}
		items, _ := resp[key].([]any)
		for _, it := range items {
			out = append(out, it.(map[string]any))
		}
		next, _ := resp["nextPageToken"].(string)
		if next == "" {
			return out
		}
		if len(items) > pageSize {
			t.Fatalf("%s: %d items in a page of %d", u, len(items), pageSize)
		}
		token = next
	}
}

func sep(u string) string {
	if strings.Contains(u, "?") {
		return "&"
	}
	return "?"
}

// field reads a nested JSON field as text ("" when absent).
func field(v any, path ...string) string {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[p]
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

const zeroAddress = "0x0000000000000000000000000000000000000000"

func orZeroAddr(a string) string { return cmp.Or(a, zeroAddress) }

// checkNative compares a NativeTransaction with the golden transaction.
func checkNative(m *mismatches, k string, got any, x *hTx, chainID uint64) {
	var method, hash string
	switch {
	case x.to == "":
		method, hash = "CONTRACT_CREATION", ""
	case len(x.input) < len("0x12345678"): // no 4-byte selector
		method, hash = "NATIVE_TRANSFER", ""
	default:
		method, hash = "CONTRACT_CALL", x.input[:min(len(x.input), 10)]
	}
	for f, want := range map[string]string{
		"blockNumber": strconv.FormatUint(x.block, 10), "blockTimestamp": strconv.FormatUint(x.timestamp, 10),
		"blockHash": x.blockHash, "chainId": strconv.FormatUint(chainID, 10), "blockIndex": strconv.FormatUint(x.index, 10),
		"txHash": x.hash, "txStatus": x.status, "txType": x.typ, "gasLimit": x.gas, "gasUsed": x.gasUsed, "gasPrice": x.gasPrice,
		"nonce": x.nonce, "value": x.value,
	} {
		m.check(k, f, field(got, f), want)
	}
	m.check(k, "from", lower(field(got, "from", "address")), x.from)
	m.check(k, "to", lower(field(got, "to", "address")), cmp.Or(x.to, x.contract))
	m.check(k, "method.callType", field(got, "method", "callType"), method)
	m.check(k, "method.methodHash", field(got, "method", "methodHash"), hash)
}

// checkTransferDetail compares an Erc20/721/1155TransferDetails (or the
// transfer fields of a list item) with a golden transfer; the token's name,
// symbol and decimals are what it answers, "" and 0 when it does not (both
// name and symbol must answer).
func (h historyCheck) checkTransferDetail(m *mismatches, k string, got any, tr *hTransfer) {
	a := h.answer(tr.token)
	name, symbol, decimals := "", "", "0"
	if a.nameOK && a.symbolOK {
		name, symbol = a.name, a.symbol
		if a.decimalsOK {
			decimals = strconv.Itoa(a.decimals)
		}
	}
	m.check(k, "from", lower(field(got, "from", "address")), tr.from)
	m.check(k, "to", lower(field(got, "to", "address")), tr.to)
	m.check(k, "logIndex", field(got, "logIndex"), strconv.FormatUint(tr.logIndex, 10))
	switch tr.kind {
	case 20:
		m.check(k, "value", field(got, "value"), tr.value)
		m.check(k, "erc20Token.address", lower(field(got, "erc20Token", "address")), tr.token)
		m.check(k, "erc20Token.ercType", field(got, "erc20Token", "ercType"), "ERC-20")
		m.check(k, "erc20Token.name", field(got, "erc20Token", "name"), name)
		m.check(k, "erc20Token.symbol", field(got, "erc20Token", "symbol"), symbol)
		m.check(k, "erc20Token.decimals", field(got, "erc20Token", "decimals"), decimals)
	case 721:
		m.check(k, "erc721Token.address", lower(field(got, "erc721Token", "address")), tr.token)
		m.check(k, "erc721Token.tokenId", field(got, "erc721Token", "tokenId"), tr.tokenID)
		m.check(k, "erc721Token.ercType", field(got, "erc721Token", "ercType"), "ERC-721")
		m.check(k, "erc721Token.metadata.indexStatus", field(got, "erc721Token", "metadata", "indexStatus"), "UNINDEXED")
		m.check(k, "erc721Token.name", field(got, "erc721Token", "name"), name)
		m.check(k, "erc721Token.symbol", field(got, "erc721Token", "symbol"), symbol)
	case 1155:
		m.check(k, "value", field(got, "value"), tr.value)
		m.check(k, "erc1155Token.address", lower(field(got, "erc1155Token", "address")), tr.token)
		m.check(k, "erc1155Token.tokenId", field(got, "erc1155Token", "tokenId"), tr.tokenID)
		m.check(k, "erc1155Token.ercType", field(got, "erc1155Token", "ercType"), "ERC-1155")
	}
}

func checkInternalDetail(m *mismatches, k string, got any, in *hInternal) {
	m.check(k, "from", lower(field(got, "from", "address")), in.from)
	m.check(k, "to", lower(field(got, "to", "address")), orZeroAddr(in.to))
	m.check(k, "internalTxType", field(got, "internalTxType"), in.typ)
	m.check(k, "value", field(got, "value"), in.value)
	m.check(k, "isReverted", field(got, "isReverted"), strconv.FormatBool(in.reverted))
	m.check(k, "gasUsed", field(got, "gasUsed"), in.gasUsed)
	m.check(k, "gasLimit", field(got, "gasLimit"), in.gas)
}

// checkRef compares the block and transaction fields of a list item.
func checkRef(m *mismatches, k string, got any, x *hTx) {
	m.check(k, "blockNumber", field(got, "blockNumber"), strconv.FormatUint(x.block, 10))
	m.check(k, "blockTimestamp", field(got, "blockTimestamp"), strconv.FormatUint(x.timestamp, 10))
	m.check(k, "blockHash", field(got, "blockHash"), x.blockHash)
	m.check(k, "txHash", field(got, "txHash"), x.hash)
}

// expected returns a list newest first (the default order).
func expected(rows []hRow) []hRow {
	out := slices.Clone(rows)
	slices.Reverse(out)
	return out
}

// contractAnswer is what the contract at an address answers through
// eth_call, as the test's own oracle reads it.
type contractAnswer struct {
	hasCode                   bool
	name, symbol              string
	nameOK, symbolOK          bool
	decimals                  int
	decimalsOK                bool
	supports721, supports1155 bool
}

// ercType is the contract's type by the rule of docs/transactions.md
// (section 4, "Contract metadata").
func (a contractAnswer) ercType() string {
	switch {
	case a.supports721:
		return "ERC-721"
	case a.supports1155:
		return "ERC-1155"
	case a.decimalsOK && a.nameOK && a.symbolOK:
		return "ERC-20"
	}
	return "UNKNOWN"
}

// historyCheck is one chain's expected lists and where to ask for them.
type historyCheck struct {
	m       *hModel
	chainID uint64
	api     string
	// contract answers for an address (nil: no contract answers, as on a
	// replayed chain, which has no state).
	contract func(addr string) contractAnswer
}

func (h historyCheck) answer(addr string) contractAnswer {
	if h.contract == nil {
		return contractAnswer{}
	}
	return h.contract(addr)
}

func compareHistory(t *testing.T, h historyCheck) {
	m := h.m
	chain := fmt.Sprintf("%s/v1/chains/%d", h.api, h.chainID)
	// Small pages make many page boundaries; long lists get larger ones,
	// so that the test takes seconds, not minutes.
	pageSize := func(rows int) int {
		if rows <= 300 {
			return 7
		}
		return 100
	}

	t.Run("address transactions", func(t *testing.T) {
		mm := &mismatches{t: t, where: "listTransactions"}
		compared := 0
		for _, a := range busiest(m.transactions, 4) {
			want := expected(m.transactions[a])
			got := walk(t, chain+"/addresses/"+a+"/transactions", "transactions", pageSize(len(want)))
			if len(got) != len(want) {
				t.Errorf("%s: %d transactions, want %d", a, len(got), len(want))
				continue
			}
			for i, w := range want {
				k := fmt.Sprintf("%s[%d]", a, i)
				checkNative(mm, k, got[i]["nativeTransaction"], w.tx, h.chainID)
				// Only the transfers and internal transactions a is a party of.
				var e20, e721, e1155 []*hTransfer
				for j := range w.tx.transfers {
					tr := &w.tx.transfers[j]
					if tr.from != a && tr.to != a {
						continue
					}
					switch tr.kind {
					case 20:
						e20 = append(e20, tr)
					case 721:
						e721 = append(e721, tr)
					default:
						e1155 = append(e1155, tr)
					}
				}
				for key, trs := range map[string][]*hTransfer{"erc20Transfers": e20, "erc721Transfers": e721, "erc1155Transfers": e1155} {
					items, _ := got[i][key].([]any)
					mm.check(k, key+" count", strconv.Itoa(len(items)), strconv.Itoa(len(trs)))
					for j := range min(len(items), len(trs)) {
						h.checkTransferDetail(mm, fmt.Sprintf("%s.%s[%d]", k, key, j), items[j], trs[j])
					}
				}
				var ins []*hInternal
				for j := range w.tx.internals {
					if in := &w.tx.internals[j]; in.from == a || in.to == a {
						ins = append(ins, in)
					}
				}
				items, _ := got[i]["internalTransactions"].([]any)
				mm.check(k, "internalTransactions count", strconv.Itoa(len(items)), strconv.Itoa(len(ins)))
				for j := range min(len(items), len(ins)) {
					checkInternalDetail(mm, fmt.Sprintf("%s.internal[%d]", k, j), items[j], ins[j])
				}
				compared++
			}
			// Oldest first, within a block range: the middle third.
			lo, hi := want[len(want)-1].seek.block, want[0].seek.block
			start, end := lo+(hi-lo)/3, lo+2*(hi-lo)/3
			var inRange []hRow
			for _, r := range m.transactions[a] {
				if r.seek.block >= start && r.seek.block < end {
					inRange = append(inRange, r)
				}
			}
			asc := walk(t, fmt.Sprintf("%s/addresses/%s/transactions?sortOrder=asc&startBlock=%d&endBlock=%d", chain, a, start, end), "transactions", pageSize(len(want)))
			hashes := func(rows []hRow) (out []string) {
				for _, r := range rows {
					out = append(out, r.tx.hash)
				}
				return out
			}
			var gotHashes []string
			for _, it := range asc {
				gotHashes = append(gotHashes, field(it, "nativeTransaction", "txHash"))
			}
			if !slices.Equal(gotHashes, hashes(inRange)) {
				t.Errorf("%s oldest first in [%d, %d): %d transactions %.200v, want %d %.200v", a, start, end, len(gotHashes), gotHashes, len(inRange), hashes(inRange))
			}
		}
		mm.done(compared)
	})

	t.Run("native transactions", func(t *testing.T) {
		mm := &mismatches{t: t, where: "listNative"}
		compared := 0
		for _, a := range busiest(m.transactions, 4) {
			var want []hRow
			for _, r := range expected(m.transactions[a]) {
				if r.roles&(roleSender|roleRecipient) != 0 {
					want = append(want, r)
				}
			}
			got := walk(t, chain+"/addresses/"+a+"/transactions:listNative", "transactions", pageSize(len(want)))
			if len(got) != len(want) {
				t.Errorf("%s: %d native transactions, want %d", a, len(got), len(want))
				continue
			}
			for i, w := range want {
				checkNative(mm, fmt.Sprintf("%s[%d]", a, i), got[i], w.tx, h.chainID)
				compared++
			}
		}
		if compared == 0 && len(m.transactions) > 0 {
			t.Error("no native transaction compared")
		}
		mm.done(max(compared, 1))
	})

	transferList := func(t *testing.T, where, route string, lists map[string][]hRow, n int) {
		mm := &mismatches{t: t, where: where}
		compared := 0
		for _, a := range busiest(lists, n) {
			want := expected(lists[a])
			got := walk(t, fmt.Sprintf(route, chain, a), map[bool]string{true: "transfers", false: "transactions"}[strings.Contains(route, "/tokens/")], pageSize(len(want)))
			if len(got) != len(want) {
				t.Errorf("%s %s: %d items, want %d", where, a, len(got), len(want))
				continue
			}
			for i, w := range want {
				k := fmt.Sprintf("%s[%d]", a, i)
				checkRef(mm, k, got[i], w.tx)
				h.checkTransferDetail(mm, k, got[i], w.transfer)
				compared++
			}
		}
		t.Logf("%s: %d addresses with transfers in the tables, %d items compared", where, len(lists), compared)
	}
	t.Run("erc20 transfers", func(t *testing.T) { transferList(t, "listErc20", "%s/addresses/%s/transactions:listErc20", m.erc20, 4) })
	t.Run("erc721 transfers", func(t *testing.T) {
		transferList(t, "listErc721", "%s/addresses/%s/transactions:listErc721", m.erc721, 4)
	})
	t.Run("erc1155 transfers", func(t *testing.T) {
		transferList(t, "listErc1155", "%s/addresses/%s/transactions:listErc1155", m.erc1155, 4)
	})
	t.Run("token transfers", func(t *testing.T) { transferList(t, "listTransfers", "%s/tokens/%s/transfers", m.tokens, 3) })

	t.Run("internal transactions", func(t *testing.T) {
		mm := &mismatches{t: t, where: "listInternals"}
		compared := 0
		for _, a := range busiest(m.internals, 4) {
			want := expected(m.internals[a])
			got := walk(t, chain+"/addresses/"+a+"/transactions:listInternals", "transactions", pageSize(len(want)))
			if len(got) != len(want) {
				t.Errorf("%s: %d internal transactions, want %d", a, len(got), len(want))
				continue
			}
			for i, w := range want {
				k := fmt.Sprintf("%s[%d]", a, i)
				checkRef(mm, k, got[i], w.tx)
				checkInternalDetail(mm, k, got[i], w.internal)
				compared++
			}
		}
		mm.done(compared)
	})

	t.Run("deployments", func(t *testing.T) {
		mm := &mismatches{t: t, where: "deployments"}
		compared := 0
		if len(m.creations) == 0 {
			// The tables have no creation: the busiest senders deployed nothing.
			for _, a := range busiest(m.transactions, 3) {
				got := walk(t, chain+"/contracts/"+a+"/deployments", "contracts", 10)
				mm.check(a, "deployments", strconv.Itoa(len(got)), "0")
				compared++
			}
		}
		for _, a := range busiest(m.deployments, 4) {
			want := expected(m.deployments[a])
			got := walk(t, chain+"/contracts/"+a+"/deployments", "contracts", pageSize(len(want)))
			if len(got) != len(want) {
				t.Errorf("%s: %d deployed contracts, want %d", a, len(got), len(want))
				continue
			}
			for i, w := range want {
				k := fmt.Sprintf("%s[%d]", a, i)
				mm.check(k, "address", lower(field(got[i], "address")), w.creation.contract)
				mm.check(k, "deploymentDetails.txHash", field(got[i], "deploymentDetails", "txHash"), w.tx.hash)
				mm.check(k, "deploymentDetails.deployerAddress", lower(field(got[i], "deploymentDetails", "deployerAddress")), w.tx.from)
				mm.check(k, "deploymentDetails.deployerContractAddress", lower(field(got[i], "deploymentDetails", "deployerContractAddress")), w.creation.creator)
				a := h.answer(w.creation.contract)
				mm.check(k, "ercType", field(got[i], "ercType"), a.ercType())
				mm.check(k, "name", field(got[i], "name"), map[bool]string{true: a.name}[a.nameOK])
				compared++
			}
		}
		// The deployment transaction of every created contract.
		for c, rows := range m.creations {
			w := rows[len(rows)-1]
			var got map[string]any
			if code := getJSON(t, chain+"/contracts/"+c+"/transactions:getDeployment", &got); code != http.StatusOK {
				mm.check(c, "getDeployment status", strconv.Itoa(code), "200")
				continue
			}
			mm.check(c, "getDeployment txHash", field(got, "nativeTransaction", "txHash"), w.tx.hash)
			compared++
		}
		mm.done(compared)
	})

	t.Run("transaction by hash", func(t *testing.T) {
		mm := &mismatches{t: t, where: "getTransaction"}
		compared := 0
		start := time.Now()
		defer func() {
			t.Logf("getTransaction: %d requests, %v each on average", compared, time.Since(start)/time.Duration(max(compared, 1)))
		}()
		// Every transaction of a small file; of a large one every n-th, and
		// every 8th with transfers, internal transactions or creations.
		step := max(1, len(m.txs)/600)
		for i, x := range m.txs {
			rich := len(x.transfers)+len(x.internals)+len(x.creations) > 0
			if i%step != 0 && !(rich && i%8 == 0) {
				continue
			}
			var got map[string]any
			if code := getJSON(t, chain+"/transactions/"+x.hash, &got); code != http.StatusOK {
				mm.check(x.hash, "status", strconv.Itoa(code), "200")
				continue
			}
			n := got["nativeTransaction"]
			checkNative(mm, x.hash, n, x, h.chainID)
			mm.check(x.hash, "input", field(n, "input"), cmp.Or(x.input, "0x"))
			mm.check(x.hash, "baseFeePerGas", field(n, "baseFeePerGas"), x.baseFee)
			mm.check(x.hash, "maxFeePerGas", field(n, "maxFeePerGas"), x.maxFee)
			mm.check(x.hash, "maxPriorityFeePerGas", field(n, "maxPriorityFeePerGas"), x.maxPriority)
			mm.check(x.hash, "networkToken.symbol", field(got, "networkTokenDetails", "networkToken", "symbol"), "AVAX")
			byKind := map[int]string{20: "erc20Transfers", 721: "erc721Transfers", 1155: "erc1155Transfers"}
			seen := map[string]int{}
			for j := range x.transfers {
				tr := &x.transfers[j]
				key := byKind[tr.kind]
				items, _ := got[key].([]any)
				if seen[key] < len(items) {
					h.checkTransferDetail(mm, fmt.Sprintf("%s.%s[%d]", x.hash, key, seen[key]), items[seen[key]], tr)
				}
				seen[key]++
			}
			for _, key := range byKind {
				items, ok := got[key].([]any)
				mm.check(x.hash, key+" present", strconv.FormatBool(ok), "true")
				mm.check(x.hash, key+" count", strconv.Itoa(len(items)), strconv.Itoa(seen[key]))
			}
			items, _ := got["internalTransactions"].([]any)
			mm.check(x.hash, "internalTransactions count", strconv.Itoa(len(items)), strconv.Itoa(len(x.internals)))
			for j := range min(len(items), len(x.internals)) {
				checkInternalDetail(mm, fmt.Sprintf("%s.internal[%d]", x.hash, j), items[j], &x.internals[j])
			}
			compared++
		}
		var miss map[string]any
		if code := getJSON(t, chain+"/transactions/0x"+strings.Repeat("ab", 32), &miss); code != http.StatusNotFound {
			t.Errorf("unknown transaction: %d, want 404", code)
		}
		mm.done(compared)
	})

	t.Run("latest transactions", func(t *testing.T) {
		mm := &mismatches{t: t, where: "listLatestTransactions"}
		got := walk(t, chain+"/transactions", "transactions", 100)
		if len(got) != len(m.txs) {
			t.Fatalf("%d latest transactions, want every one of the %d", len(got), len(m.txs))
		}
		for i := range got {
			x := m.txs[len(m.txs)-1-i]
			checkNative(mm, x.hash, got[i], x, h.chainID)
		}
		var failed []*hTx
		for i := len(m.txs) - 1; i >= 0; i-- {
			if m.txs[i].status == "0" {
				failed = append(failed, m.txs[i])
			}
		}
		gotFailed := walk(t, chain+"/transactions?status=failed", "transactions", 10)
		var gotHashes, wantHashes []string
		for _, it := range gotFailed {
			gotHashes = append(gotHashes, field(it, "txHash"))
		}
		for _, x := range failed {
			wantHashes = append(wantHashes, x.hash)
		}
		if !slices.Equal(gotHashes, wantHashes) {
			t.Errorf("status=failed: %d transactions, want %d", len(gotHashes), len(wantHashes))
		}
		// All chains (the one chain of this pipeline): the same list.
		all := walk(t, h.api+"/v1/transactions", "transactions", 50)
		if len(all) != len(got) || field(all[len(all)-1], "txHash") != field(got[len(got)-1], "txHash") {
			t.Errorf("/v1/transactions: %d transactions, want %d", len(all), len(got))
		}
		mm.done(len(got))
	})

	t.Run("address chains", func(t *testing.T) {
		for _, a := range busiest(m.transactions, 3) {
			for _, path := range []string{"/v1/address/" + a + "/chains", "/v1/chains/address/" + a} {
				var got map[string]any
				if code := getJSON(t, h.api+path, &got); code != http.StatusOK {
					t.Fatalf("GET %s: %d", path, code)
				}
				chains, _ := got["indexedChains"].([]any)
				if len(chains) != 1 || field(chains[0], "chainId") != strconv.FormatUint(h.chainID, 10) {
					t.Errorf("%s: %v", path, got)
				}
			}
		}
		var got map[string]any
		getJSON(t, h.api+"/v1/address/0x"+hex.EncodeToString([]byte("no such address here"))+"/chains", &got)
		if chains, _ := got["indexedChains"].([]any); len(chains) != 0 {
			t.Errorf("an unknown address has chains: %v", got)
		}
	})
}
