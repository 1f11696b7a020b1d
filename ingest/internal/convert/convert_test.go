package convert

import (
	"encoding/json"
	"io"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/moraine-data/moraine/pkg/jsonx"
	"github.com/moraine-data/moraine/schemas/record"
)

// blockJSON builds a minimal eth_getBlockByNumber result around txs.
func blockJSON(extra string, txs ...string) json.RawMessage {
	if extra != "" {
		extra = "," + extra
	}
	return json.RawMessage(`{"number":"0x10","hash":"0x` + strings.Repeat("ab", 32) + `","parentHash":"0x` + strings.Repeat("cd", 32) +
		`","timestamp":"0x5f6b3f32","gasLimit":"0x1000","gasUsed":"0x5208","miner":"0x0100000000000000000000000000000000000000","size":"0x2c1","extraData":"0x"` +
		extra + `,"transactions":[` + strings.Join(txs, ",") + `]}`)
}

const (
	hashA = "0x" + "11" + "00000000000000000000000000000000000000000000000000000000000000"
	hashB = "0x" + "22" + "00000000000000000000000000000000000000000000000000000000000000"
	addr1 = "0x1111111111111111111111111111111111111111"
	addr2 = "0x2222222222222222222222222222222222222222"
)

var blockHash = "0x" + strings.Repeat("ab", 32)

func legacyTx(hash, to string) string {
	return `{"hash":"` + hash + `","transactionIndex":"0x0","type":"0x0","from":"` + addr1 + `","to":` + to +
		`,"value":"0xde0b6b3a7640000","gas":"0x5208","gasPrice":"0x6d6e2edc00","nonce":"0x1","input":"0x"}`
}

func receipt(hash, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{"transactionHash":"` + hash + `","blockHash":"` + blockHash + `","status":"0x1","gasUsed":"0x5208","cumulativeGasUsed":"0x5208","logs":[]` + extra + `}`
}

func TestBlockEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		name    string
		raw     Raw
		traces  bool
		wantErr error
		check   func(t *testing.T, b *record.Block)
	}{
		{
			name:    "null block is not found (retry), never an empty block",
			raw:     Raw{Block: json.RawMessage("null")},
			wantErr: ErrNotFound,
		},
		{
			name:    "null receipts of a block with transactions are incomplete",
			raw:     Raw{Block: blockJSON("", legacyTx(hashA, `"`+addr2+`"`)), Receipts: json.RawMessage("null")},
			wantErr: ErrIncomplete,
		},
		{
			name: "receipts of another block (reorg between the calls) are incomplete",
			raw: Raw{Block: blockJSON("", legacyTx(hashA, `"`+addr2+`"`)),
				Receipts: json.RawMessage("[" + strings.Replace(receipt(hashA, ""), blockHash, hashB, 1) + "]")},
			wantErr: ErrIncomplete,
		},
		{
			name:    "a missing receipt is incomplete",
			raw:     Raw{Block: blockJSON("", legacyTx(hashA, `"`+addr2+`"`), legacyTx(hashB, `"`+addr2+`"`)), Receipts: json.RawMessage("[" + receipt(hashA, "") + "]")},
			wantErr: ErrIncomplete,
		},
		{
			name:    "null traces when traces are on are incomplete",
			raw:     Raw{Block: blockJSON("", legacyTx(hashA, `"`+addr2+`"`)), Receipts: json.RawMessage("[" + receipt(hashA, "") + "]"), Traces: json.RawMessage("null")},
			traces:  true,
			wantErr: ErrIncomplete,
		},
		{
			name: "a trace of a transaction not in the block is incomplete",
			raw: Raw{Block: blockJSON("", legacyTx(hashA, `"`+addr2+`"`)), Receipts: json.RawMessage("[" + receipt(hashA, "") + "]"),
				Traces: json.RawMessage(`[{"txHash":"` + hashB + `","result":{"type":"CALL","from":"` + addr1 + `","gas":"0x0","gasUsed":"0x0"}}]`)},
			traces:  true,
			wantErr: ErrIncomplete,
		},
		{
			name: "empty block: no receipts or traces needed, zero fees",
			raw:  Raw{Block: blockJSON(""), Receipts: json.RawMessage("null"), Traces: json.RawMessage("null")},
			check: func(t *testing.T, b *record.Block) {
				require.Empty(t, b.Transactions)
				require.Equal(t, "0", b.FeesSpent)
				require.Equal(t, "", b.BaseFee, "no baseFeePerGas: absent, not zero")
				require.Equal(t, "", b.BlockGasCost)
				require.Nil(t, b.TimestampMilliseconds)
				require.Nil(t, b.MinDelayExcess)
				require.Equal(t, uint64(0x10), b.Number)
			},
		},
		{
			name: "creation with to null; receipt without effectiveGasPrice falls back to gasPrice",
			raw: Raw{Block: blockJSON("", legacyTx(hashA, "null")),
				Receipts: json.RawMessage("[" + receipt(hashA, `"contractAddress":"`+addr2+`"`) + "]")},
			check: func(t *testing.T, b *record.Block) {
				tx := b.Transactions[0]
				require.Empty(t, tx.To)
				require.Equal(t, mustHex(t, addr2), tx.ContractAddress)
				require.Equal(t, "470000000000", tx.EffectiveGasPrice)
				require.Equal(t, "470000000000", tx.MaxFeePerGas, "legacy: max fee is the gas price")
				require.Equal(t, "470000000000", tx.MaxPriorityFeePerGas)
				require.Equal(t, new(big.Int).Mul(big.NewInt(21000), big.NewInt(470000000000)).String(), b.FeesSpent)
				require.Equal(t, "1000000000000000000", tx.Value)
			},
		},
		{
			name: `creation with to "" (2020 C-Chain)`,
			raw:  Raw{Block: blockJSON("", legacyTx(hashA, `""`)), Receipts: json.RawMessage("[" + receipt(hashA, `"contractAddress":"`+addr2+`","effectiveGasPrice":"0x1"`) + "]")},
			check: func(t *testing.T, b *record.Block) {
				require.Empty(t, b.Transactions[0].To)
				require.Equal(t, "21000", b.FeesSpent, "gasUsed × effectiveGasPrice, not gasPrice")
			},
		},
		{
			name: "receipts matched by hash when out of order; logs without logIndex are numbered",
			raw: Raw{Block: blockJSON("", legacyTx(hashA, `"`+addr2+`"`), strings.Replace(legacyTx(hashB, `"`+addr2+`"`), `"transactionIndex":"0x0"`, `"transactionIndex":"0x1"`, 1)),
				Receipts: json.RawMessage("[" +
					strings.Replace(receipt(hashB, ""), `"logs":[]`, `"logs":[{"address":"`+addr2+`","topics":[],"data":"0x01"}]`, 1) + "," +
					strings.Replace(receipt(hashA, ""), `"logs":[]`, `"logs":[{"address":"`+addr1+`","topics":["`+hashA+`"],"data":"0x"},{"address":"`+addr1+`","topics":[],"data":"0x"}]`, 1) + "]")},
			check: func(t *testing.T, b *record.Block) {
				require.Len(t, b.Transactions[0].Logs, 2)
				require.Equal(t, uint32(0), b.Transactions[0].Logs[0].LogIndex)
				require.Equal(t, uint32(1), b.Transactions[0].Logs[1].LogIndex)
				require.Equal(t, uint32(2), b.Transactions[1].Logs[0].LogIndex)
				require.Equal(t, [][]byte{mustHex(t, hashA)}, b.Transactions[0].Logs[0].Topics)
			},
		},
		{
			name: "a transaction with no trace and one whose tracer failed get no frames",
			raw: Raw{Block: blockJSON("", legacyTx(hashA, `"`+addr2+`"`), legacyTx(hashB, `"`+addr2+`"`)),
				Receipts: json.RawMessage("[" + receipt(hashA, "") + "," + receipt(hashB, "") + "]"),
				Traces:   json.RawMessage(`[{"txHash":"` + hashB + `","error":"execution timeout"}]`)},
			traces: true,
			check: func(t *testing.T, b *record.Block) {
				require.Empty(t, b.Transactions[0].InternalTransactions)
				require.Empty(t, b.Transactions[1].InternalTransactions)
				require.True(t, b.TracesIncluded)
			},
		},
		{
			name: "traces without txHash are matched by position",
			raw: Raw{Block: blockJSON("", legacyTx(hashA, `"`+addr2+`"`)),
				Receipts: json.RawMessage("[" + receipt(hashA, "") + "]"),
				Traces:   json.RawMessage(`[{"result":{"type":"call","from":"` + addr1 + `","to":"` + addr2 + `","gas":"0x5208","gasUsed":"0x5208","input":"0x"}}]`)},
			traces: true,
			check: func(t *testing.T, b *record.Block) {
				it := b.Transactions[0].InternalTransactions
				require.Len(t, it, 1)
				require.Equal(t, "CALL", it[0].Type, "type upper-cased")
				require.Equal(t, "0", it[0].Value, "absent value is 0")
				require.Equal(t, "call_0", it[0].CallIndex)
			},
		},
		{
			name: "Avalanche header extensions and a type-2 transaction with an access list",
			raw: Raw{
				Block: blockJSON(`"baseFeePerGas":"0x5d21dba00","blockGasCost":"0x0","extDataGasUsed":"0x2bde","timestampMilliseconds":"0x1a09173eda1","minDelayExcess":"0x6e6965"`,
					`{"hash":"`+hashA+`","transactionIndex":"0x0","type":"0x2","from":"`+addr1+`","to":"`+addr2+`","value":"0x0","gas":"0x5208","gasPrice":"0x5d21dba01","maxFeePerGas":"0xba43b7400","maxPriorityFeePerGas":"0x1","nonce":"0x0","input":"0x","accessList":[{"address":"`+addr2+`","storageKeys":["`+hashB+`"]}]}`),
				Receipts: json.RawMessage("[" + receipt(hashA, `"effectiveGasPrice":"0x5d21dba01"`) + "]"),
			},
			check: func(t *testing.T, b *record.Block) {
				require.Equal(t, "25000000000", b.BaseFee)
				require.Equal(t, "0", b.BlockGasCost)
				require.Equal(t, "11230", b.ExtDataGasUsed)
				require.Equal(t, uint64(0x1a09173eda1), b.GetTimestampMilliseconds())
				require.Equal(t, uint64(0x6e6965), b.GetMinDelayExcess())
				tx := b.Transactions[0]
				require.Equal(t, "50000000000", tx.MaxFeePerGas)
				require.Equal(t, "1", tx.MaxPriorityFeePerGas)
				require.Equal(t, "25000000001", tx.GasPrice)
				require.Len(t, tx.AccessList, 1)
				require.Equal(t, [][]byte{mustHex(t, hashB)}, tx.AccessList[0].StorageKeys)
				require.Equal(t, new(big.Int).Mul(big.NewInt(21000), big.NewInt(25000000001)).String(), b.FeesSpent)
			},
		},
		{
			name: "invalid UTF-8 in a revert reason becomes U+FFFD (protobuf strings must be UTF-8)",
			raw: Raw{Block: blockJSON("", legacyTx(hashA, `"`+addr2+`"`)),
				Receipts: json.RawMessage("[" + receipt(hashA, "") + "]"),
				Traces:   json.RawMessage("[{\"txHash\":\"" + hashA + "\",\"result\":{\"type\":\"CALL\",\"error\":\"execution reverted\",\"revertReason\":\"bad \x80 byte\"}}]")},
			traces: true,
			check: func(t *testing.T, b *record.Block) {
				it := b.Transactions[0].InternalTransactions[0]
				require.Equal(t, "bad \uFFFD byte", it.RevertReason)
				_, err := proto.Marshal(b)
				require.NoError(t, err)
			},
		},
		{
			name:    "malformed quantity is an error, not a zero",
			raw:     Raw{Block: json.RawMessage(strings.Replace(string(blockJSON("")), `"gasUsed":"0x5208"`, `"gasUsed":"0xzz"`, 1))},
			wantErr: errAny,
		},
		{
			name:    "truncated JSON is an error",
			raw:     Raw{Block: blockJSON("")[:40]},
			wantErr: errAny,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Block(43114, tc.raw, tc.traces)
			if tc.wantErr != nil {
				require.Error(t, err)
				if tc.wantErr != errAny {
					require.ErrorIs(t, err, tc.wantErr)
				}
				return
			}
			require.NoError(t, err)
			tc.check(t, b)
		})
	}
}

var errAny = io.ErrUnexpectedEOF // marker: any error will do

func mustHex(t *testing.T, s string) []byte {
	var a arena
	b, err := a.data("test", []byte(s))
	require.NoError(t, err)
	return b
}

// readRPCTestFile reads a request/response file of erigon's rpc-tests.
func readRPCTestFile(t *testing.T, rel string) json.RawMessage {
	var pairs []struct {
		Response struct {
			Result json.RawMessage `json:"result"`
		} `json:"response"`
	}
	require.NoError(t, json.NewDecoder(openShared(t, rel)).Decode(&pairs))
	require.NotEmpty(t, pairs)
	return pairs[0].Response.Result
}

func TestEthereumBlock18000000(t *testing.T) {
	block := readRPCTestFile(t, "ethereum/erigon_rpc_tests/eth_getBlockByNumber_18000000_fullTx.json.zst")
	receipts := readRPCTestFile(t, "ethereum/erigon_rpc_tests/eth_getBlockReceipts_18000000.json.zst")
	b, err := Block(1, Raw{Block: block, Receipts: receipts}, false)
	require.NoError(t, err)
	require.Equal(t, uint64(18000000), b.Number)
	require.Len(t, b.Transactions, 94)
	require.False(t, b.TracesIncluded)
	require.Equal(t, "", b.BlockGasCost, "not an Avalanche chain")

	// Independent recomputation with encoding/json.
	var rs []struct {
		GasUsed, EffectiveGasPrice, CumulativeGasUsed string
		Logs                                          []json.RawMessage
	}
	require.NoError(t, json.Unmarshal(receipts, &rs))
	var txs struct {
		BaseFeePerGas string
		Transactions  []struct {
			Type, GasPrice, MaxFeePerGas, MaxPriorityFeePerGas string
		}
	}
	require.NoError(t, json.Unmarshal(block, &txs))
	hexBig := func(s string) *big.Int { n, _ := new(big.Int).SetString(s[2:], 16); return n }
	fees := new(big.Int)
	logs := 0
	for i, r := range rs {
		fees.Add(fees, new(big.Int).Mul(hexBig(r.GasUsed), hexBig(r.EffectiveGasPrice)))
		logs += len(r.Logs)
		tx := b.Transactions[i]
		want := txs.Transactions[i]
		if want.Type == "0x2" {
			require.Equal(t, hexBig(want.MaxFeePerGas).String(), tx.MaxFeePerGas)
			require.Equal(t, hexBig(want.MaxPriorityFeePerGas).String(), tx.MaxPriorityFeePerGas)
		} else {
			require.Equal(t, hexBig(want.GasPrice).String(), tx.MaxFeePerGas)
			require.Equal(t, hexBig(want.GasPrice).String(), tx.MaxPriorityFeePerGas)
		}
	}
	require.Equal(t, fees.String(), b.FeesSpent)
	require.Equal(t, hexBig(txs.BaseFeePerGas).String(), b.BaseFee)
	require.Equal(t, hexBig(rs[len(rs)-1].CumulativeGasUsed).Uint64(), b.GasUsed, "block gasUsed is the last cumulative")
	got := 0
	for i, tx := range b.Transactions {
		for _, l := range tx.Logs {
			require.Equal(t, uint32(got), l.LogIndex)
			got++
		}
		require.Equal(t, uint32(i), tx.Index)
	}
	require.Equal(t, 291, logs)
	require.Equal(t, logs, got)
}

func TestPostGraniteHeader(t *testing.T) {
	// The recorded block has no receipts: synthesize successful ones from
	// its transactions, which is enough to check the header fields.
	var raw struct {
		Hash         string `json:"hash"`
		Transactions []struct {
			Hash, Gas, GasPrice string
		} `json:"transactions"`
	}
	f := openShared(t, "avalanche/misc/cchain_block_95033472_post_granite.json")
	block, err := io.ReadAll(f)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(block, &raw))
	var rs []string
	for _, tx := range raw.Transactions {
		rs = append(rs, `{"transactionHash":"`+tx.Hash+`","blockHash":"`+raw.Hash+`","status":"0x1","gasUsed":"`+tx.Gas+`","cumulativeGasUsed":"0x0","effectiveGasPrice":"`+tx.GasPrice+`","logs":[]}`)
	}
	b, err := Block(43114, Raw{Block: block, Receipts: json.RawMessage("[" + strings.Join(rs, ",") + "]")}, false)
	require.NoError(t, err)
	require.Equal(t, uint64(95033472), b.Number)
	require.Equal(t, uint64(0x1a09173eda1), b.GetTimestampMilliseconds())
	require.Equal(t, uint64(0x6e6965), b.GetMinDelayExcess())
	require.Equal(t, "0", b.BlockGasCost)
	require.Equal(t, "11230", b.ExtDataGasUsed)
	require.Equal(t, "70083404", b.BaseFee)
	require.Equal(t, b.Timestamp, b.GetTimestampMilliseconds()/1000, "seconds and milliseconds agree")
	require.Len(t, b.Transactions, 6)
}

func TestCorethFormat(t *testing.T) {
	block, err := io.ReadAll(openShared(t, "avalanche/coreth_ethapi_format/eth_getBlockByHash-hash-latest-1-fullTx.json"))
	require.NoError(t, err)
	h, err := ParseHeader(block)
	require.NoError(t, err)
	require.Equal(t, uint64(9), h.Number)
	require.Equal(t, 1, h.TxCount)

	// The receipts goldens belong to other blocks: their blockHash does not
	// match, which must read as incomplete (retry), not as data.
	receipts, err := io.ReadAll(openShared(t, "avalanche/coreth_ethapi_format/eth_getBlockReceipts-block-with-dynamic-fee-tx.json"))
	require.NoError(t, err)
	_, err = Block(43112, Raw{Block: block, Receipts: receipts}, false)
	require.ErrorIs(t, err, ErrIncomplete)
}

// TestFlattenGethCallTracer flattens go-ethereum's callTracer goldens and
// the Erigon trace of Ethereum block 24,298,763 (1,758 frames, CREATE2,
// errors) and checks the pre-order invariants.
func TestFlattenGethCallTracer(t *testing.T) {
	cases := []string{"create", "deep_calls", "delegatecall", "inner_create_oog_outer_throw", "inner_instafail",
		"inner_revert_reason", "inner_throw_outer_revert", "oog", "revert", "revert_reason", "selfdestruct",
		"simple", "simple_onlytop", "throw"}
	for _, name := range cases {
		t.Run(name, func(t *testing.T) {
			var c struct {
				Result json.RawMessage `json:"result"`
			}
			require.NoError(t, json.NewDecoder(openShared(t, "ethereum/geth_call_tracer/"+name+".json")).Decode(&c))
			frames := flattenOne(t, c.Result)
			checkPreOrder(t, c.Result, frames)
			switch name {
			case "inner_revert_reason":
				require.Equal(t, "This called failed", frames[0].RevertReason)
				require.Equal(t, "execution reverted", frames[0].Error)
			case "selfdestruct":
				require.Equal(t, "SELFDESTRUCT", frames[1].Type)
			case "create":
				require.Equal(t, "CREATE", frames[0].Type)
				require.NotEmpty(t, frames[0].To)
			}
		})
	}
	t.Run("erigon block 24298763", func(t *testing.T) {
		traces := readRPCTestFile(t, "ethereum/erigon_rpc_tests/debug_traceBlockByNumber_24298763_callTracer.json.zst")
		var entries []struct {
			Result json.RawMessage `json:"result"`
		}
		require.NoError(t, json.Unmarshal(traces, &entries))
		require.Len(t, entries, 361)
		total := 0
		types := map[string]int{}
		for _, e := range entries {
			frames := flattenOne(t, e.Result)
			checkPreOrder(t, e.Result, frames)
			total += len(frames)
			for _, f := range frames {
				types[f.Type]++
			}
		}
		require.Equal(t, 1758, total)
		require.Positive(t, types["CREATE2"])
		require.Positive(t, types["CREATE"])
	})
}

func flattenOne(t *testing.T, result json.RawMessage) []*record.InternalTransaction {
	d := &decoder{}
	var out []*record.InternalTransaction
	require.NoError(t, d.readFrame(jsonx.NewReader(result), &out, []byte("call_0"), 0))
	require.NoError(t, d.err)
	return out
}

// checkPreOrder compares the flattened frames with a pre-order walk of the
// same tree decoded by encoding/json.
func checkPreOrder(t *testing.T, result json.RawMessage, frames []*record.InternalTransaction) {
	type frame struct {
		Type, From, To, Error, RevertReason string
		Calls                               []json.RawMessage
	}
	var want []string
	var walk func(raw json.RawMessage, path string, depth int)
	walk = func(raw json.RawMessage, path string, depth int) {
		var f frame
		require.NoError(t, json.Unmarshal(raw, &f))
		want = append(want, path+"|"+strings.ToUpper(f.Type)+"|"+f.Error+"|"+strings.Repeat(">", depth))
		for i, c := range f.Calls {
			walk(c, path+"_"+itoa(i), depth+1)
		}
	}
	walk(result, "call_0", 0)
	var got []string
	for i, f := range frames {
		require.Equal(t, uint32(i), f.TracePosition)
		got = append(got, f.CallIndex+"|"+f.Type+"|"+f.Error+"|"+strings.Repeat(">", int(f.Depth)))
	}
	require.Equal(t, want, got)
}

func itoa(i int) string { return big.NewInt(int64(i)).String() }
