package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// dataset is a recorded chain with its golden warehouse tables.
type dataset struct {
	name      string
	recording string // replay JSONL under shared/data
	golden    string // path prefix of the warehouse CSVs, e.g. avalanche/cchain_1_100/C_
	suffix    string // file suffix before .csv.zst, e.g. _1_100
	chainID   uint64
	// rootGasQuirk: the export subtracts the intrinsic gas from the root
	// call frame's gas and gasUsed (the C-Chain 1..100 tables, see
	// data/README.md; the Gunzilla tables match the RPC traces).
	rootGasQuirk bool
}

var (
	cchain = dataset{name: "cchain_1_100", recording: "avalanche/cchain_1_100/blocks_1_100.jsonl.zst",
		golden: "avalanche/cchain_1_100/C_", suffix: "_1_100", chainID: 43114, rootGasQuirk: true}
	gunzilla = dataset{name: "gunzilla", recording: "avalanche/gunzilla_14M/GUNZILLA_BLOCKS.jsonl.zst",
		golden: "avalanche/gunzilla_14M/GUNZILLA_", chainID: 43419}
)

func (d dataset) goldenTable(t testing.TB, name string) table {
	return readCSV(t, testenv.SharedData(t, d.golden+name+d.suffix+".csv.zst"))
}

func rpcCall(url, method string, params ...any) (json.RawMessage, error) {
	if params == nil {
		params = []any{}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	resp, err := http.Post(url, "application/json", strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	if out.Error != nil {
		return nil, fmt.Errorf("%s: %s", method, out.Error.Message)
	}
	return out.Result, nil
}

func getJSON(t testing.TB, url string, into any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if into != nil && resp.StatusCode == http.StatusOK {
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.UseNumber()
		if err := dec.Decode(into); err != nil {
			t.Fatalf("GET %s: %v: %s", url, err, b)
		}
	}
	return resp.StatusCode
}

// TestRealDataCChain replays C-Chain blocks 1..100 through the whole path
// and compares ClickHouse and the API with the golden tables and the RPC.
func TestRealDataCChain(t *testing.T) { testRealData(t, cchain) }

// TestRealDataGunzilla does the same for 1,001 Gunzilla blocks, 100 apart
// (replay mode: parent hashes do not link and that is not a reorg).
func TestRealDataGunzilla(t *testing.T) { testRealData(t, gunzilla) }

func testRealData(t *testing.T, d dataset) {
	rec := readRecording(t, testenv.SharedData(t, d.recording))
	sort.Slice(rec, func(i, j int) bool {
		return hexToBig(str(rec[i].Block["number"])).Cmp(hexToBig(str(rec[j].Block["number"]))) < 0
	})
	first := hexToBig(str(rec[0].Block["number"])).Uint64()
	last := hexToBig(str(rec[len(rec)-1].Block["number"])).Uint64()

	// A reorg window of one block settles every block below the head: the
	// history routes render the rows' own block timestamps (history.proto),
	// which the golden comparison checks.
	s := runPipeline(t, d, first, pipelineOpts{queryArgs: []string{"--query.reorg-window", "1"}})
	eventually(t, 5*time.Minute, fmt.Sprintf("head %d in ClickHouse", last), func() bool {
		var n uint64
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.conn.QueryRow(ctx, "SELECT count() FROM chain_heads FINAL WHERE chain_id = ? AND number = ?", d.chainID, last).Scan(&n)
		return n == 1
	})

	if d.name == gunzilla.name {
		// The sparse recording's numbers come from the replay's listing,
		// not from a header probe per number.
		calls := scrape(t, s.metrics["ingest"], "moraine_rpc_requests_total")
		listed, probed := 0.0, 0.0
		for labels, v := range calls {
			switch {
			case strings.Contains(labels, `method="moraine_recordedBlockNumbers"`) && strings.Contains(labels, `result="ok"`):
				listed += v
			case strings.Contains(labels, `method="eth_getBlockByNumber"`):
				probed += v
			}
		}
		if listed == 0 || probed > float64(2*len(rec)) {
			t.Errorf("ingest listed the recording %v times and asked for %v blocks (%d recorded): %v", listed, probed, len(rec), calls)
		}
	}
	t.Run("blocks vs golden", func(t *testing.T) { compareBlocks(t, d, s) })
	t.Run("transactions vs golden", func(t *testing.T) { compareTransactions(t, d, s) })
	t.Run("logs vs golden", func(t *testing.T) { compareLogs(t, d, s) })
	t.Run("internal transactions vs golden", func(t *testing.T) { compareInternal(t, d, s) })
	t.Run("API blocks vs RPC", func(t *testing.T) { compareAPIBlocks(t, d, s, rec) })
	t.Run("API pagination", func(t *testing.T) { comparePagination(t, d, s, rec) })
	t.Run("API block transactions vs RPC", func(t *testing.T) { compareAPIBlockTxs(t, d, s, rec) })
	t.Run("history vs golden", func(t *testing.T) {
		compareHistory(t, historyCheck{m: goldenModel(t, d), chainID: d.chainID, api: s.api})
	})
	t.Run("balances vs golden", func(t *testing.T) { compareBalancesGolden(t, d, s) })
}

func query(t testing.TB, conn driver.Conn, q string, args ...any) []map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols := rows.Columns()
	var out []map[string]string
	for rows.Next() {
		vals := make([]string, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("scan %s: %v", q, err)
		}
		m := make(map[string]string, len(cols))
		for i, c := range cols {
			m[c] = vals[i]
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// mismatches collects differences and reports the first few with a count,
// so one systematic error does not print 200,000 lines.
type mismatches struct {
	t     testing.TB
	n     int
	where string
}

func (m *mismatches) check(key, field, got, want string) {
	if got == want {
		return
	}
	m.n++
	if m.n <= 15 {
		m.t.Errorf("%s %s: %s = %q, golden %q", m.where, key, field, got, want)
	}
}

func (m *mismatches) done(compared int) {
	if m.n > 15 {
		m.t.Errorf("%s: %d mismatches in total", m.where, m.n)
	}
	if compared == 0 {
		m.t.Errorf("%s: nothing compared", m.where)
	}
	m.t.Logf("%s: %d rows compared, %d mismatches", m.where, compared, m.n)
}

// addr normalises an address for comparison: lower case, and the
// warehouse's all-zero address for "none".
func addr(s string) string {
	s = lower(s)
	if s == "" || s == "0x" {
		return ""
	}
	return s
}

func compareBlocks(t *testing.T, d dataset, s *stackUp) {
	golden := d.goldenTable(t, "BLOCKS")
	got := map[string]map[string]string{}
	for _, r := range query(t, s.conn, `SELECT toString(number) AS number, lower(hex(hash)) AS hash, lower(hex(parent_hash)) AS parent,
		toString(timestamp) AS ts, base_fee, toString(gas_used) AS gas_used, toString(gas_limit) AS gas_limit, gas_cost,
		ext_data_gas_used, toString(tx_count) AS tx_count, toString(size) AS size
		FROM blocks FINAL WHERE chain_id = ? AND removed = 0`, d.chainID) {
		got[r["number"]] = r
	}
	if len(got) != len(golden) {
		t.Errorf("ClickHouse has %d blocks, golden %d", len(got), len(golden))
	}
	m := &mismatches{t: t, where: "block"}
	for _, g := range golden {
		r, ok := got[g["BLOCKNUMBER"]]
		if !ok {
			m.check(g["BLOCKNUMBER"], "present", "missing", "present")
			continue
		}
		k := g["BLOCKNUMBER"]
		m.check(k, "hash", "0x"+r["hash"], g["BLOCKHASH"])
		m.check(k, "parentHash", "0x"+r["parent"], g["BLOCKPARENTHASH"])
		m.check(k, "timestamp", r["ts"], g["BLOCKTIMESTAMP"])
		m.check(k, "baseFee", r["base_fee"], g["BLOCKBASEFEEPERGAS"])
		m.check(k, "gasUsed", r["gas_used"], g["BLOCKGASUSED"])
		m.check(k, "gasLimit", r["gas_limit"], g["BLOCKGASLIMIT"])
		m.check(k, "txCount", r["tx_count"], g["BLOCKTRANSACTIONLEN"])
		m.check(k, "size", r["size"], g["BLOCKSIZE"])
		m.check(k, "extDataGasUsed", r["ext_data_gas_used"], g["BLOCKEXTDATAGASUSED"])
		// Quirk: the Gunzilla export leaves BLOCKGASCOST empty where the
		// header's blockGasCost is 0x0.
		wantCost := g["BLOCKGASCOST"]
		if wantCost == "" && r["gas_cost"] == "0" {
			wantCost = "0"
		}
		m.check(k, "blockGasCost", r["gas_cost"], wantCost)
	}
	m.done(len(golden))
}

func compareTransactions(t *testing.T, d dataset, s *stackUp) {
	txs := d.goldenTable(t, "TRANSACTIONS")
	receipts := map[string]map[string]string{}
	for _, r := range d.goldenTable(t, "RECEIPTS") {
		receipts[lower(r["TRANSACTIONHASH"])] = r
	}
	got := map[string]map[string]string{}
	for _, r := range query(t, s.conn, `SELECT lower(hex(hash)) AS hash, toString(block_number) AS block, toString(tx_index) AS idx,
		lower(hex(from_address)) AS from_addr, lower(hex(to_address)) AS to_addr, toString(gas) AS gas, gas_price, max_fee_per_gas,
		max_priority_fee_per_gas, lower(hex(input)) AS input, toString(nonce) AS nonce, value, toString(type) AS type,
		toString(status) AS status, toString(gas_used) AS gas_used, toString(cumulative_gas_used) AS cum, effective_gas_price,
		lower(hex(contract_address)) AS contract
		FROM transactions_by_block FINAL WHERE chain_id = ?`, d.chainID) {
		got["0x"+r["hash"]] = r
	}
	if len(got) != len(txs) {
		t.Errorf("ClickHouse has %d transactions, golden %d", len(got), len(txs))
	}
	m := &mismatches{t: t, where: "transaction"}
	for _, g := range txs {
		k := lower(g["TRANSACTIONHASH"])
		r, ok := got[k]
		if !ok {
			m.check(k, "present", "missing", "present")
			continue
		}
		m.check(k, "block", r["block"], g["BLOCKNUMBER"])
		m.check(k, "index", r["idx"], g["TRANSACTIONINDEX"])
		m.check(k, "from", "0x"+r["from_addr"], lower(g["TRANSACTIONFROM"]))
		m.check(k, "to", addr("0x"+r["to_addr"]), addr(g["TRANSACTIONTO"]))
		m.check(k, "gas", r["gas"], g["TRANSACTIONGAS"])
		m.check(k, "gasPrice", r["gas_price"], g["TRANSACTIONGASPRICE"])
		m.check(k, "maxFeePerGas", r["max_fee_per_gas"], g["TRANSACTIONMAXFEEPERGAS"])
		m.check(k, "maxPriorityFeePerGas", r["max_priority_fee_per_gas"], g["TRANSACTIONMAXPRIORITYFEEPERGAS"])
		m.check(k, "input", "0x"+r["input"], lower(g["TRANSACTIONINPUT"]))
		m.check(k, "nonce", r["nonce"], g["TRANSACTIONNONCE"])
		m.check(k, "value", r["value"], g["TRANSACTIONVALUE"])
		m.check(k, "type", r["type"], g["TRANSACTIONTYPE"])
		rc := receipts[k]
		if rc == nil {
			m.check(k, "receipt", "present", "missing in golden")
			continue
		}
		m.check(k, "status", r["status"], rc["TRANSACTIONRECEIPTSTATUS"])
		m.check(k, "gasUsed", r["gas_used"], rc["TRANSACTIONRECEIPTGASUSED"])
		m.check(k, "cumulativeGasUsed", r["cum"], rc["TRANSACTIONRECEIPTCUMULATIVEGASUSED"])
		m.check(k, "effectiveGasPrice", r["effective_gas_price"], rc["TRANSACTIONRECEIPTEFFECTIVEGASPRICE"])
		// The warehouse writes the zero address where a receipt has no contract.
		wantContract := addr(rc["TRANSACTIONRECEIPTCONTRACTADDRESS"])
		if wantContract == "0x0000000000000000000000000000000000000000" {
			wantContract = ""
		}
		m.check(k, "contractAddress", addr("0x"+r["contract"]), wantContract)
	}
	m.done(len(txs))
}

// txHashesByPlace maps "block hash/tx index" to the transaction's hash
// (0x...): logs and call frames name their transaction by its place
// (migration 17).
func txHashesByPlace(t *testing.T, d dataset, s *stackUp) map[string]string {
	out := map[string]string{}
	for _, r := range query(t, s.conn, `SELECT lower(hex(block_hash)) AS block, toString(tx_index) AS tx_index, lower(hex(hash)) AS hash
		FROM transactions_by_block FINAL WHERE chain_id = ?`, d.chainID) {
		out[r["block"]+"/"+r["tx_index"]] = "0x" + r["hash"]
	}
	return out
}

func compareLogs(t *testing.T, d dataset, s *stackUp) {
	golden := d.goldenTable(t, "LOGS")
	hashes := txHashesByPlace(t, d, s)
	got := map[string]map[string]string{}
	for _, r := range query(t, s.conn, `SELECT lower(hex(block_hash)) AS block, toString(log_index) AS idx, toString(tx_index) AS tx_index,
		lower(hex(address)) AS address, lower(hex(topic0)) AS t0, lower(hex(topic1)) AS t1, lower(hex(topic2)) AS t2,
		lower(hex(topic3)) AS t3, lower(hex(data)) AS data
		FROM logs FINAL WHERE chain_id = ?`, d.chainID) {
		got[hashes[r["block"]+"/"+r["tx_index"]]+"/"+r["idx"]] = r
	}
	if len(got) != len(golden) {
		t.Errorf("ClickHouse has %d logs, golden %d", len(got), len(golden))
	}
	m := &mismatches{t: t, where: "log"}
	opt := func(s string) string {
		if s == "" {
			return ""
		}
		return "0x" + s
	}
	for _, g := range golden {
		k := lower(g["TRANSACTIONHASH"]) + "/" + g["LOGINDEX"]
		r, ok := got[k]
		if !ok {
			m.check(k, "present", "missing", "present")
			continue
		}
		m.check(k, "address", "0x"+r["address"], lower(g["LOGADDRESS"]))
		m.check(k, "txIndex", r["tx_index"], g["TRANSACTIONINDEX"])
		m.check(k, "topic0", opt(r["t0"]), lower(g["TOPICHEX_0"]))
		m.check(k, "topic1", opt(r["t1"]), lower(g["TOPICHEX_1"]))
		m.check(k, "topic2", opt(r["t2"]), lower(g["TOPICHEX_2"]))
		m.check(k, "topic3", opt(r["t3"]), lower(g["TOPICHEX_3"]))
		m.check(k, "data", "0x"+r["data"], lower(g["LOGDATA"]))
	}
	m.done(len(golden))
}

func compareInternal(t *testing.T, d dataset, s *stackUp) {
	golden := d.goldenTable(t, "INTERNAL_TRANSACTIONS")
	// Intrinsic gas of every transaction, for the root-frame quirk below.
	intrinsic := map[string]uint64{}
	for _, r := range query(t, s.conn, `SELECT lower(hex(hash)) AS hash, lower(hex(input)) AS input, toString(length(to_address)) AS to_len
		FROM transactions_by_block FINAL WHERE chain_id = ?`, d.chainID) {
		intrinsic["0x"+r["hash"]] = intrinsicGas(r["input"], r["to_len"] == "0")
	}
	hashes := txHashesByPlace(t, d, s)
	got := map[string]map[string]string{}
	for _, r := range query(t, s.conn, `SELECT lower(hex(block_hash)) AS block, toString(tx_index) AS tx_index, call_index, toString(trace_position) AS pos, type,
		lower(hex(from_address)) AS from_addr, lower(hex(to_address)) AS to_addr, value, toString(gas) AS gas,
		toString(gas_used) AS gas_used, error, revert_reason, lower(hex(input)) AS input, lower(hex(output)) AS output
		FROM internal_transactions FINAL WHERE chain_id = ?`, d.chainID) {
		got[hashes[r["block"]+"/"+r["tx_index"]]+"/"+r["call_index"]] = r
	}
	if len(got) != len(golden) {
		t.Errorf("ClickHouse has %d internal transactions, golden %d", len(got), len(golden))
	}
	m := &mismatches{t: t, where: "internal tx"}
	hexOrEmpty := func(s string) string {
		if s == "" || s == "0x" {
			return ""
		}
		return lower(s)
	}
	for _, g := range golden {
		tx := lower(g["TRANSACTIONHASH"])
		k := tx + "/" + g["CALLINDEX"]
		r, ok := got[k]
		if !ok {
			m.check(k, "present", "missing", "present")
			continue
		}
		failed := r["error"] != ""
		m.check(k, "tracePosition", r["pos"], g["TRACE_POSITION"])
		m.check(k, "type", r["type"], g["TYPE"])
		m.check(k, "from", addr("0x"+r["from_addr"]), addr(g["FROM"]))
		// Quirk: for a CREATE that failed, the warehouse stores the address
		// the contract would have had; the trace has none.
		if !(failed && r["to_addr"] == "" && strings.HasPrefix(r["type"], "CREATE")) {
			m.check(k, "to", addr("0x"+r["to_addr"]), addr(g["TO"]))
		}
		m.check(k, "value", r["value"], g["VALUE"])
		gas, gasUsed := r["gas"], r["gas_used"]
		if g["CALLINDEX"] == "call_0" && d.rootGasQuirk {
			// The quirk, checked exactly: golden = trace - intrinsic gas.
			ig := intrinsic[tx]
			gas, gasUsed = minus(gas, ig), minus(gasUsed, ig)
		}
		m.check(k, "gas", gas, g["GAS"])
		m.check(k, "gasUsed", gasUsed, g["GASUSED"])
		m.check(k, "revert", strconv.FormatBool(failed), g["REVERT"])
		m.check(k, "error", r["error"], g["ERROR"])
		m.check(k, "input", hexOrEmpty("0x"+r["input"]), hexOrEmpty(g["INPUT"]))
		// Quirk: the warehouse drops the output of a reverted nested frame.
		if !(failed && g["OUTPUT"] == "") {
			m.check(k, "output", hexOrEmpty("0x"+r["output"]), hexOrEmpty(g["OUTPUT"]))
		}
	}
	m.done(len(golden))
}

// intrinsicGas is the intrinsic gas of a transaction without an access list
// (21000, +32000 for a creation, 4 per zero and 16 per non-zero input byte).
func intrinsicGas(inputHex string, create bool) uint64 {
	g := uint64(21000)
	if create {
		g += 32000
	}
	b, _ := hex.DecodeString(inputHex)
	for _, c := range b {
		if c == 0 {
			g += 4
		} else {
			g += 16
		}
	}
	return g
}

func minus(dec string, v uint64) string {
	n, err := strconv.ParseUint(dec, 10, 64)
	if err != nil || n < v {
		return dec
	}
	return strconv.FormatUint(n-v, 10)
}

// apiBlock is the JSON of one EvmBlock.
type apiBlock map[string]any

// compareAPIBlocks checks every block the API serves against values
// computed here, independently, from the recorded RPC JSON.
func compareAPIBlocks(t *testing.T, d dataset, s *stackUp, rec []rpcBlock) {
	m := &mismatches{t: t, where: "API block"}
	cumulative := new(big.Int)
	for _, b := range rec {
		num := hexToDec(str(b.Block["number"]))
		txs, _ := b.Block["transactions"].([]any)
		cumulative.Add(cumulative, big.NewInt(int64(len(txs))))
		fees := new(big.Int)
		for _, r := range b.Receipts {
			price := str(r["effectiveGasPrice"])
			if price == "" {
				// Receipts before EIP-1559 lack it; the tx gas price applies.
				for _, tx := range txs {
					if txm, _ := tx.(map[string]any); str(txm["hash"]) == str(r["transactionHash"]) {
						price = str(txm["gasPrice"])
					}
				}
			}
			fees.Add(fees, new(big.Int).Mul(hexToBig(str(r["gasUsed"])), hexToBig(price)))
		}
		want := map[string]string{
			"chainId":                strconv.FormatUint(d.chainID, 10),
			"blockNumber":            num,
			"blockTimestamp":         hexToDec(str(b.Block["timestamp"])),
			"blockHash":              str(b.Block["hash"]),
			"parentHash":             str(b.Block["parentHash"]),
			"txCount":                strconv.Itoa(len(txs)),
			"gasUsed":                hexToDec(str(b.Block["gasUsed"])),
			"gasLimit":               hexToDec(str(b.Block["gasLimit"])),
			"baseFee":                orZero(hexToDec(str(b.Block["baseFeePerGas"]))),
			"gasCost":                orZero(hexToDec(str(b.Block["blockGasCost"]))),
			"feesSpent":              fees.String(),
			"cumulativeTransactions": cumulative.String(),
		}
		var got apiBlock
		for _, id := range []string{num, str(b.Block["hash"])} {
			if code := getJSON(t, fmt.Sprintf("%s/v1/chains/%d/blocks/%s", s.api, d.chainID, id), &got); code != http.StatusOK {
				m.check(id, "status", strconv.Itoa(code), "200")
				continue
			}
			for k, w := range want {
				m.check(id, k, fmt.Sprint(got[k]), w)
			}
			for _, k := range []string{"blockTimestampMilliseconds", "blockMinDelayExcess"} {
				if _, present := got[k]; present && b.Block[strings.TrimPrefix(k, "block")] == nil {
					m.check(id, k, "present", "absent (pre-Granite)")
				}
			}
		}
	}
	m.done(len(rec))
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// compareAPIBlockTxs checks every transaction that GET
// /blocks/{n}/transactions and /blocks/{hash}/transactions serve, walked in
// pages of 7 (a block's listing read from its block_transactions row, page
// by page; with the reorg window of one block of testRealData, every block
// but the head's in one read, the block's fields from the row), against
// values computed here from the recorded RPC JSON: the block's transactions
// and their receipts.
func compareAPIBlockTxs(t *testing.T, d dataset, s *stackUp, rec []rpcBlock) {
	m := &mismatches{t: t, where: "API block transaction"}
	compared := 0
	for _, b := range rec {
		num := hexToDec(str(b.Block["number"]))
		receipts := map[string]map[string]any{}
		for _, r := range b.Receipts {
			receipts[str(r["transactionHash"])] = r
		}
		var want []map[string]string
		txs, _ := b.Block["transactions"].([]any)
		for _, x := range txs {
			tx, _ := x.(map[string]any)
			r := receipts[str(tx["hash"])]
			to, call, method := lower(str(tx["to"])), "CONTRACT_CALL", ""
			input := strings.TrimPrefix(str(tx["input"]), "0x")
			switch {
			case to == "":
				to, call = lower(str(r["contractAddress"])), "CONTRACT_CREATION"
			case len(input) < 8:
				call = "NATIVE_TRANSFER"
			default:
				method = "0x" + lower(input[:8])
			}
			price := str(tx["gasPrice"])
			if price == "" {
				price = str(r["effectiveGasPrice"])
			}
			want = append(want, map[string]string{
				"blockNumber": num, "blockHash": str(b.Block["hash"]), "blockTimestamp": hexToDec(str(b.Block["timestamp"])),
				"blockIndex": hexToDec(str(tx["transactionIndex"])), "txHash": str(tx["hash"]), "txStatus": hexToDec(str(r["status"])),
				"txType": orZero(hexToDec(str(tx["type"]))), "gasLimit": hexToDec(str(tx["gas"])), "gasUsed": hexToDec(str(r["gasUsed"])),
				"gasPrice": orZero(hexToDec(price)), "nonce": hexToDec(str(tx["nonce"])), "value": orZero(hexToDec(str(tx["value"]))),
				"from": lower(str(tx["from"])), "to": to, "callType": call, "methodHash": method,
			})
		}
		for _, id := range []string{num, str(b.Block["hash"])} {
			var got []map[string]any
			token := ""
			for page := 0; page <= len(txs)/7+1; page++ {
				url := fmt.Sprintf("%s/v1/chains/%d/blocks/%s/transactions?pageSize=7", s.api, d.chainID, id)
				if token != "" {
					url += "&pageToken=" + token
				}
				var resp struct {
					Transactions  []map[string]any `json:"transactions"`
					NextPageToken string           `json:"nextPageToken"`
				}
				if code := getJSON(t, url, &resp); code != http.StatusOK {
					m.check(id, "status", strconv.Itoa(code), "200")
					break
				}
				got = append(got, resp.Transactions...)
				if token = resp.NextPageToken; token == "" {
					break
				}
			}
			m.check(id, "transactions", strconv.Itoa(len(got)), strconv.Itoa(len(want)))
			for i := range min(len(got), len(want)) {
				g := got[i]
				from, _ := g["from"].(map[string]any)
				to, _ := g["to"].(map[string]any)
				method, _ := g["method"].(map[string]any)
				fields := map[string]string{"from": lower(str(from["address"])), "to": lower(str(to["address"])),
					"callType": str(method["callType"]), "methodHash": str(method["methodHash"])}
				for k, w := range want[i] {
					v, ok := fields[k]
					if !ok {
						v = fmt.Sprint(g[k])
					}
					m.check(id+"/"+want[i]["blockIndex"], k, v, w)
				}
				compared++
			}
		}
	}
	m.done(compared)
}

// comparePagination walks GET /blocks page by page and checks every block
// comes exactly once, newest first.
func comparePagination(t *testing.T, d dataset, s *stackUp, rec []rpcBlock) {
	var seen []string
	token := ""
	for page := 0; page < 1000; page++ {
		url := fmt.Sprintf("%s/v1/chains/%d/blocks?pageSize=37", s.api, d.chainID)
		if token != "" {
			url += "&pageToken=" + token
		}
		var resp struct {
			Blocks        []apiBlock `json:"blocks"`
			NextPageToken string     `json:"nextPageToken"`
		}
		if code := getJSON(t, url, &resp); code != http.StatusOK {
			t.Fatalf("GET %s: %d", url, code)
		}
		for _, b := range resp.Blocks {
			seen = append(seen, fmt.Sprint(b["blockNumber"]))
		}
		if resp.NextPageToken == "" {
			break
		}
		token = resp.NextPageToken
	}
	if len(seen) != len(rec) {
		t.Fatalf("pagination returned %d blocks, want %d", len(seen), len(rec))
	}
	for i := range seen {
		want := hexToDec(str(rec[len(rec)-1-i].Block["number"]))
		if seen[i] != want {
			t.Fatalf("page position %d: block %s, want %s", i, seen[i], want)
		}
	}
}
