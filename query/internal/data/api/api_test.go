package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/server"
	"github.com/moraine-data/moraine/query/internal/server/pagetoken"
)

const (
	cChain   = 43114
	fuji     = 43113
	devnet   = 43112
	cChainBC = "2q9e4r6Mu3U68nU1fYjgbR6JvwrRx36CohpAX5UQxse55x1Q5"
	fujiBC   = "yH8D7ThNJkxmtkuv2jgBa4P1Rn3Qpr4pPr7QYNfcdoS6k6HWp"
)

const chainFile = `{"chains": [
 {"evmChainId": "43114", "blockchainId": "` + cChainBC + `", "name": "Avalanche (C-Chain)", "description": "C-Chain",
  "network": "mainnet", "vmName": "EVM", "rpcUrls": ["http://10.0.0.1:9650/ext/bc/C/rpc"], "publicRpcUrl": "https://api.avax.network/ext/bc/C/rpc",
  "wsUrl": "ws://10.0.0.1:9650/ext/bc/C/ws", "explorerUrl": "https://subnets.avax.network/c-chain", "chainLogoUri": "https://example.org/c.svg",
  "subnetId": "11111111111111111111111111111111LpoYY", "vmId": "mgj786NP7uDwBCcq6YwThhaN8FLyybkCa4zBWTQbNgmK6k9A6",
  "multicallAddress": "0xcA11bde05977b3631167028862bE2a173976CA11",
  "networkToken": {"name": "Avalanche", "symbol": "AVAX", "decimals": 18, "logoUri": "https://example.org/avax.svg"},
  "webhooks": true, "features": ["nftIndexing"]},
 {"evmChainId": "43113", "blockchainId": "` + fujiBC + `", "name": "Avalanche Fuji", "network": "fuji",
  "rpcUrls": ["http://10.0.0.2:9650/ext/bc/C/rpc"], "networkToken": {"name": "Avalanche", "symbol": "AVAX", "decimals": 18}},
 {"evmChainId": "43112", "name": "Dev", "network": "devnet", "rpcUrls": ["http://127.0.0.1:8545"],
  "networkToken": {"name": "Avalanche", "symbol": "AVAX", "decimals": 18}}
]}`

type env struct {
	t         *testing.T
	router    *server.Engine
	routes    []server.Route
	store     *fakeStore
	history   *fakeHistory
	contracts *fakeContracts
	reg       *prometheus.Registry
	tokens    *pagetoken.Codec
	now       time.Time
}

func hashOf(chain, n uint64, salt string) store.Hash {
	var h store.Hash
	copy(h[:], fmt.Sprintf("%d/%d/%s", chain, n, salt))
	h[31] = byte(n)
	return h
}

// block returns a block of chain at number n, ts seconds.
func block(chain, n, ts uint64) store.Block {
	return store.Block{
		ChainID: chain, Number: n, Hash: hashOf(chain, n, ""), ParentHash: hashOf(chain, n-1, ""),
		Timestamp: ts, BaseFee: "25000000000", GasUsed: 21000, GasLimit: 15000000, GasCost: "0",
		FeesSpent: "525000000000000", TxCount: 1, CumulativeTransactions: 1000 + n,
	}
}

func newEnv(t *testing.T, mw ...gin.HandlerFunc) *env {
	t.Helper()
	cc, err := chains.Parse([]byte(chainFile))
	require.NoError(t, err)
	e := &env{t: t, store: newFakeStore(), history: newFakeHistory(), contracts: newFakeContracts(), reg: prometheus.NewRegistry(),
		now: time.Unix(1_800_000_000, 0)}
	e.tokens, err = pagetoken.NewCodec(bytes.Repeat([]byte("k"), 32), time.Hour, func() time.Time { return e.now })
	require.NoError(t, err)
	e.router, e.routes, err = newRouter(Deps{
		Logger: testenv.Logger(t), Chains: cc, Store: e.store, History: e.history, Contracts: e.contracts, Tokens: e.tokens,
		Config: DefaultConfig(), Now: func() time.Time { return e.now },
	}, e.reg, mw...)
	require.NoError(t, err)
	return e
}

// newRouter serves the data API's routes alone, as the query service
// serves them among the others.
func newRouter(d Deps, reg prometheus.Registerer, mw ...gin.HandlerFunc) (*server.Engine, []server.Route, error) {
	if d.Reindex == nil {
		d.Reindex = &fakeReindexer{}
	}
	a, err := New(d)
	if err != nil {
		return nil, nil, err
	}
	eng, err := server.New(a.Routes(), server.Deps{Logger: d.Logger, Registerer: reg, Middleware: mw})
	return eng, a.Routes(), err
}

// seed gives the C-Chain blocks 1..30 (2 s apart) and Fuji blocks 1..20
// (3 s apart, interleaving in time), with heads; devnet has nothing.
func (e *env) seed() {
	for n := uint64(1); n <= 30; n++ {
		e.store.addBlocks(block(cChain, n, 1000+2*n))
	}
	for n := uint64(1); n <= 20; n++ {
		e.store.addBlocks(block(fuji, n, 1000+3*n))
	}
	e.store.setHead(store.Head{ChainID: cChain, Number: 30, AdvancedAt: e.now})
	e.store.setHead(store.Head{ChainID: fuji, Number: 20, AdvancedAt: e.now})
	e.store.heads[devnet] = store.Head{ChainID: devnet, AdvancedAt: e.now}
}

func (e *env) do(method, path string) (int, []byte) {
	e.t.Helper()
	req := httptest.NewRequest(method, path, nil)
	w := httptest.NewRecorder()
	e.router.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		require.Equal(e.t, "application/json; charset=utf-8", w.Header().Get("Content-Type"), "%s %s", method, path)
	}
	return w.Code, w.Body.Bytes()
}

func (e *env) get(path string, into any) int {
	e.t.Helper()
	code, body := e.do(http.MethodGet, path)
	if into != nil {
		require.NoError(e.t, json.Unmarshal(body, into), "%s", body)
	}
	return code
}

// keys returns the top-level keys of a JSON object in order.
func keys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok)
	var out []string
	for dec.More() {
		k, err := dec.Token()
		require.NoError(t, err)
		out = append(out, k.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return out
}

type errBody struct {
	Message    any    `json:"message"`
	StatusCode int    `json:"statusCode"`
	Error      string `json:"error"`
}

// requireError checks status, body shape and message.
func (e *env) requireError(path string, status int, message any) {
	e.t.Helper()
	code, raw := e.do(http.MethodGet, path)
	require.Equal(e.t, status, code, "%s: %s", path, raw)
	require.Equal(e.t, []string{"message", "statusCode", "error"}, keys(e.t, raw), "%s", raw)
	var b errBody
	require.NoError(e.t, json.Unmarshal(raw, &b))
	require.Equal(e.t, status, b.StatusCode)
	require.Equal(e.t, http.StatusText(status), b.Error)
	if msgs, ok := message.([]string); ok {
		var got []string
		for _, m := range b.Message.([]any) {
			got = append(got, m.(string))
		}
		require.Equal(e.t, msgs, got, "%s", path)
	} else if message != nil {
		require.Equal(e.t, message, b.Message, "%s", path)
	}
}

func TestListChains(t *testing.T) {
	e := newEnv(t)
	e.seed()
	code, raw := e.do(http.MethodGet, "/v1/chains")
	require.Equal(t, http.StatusOK, code)
	var resp struct{ Chains []json.RawMessage }
	require.NoError(t, json.Unmarshal(raw, &resp))
	require.Len(t, resp.Chains, 3)
	// Full item: every field, spec order, wsUrl and internal rpcUrls not
	// published.
	require.JSONEq(t, `{"chainId":"43114","status":"OK","chainName":"Avalanche (C-Chain)","description":"C-Chain",
		"platformChainId":"`+cChainBC+`","subnetId":"11111111111111111111111111111111LpoYY",
		"vmId":"mgj786NP7uDwBCcq6YwThhaN8FLyybkCa4zBWTQbNgmK6k9A6","vmName":"EVM",
		"explorerUrl":"https://subnets.avax.network/c-chain","rpcUrl":"https://api.avax.network/ext/bc/C/rpc",
		"isTestnet":false,"utilityAddresses":{"multicall":"0xcA11bde05977b3631167028862bE2a173976CA11"},
		"networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18,"logoUri":"https://example.org/avax.svg"},
		"chainLogoUri":"https://example.org/c.svg","enabledFeatures":["nftIndexing","webhooks"]}`, string(resp.Chains[0]))
	require.Equal(t, []string{"chainId", "status", "chainName", "description", "platformChainId", "subnetId", "vmId",
		"vmName", "explorerUrl", "rpcUrl", "isTestnet", "utilityAddresses", "networkToken", "chainLogoUri", "enabledFeatures"},
		keys(t, resp.Chains[0]))
	// Minimal item: optional fields omitted, required ones present.
	require.JSONEq(t, `{"chainId":"43112","status":"OK","chainName":"Dev","description":"","vmName":"EVM","rpcUrl":"",
		"isTestnet":true,"networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18}}`, string(resp.Chains[2]))
	require.NotContains(t, string(raw), "null")
	require.NotContains(t, string(raw), "10.0.0.1")

	ids := func(q string) []string {
		var r listChainsResponse
		require.Equal(t, http.StatusOK, e.get("/v1/chains"+q, &r))
		out := []string{}
		for _, c := range r.Chains {
			out = append(out, c.ChainID)
		}
		return out
	}
	require.Equal(t, []string{"43114"}, ids("?network=mainnet"))
	require.Equal(t, []string{"43113", "43112"}, ids("?network=fuji"))
	require.Equal(t, []string{"43113", "43112"}, ids("?network=testnet"))
	require.Equal(t, []string{"43114"}, ids("?feature=webhooks"))
	require.Equal(t, []string{"43114"}, ids("?feature=nftIndexing&network=mainnet"))
	require.Equal(t, []string{}, ids("?feature=teleporter"))

	e.requireError("/v1/chains?network=devnet", 400, []string{"network must be one of the following values: mainnet, fuji, testnet"})
	e.requireError("/v1/chains?network=x&feature=y", 400, []string{
		"network must be one of the following values: mainnet, fuji, testnet",
		"feature must be one of the following values: nftIndexing, webhooks, teleporter"})
}

func TestChainStatus(t *testing.T) {
	e := newEnv(t)
	e.seed()
	status := func(id string) string {
		var c chainInfo
		require.Equal(t, http.StatusOK, e.get("/v1/chains/"+id, &c))
		return c.Status
	}
	require.Equal(t, "OK", status("43114"))
	// The head has not advanced for longer than --chains.stale-after.
	e.now = e.now.Add(11 * time.Minute)
	require.Equal(t, "UNAVAILABLE", status("43114"))
	e.store.setHead(store.Head{ChainID: cChain, Number: 31, AdvancedAt: e.now})
	require.Equal(t, "OK", status("43114"))
	// ClickHouse down: the list is still served, every chain UNAVAILABLE.
	e.store.err = fmt.Errorf("%w: refused", store.ErrUnavailable)
	var r listChainsResponse
	require.Equal(t, http.StatusOK, e.get("/v1/chains", &r))
	for _, c := range r.Chains {
		require.Equal(t, "UNAVAILABLE", c.Status)
	}
}

func TestGetChain(t *testing.T) {
	e := newEnv(t)
	e.seed()
	var byID, byBC chainInfo
	require.Equal(t, http.StatusOK, e.get("/v1/chains/43114", &byID))
	require.Equal(t, http.StatusOK, e.get("/v1/chains/"+cChainBC, &byBC))
	require.Equal(t, byID, byBC)
	require.Equal(t, "43114", byBC.ChainID)

	e.requireError("/v1/chains/999", 404, "Chain 999 not found")
	e.requireError("/v1/chains/"+strings.Repeat("z", 45), 404, "Chain "+strings.Repeat("z", 45)+" not found")
	e.requireError("/v1/chains/c-chain!", 400, []string{"chainId must be a decimal EVM chain id or a base58 blockchain id"})
	e.requireError("/v1/chains/0x1", 400, []string{"chainId must be a decimal EVM chain id or a base58 blockchain id"})
}

func TestListChainBlocks(t *testing.T) {
	e := newEnv(t)
	e.seed()
	code, raw := e.do(http.MethodGet, "/v1/chains/43114/blocks")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []string{"nextPageToken", "blocks"}, keys(t, raw))
	var page listBlocksResponse
	require.NoError(t, json.Unmarshal(raw, &page))
	require.Len(t, page.Blocks, 10) // default pageSize
	require.Equal(t, "30", page.Blocks[0].BlockNumber)
	require.Equal(t, "21", page.Blocks[9].BlockNumber)

	// Page through everything with the blockchain id form: descending, no
	// gaps, no repeats, no token on the last page.
	var got []string
	path := "/v1/chains/" + cChainBC + "/blocks?pageSize=7"
	pages := 0
	for {
		var p listBlocksResponse
		require.Equal(t, http.StatusOK, e.get(path, &p))
		pages++
		for _, b := range p.Blocks {
			got = append(got, b.BlockNumber)
			require.Equal(t, "43114", b.ChainID)
		}
		if p.NextPageToken == "" {
			break
		}
		path = "/v1/chains/" + cChainBC + "/blocks?pageSize=7&pageToken=" + p.NextPageToken
	}
	require.Equal(t, 5, pages)
	require.Len(t, got, 30)
	for i, n := range got {
		require.Equal(t, fmt.Sprint(30-i), n)
	}
	// Exactly a full last page: no token.
	var exact listBlocksResponse
	require.Equal(t, http.StatusOK, e.get("/v1/chains/43114/blocks?pageSize=30", &exact))
	require.Len(t, exact.Blocks, 30)
	require.Empty(t, exact.NextPageToken)
	_, raw = e.do(http.MethodGet, "/v1/chains/43114/blocks?pageSize=30")
	require.NotContains(t, string(raw), "nextPageToken")

	// A configured chain with no indexed head: an empty list.
	code, raw = e.do(http.MethodGet, "/v1/chains/43112/blocks")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"blocks":[]}`, string(raw))

	// Validation, in class-validator's wording.
	for _, tc := range []struct {
		name, q string
		msgs    []string
	}{
		{"too big", "pageSize=101", []string{"pageSize must not be greater than 100"}},
		{"zero", "pageSize=0", []string{"pageSize must not be less than 1"}},
		{"negative", "pageSize=-5", []string{"pageSize must not be less than 1"}},
		{"fraction", "pageSize=1.5", []string{"pageSize must be an integer number"}},
		{"empty is 0 like Number('')", "pageSize=", []string{"pageSize must not be less than 1"}},
		{"not a number", "pageSize=ten", []string{"pageSize must not be greater than 100", "pageSize must not be less than 1", "pageSize must be an integer number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.requireError("/v1/chains/43114/blocks?"+tc.q, 400, tc.msgs)
		})
	}
	// Other accepted numeric forms, as Number() reads them.
	require.Equal(t, http.StatusOK, e.get("/v1/chains/43114/blocks?pageSize=1e1", nil))
	require.Equal(t, http.StatusOK, e.get("/v1/chains/43114/blocks?pageSize=%205", nil))

	// Tokens: garbage, tampered, from another chain, of another kind.
	badTok := []string{"pageToken must be a page token returned by the previous page of this list"}
	e.requireError("/v1/chains/43114/blocks?pageToken=garbage", 400, badTok)
	tampered := []byte(page.NextPageToken)
	tampered[3] ^= 1
	e.requireError("/v1/chains/43114/blocks?pageToken="+string(tampered), 400, badTok)
	e.requireError("/v1/chains/43113/blocks?pageToken="+page.NextPageToken, 400, badTok)
	other := e.tokens.Encode(pagetoken.Token{Kind: pagetoken.KindAllBlocks})
	e.requireError("/v1/chains/43114/blocks?pageToken="+other, 400, badTok)
	// Expired (TTL 1h in this test).
	e.now = e.now.Add(2 * time.Hour)
	e.requireError("/v1/chains/43114/blocks?pageToken="+page.NextPageToken, 400, badTok)
	e.now = e.now.Add(-2 * time.Hour)

	// Chains: unknown 404, garbage 400; validation comes first.
	e.requireError("/v1/chains/999/blocks", 404, "Chain 999 not found")
	e.requireError("/v1/chains/!!/blocks?pageSize=0", 400, []string{
		"chainId must be a decimal EVM chain id or a base58 blockchain id", "pageSize must not be less than 1"})

	// ClickHouse down: 503.
	e.store.err = fmt.Errorf("%w: refused", store.ErrUnavailable)
	e.requireError("/v1/chains/43114/blocks", 503, "Chain data is temporarily unavailable")
	e.requireError("/v1/chains/43114/blocks?pageToken="+page.NextPageToken, 503, nil)
	// Another store failure: 500 with the generic message.
	e.store.err = errors.New("store: blocks_range: code: 47, message: unknown identifier")
	e.requireError("/v1/chains/43114/blocks", 500, "Internal server error")
}

func TestGetBlock(t *testing.T) {
	e := newEnv(t)
	e.seed()
	ms, q := uint64(1_700_000_000_123), uint64(7477290)
	g := block(cChain, 40, 2000)
	g.TimestampMs, g.MinDelayExcess = &ms, &q
	g.BaseFee, g.GasCost, g.FeesSpent = "", "", ""
	e.store.addBlocks(g)

	// A pre-Granite block: the Granite fields are omitted, the rest in spec order.
	code, raw := e.do(http.MethodGet, "/v1/chains/43114/blocks/5")
	require.Equal(t, http.StatusOK, code)
	b := block(cChain, 5, 1010)
	require.Equal(t, []string{"chainId", "blockNumber", "blockTimestamp", "blockHash", "txCount", "baseFee", "gasUsed",
		"gasLimit", "gasCost", "parentHash", "feesSpent", "cumulativeTransactions"}, keys(t, raw))
	require.JSONEq(t, fmt.Sprintf(`{"chainId":"43114","blockNumber":"5","blockTimestamp":1010,"blockHash":"%s","txCount":1,
		"baseFee":"25000000000","gasUsed":"21000","gasLimit":"15000000","gasCost":"0","parentHash":"%s",
		"feesSpent":"525000000000000","cumulativeTransactions":"1005"}`, b.Hash.Hex(), b.ParentHash.Hex()), string(raw))

	// Granite fields present; empty fee columns become "0".
	code, raw = e.do(http.MethodGet, "/v1/chains/43114/blocks/40")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []string{"chainId", "blockNumber", "blockTimestamp", "blockTimestampMilliseconds", "blockMinDelayExcess",
		"blockHash", "txCount", "baseFee", "gasUsed", "gasLimit", "gasCost", "parentHash", "feesSpent", "cumulativeTransactions"},
		keys(t, raw))
	var got map[string]any
	require.NoError(t, json.Unmarshal(raw, &got))
	require.Equal(t, float64(ms), got["blockTimestampMilliseconds"])
	require.Equal(t, float64(q), got["blockMinDelayExcess"])
	require.Equal(t, "0", got["baseFee"])
	require.Equal(t, "0", got["gasCost"])
	require.Equal(t, "0", got["feesSpent"])

	// By hash, in any case, and by blockchain id.
	var byHash evmBlock
	require.Equal(t, http.StatusOK, e.get("/v1/chains/"+cChainBC+"/blocks/0X"+strings.ToUpper(b.Hash.Hex()[2:]), &byHash))
	require.Equal(t, "5", byHash.BlockNumber)
	require.Equal(t, b.Hash.Hex(), byHash.BlockHash)

	bad := []string{"blockId must be a decimal block number or a 0x-prefixed 32-byte block hash"}
	for _, id := range []string{"0x1a", "abc", "-1", "1.0", "0x" + strings.Repeat("a", 63), "0x" + strings.Repeat("g", 64), "latest"} {
		e.requireError("/v1/chains/43114/blocks/"+id, 400, bad)
	}
	e.requireError("/v1/chains/43114/blocks/31", 404, "Block 31 not found on chain 43114")
	// Beyond 2^64-1: a 400, not a 404 echoing a clamped number (issue 16).
	tooBig := []string{"blockId must be a block number no greater than 18446744073709551615 or a 0x-prefixed 32-byte block hash"}
	e.requireError("/v1/chains/43114/blocks/99999999999999999999999", 400, tooBig)
	e.requireError("/v1/chains/43114/blocks/18446744073709551616", 400, tooBig)
	e.requireError("/v1/chains/43114/blocks/18446744073709551616/transactions", 400, tooBig)
	e.requireError("/v1/chains/43114/blocks/18446744073709551615", 404, "Block 18446744073709551615 not found on chain 43114")
	e.requireError("/v1/chains/43114/blocks/0x"+strings.Repeat("ab", 32), 404, "Block 0x"+strings.Repeat("ab", 32)+" not found on chain 43114")
	e.requireError("/v1/chains/43113/blocks/"+b.Hash.Hex(), 404, nil) // a hash of another chain
	// A hash whose block a reorg replaced is not found, though block_hashes
	// knows its number.
	orphan := hashOf(cChain, 5, "orphan")
	e.store.orphans = map[store.Hash]uint64{orphan: 5}
	e.requireError("/v1/chains/43114/blocks/"+orphan.Hex(), 404, "Block "+orphan.Hex()+" not found on chain 43114")
	e.requireError("/v1/chains/999/blocks/1", 404, "Chain 999 not found")
	e.requireError("/v1/chains/!/blocks/x", 400, []string{"chainId must be a decimal EVM chain id or a base58 blockchain id", bad[0]})
	e.store.err = fmt.Errorf("%w: refused", store.ErrUnavailable)
	e.requireError("/v1/chains/43114/blocks/5", 503, nil)
}

// TestBlockTransactions runs with the store answering by a block's header
// and then its listing, and with it answering a settled block by number in
// one read (SettledBlockTransactions): the responses are the same.
func TestBlockTransactions(t *testing.T) {
	for _, settled := range []bool{false, true} {
		t.Run(fmt.Sprintf("settled=%v", settled), func(t *testing.T) { testBlockTransactions(t, settled) })
	}
}

func testBlockTransactions(t *testing.T, settled bool) {
	e := newEnv(t)
	e.seed()
	e.store.settled = settled
	ms := uint64(1_700_000_000_123)
	b := block(cChain, 50, 3000)
	b.TimestampMs = &ms
	e.store.addBlocks(b)
	from := mustHex("5aaeb6053f3e94c9b9a09f33669435e7ef1beaed")
	to := mustHex("fb6916095ca1df60bb79ce92ce3ea74c37c5d359")
	created := mustHex("dbf03b407c01e7cd3cbea99509d93f8dddc8c6fb")
	e.store.txs[b.Hash] = []store.Tx{
		{BlockIndex: 0, Hash: hashOf(1, 0, "tx"), Type: 0, From: from, To: to, Value: "1000000000000000000",
			Gas: 21000, GasPrice: "25000000000", Nonce: 7, Status: 1, GasUsed: 21000},
		{BlockIndex: 1, Hash: hashOf(1, 1, "tx"), Type: 2, From: from, To: to, Value: "",
			Gas: 60000, GasPrice: "", EffectiveGasPrice: "26000000000", Nonce: 8, Selector: []byte{0xa9, 0x05, 0x9c, 0xbb}, InputLen: 68, Status: 0, GasUsed: 50000},
		{BlockIndex: 2, Hash: hashOf(1, 2, "tx"), Type: 2, From: from, ContractAddress: created, Value: "0",
			Gas: 900000, GasPrice: "25000000000", Nonce: 9, Selector: []byte{0x60, 0x80, 0x60, 0x40}, InputLen: 3000, Status: 1, GasUsed: 800000},
	}

	code, raw := e.do(http.MethodGet, "/v1/chains/43114/blocks/50/transactions")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, []string{"transactions"}, keys(t, raw)) // pageSize 0: all, no token
	var resp struct{ Transactions []json.RawMessage }
	require.NoError(t, json.Unmarshal(raw, &resp))
	require.Len(t, resp.Transactions, 3)
	require.Equal(t, []string{"blockNumber", "blockTimestamp", "blockTimestampMilliseconds", "blockHash", "chainId",
		"blockIndex", "txHash", "txStatus", "txType", "gasLimit", "gasUsed", "gasPrice", "nonce", "from", "to", "method", "value"},
		keys(t, resp.Transactions[0]))
	require.JSONEq(t, fmt.Sprintf(`{"blockNumber":"50","blockTimestamp":3000,"blockTimestampMilliseconds":1700000000123,
		"blockHash":"%s","chainId":"43114","blockIndex":0,"txHash":"%s","txStatus":"1","txType":0,"gasLimit":"21000",
		"gasUsed":"21000","gasPrice":"25000000000","nonce":"7",
		"from":{"address":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"},
		"to":{"address":"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"},
		"method":{"callType":"NATIVE_TRANSFER","methodHash":"","methodName":"Native Transfer"},
		"value":"1000000000000000000"}`, b.Hash.Hex(), hashOf(1, 0, "tx").Hex()), string(resp.Transactions[0]))
	var call, create nativeTransaction
	require.NoError(t, json.Unmarshal(resp.Transactions[1], &call))
	require.Equal(t, method{CallType: "CONTRACT_CALL", MethodHash: "0xa9059cbb"}, *call.Method)
	require.NotContains(t, string(resp.Transactions[1]), "methodName")
	require.Equal(t, "0", call.TxStatus)
	require.Equal(t, "26000000000", call.GasPrice) // falls back to the effective price
	require.Equal(t, "0", call.Value)
	require.NoError(t, json.Unmarshal(resp.Transactions[2], &create))
	require.Equal(t, method{CallType: "CONTRACT_CREATION", MethodHash: "", MethodName: "Contract Created"}, *create.Method)
	require.Equal(t, "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB", create.To.Address)

	// Paging by index, by hash id; a token is bound to its block.
	var p1, p2 listTransactionsResponse
	require.Equal(t, http.StatusOK, e.get("/v1/chains/43114/blocks/"+b.Hash.Hex()+"/transactions?pageSize=2", &p1))
	require.Len(t, p1.Transactions, 2)
	require.NotEmpty(t, p1.NextPageToken)
	require.Equal(t, http.StatusOK, e.get("/v1/chains/43114/blocks/50/transactions?pageSize=2&pageToken="+p1.NextPageToken, &p2))
	require.Len(t, p2.Transactions, 1)
	require.Equal(t, uint32(2), p2.Transactions[0].BlockIndex)
	require.Empty(t, p2.NextPageToken)
	badTok := []string{"pageToken must be a page token returned by the previous page of this list"}
	e.requireError("/v1/chains/43114/blocks/5/transactions?pageSize=2&pageToken="+p1.NextPageToken, 400, badTok)
	e.requireError("/v1/chains/43113/blocks/50/transactions?pageSize=2&pageToken="+p1.NextPageToken, 400, badTok)

	// A block without transactions: an empty list.
	code, raw = e.do(http.MethodGet, "/v1/chains/43114/blocks/3/transactions")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"transactions":[]}`, string(raw))

	e.requireError("/v1/chains/43114/blocks/50/transactions?pageSize=101", 400, []string{"pageSize must not be greater than 100"})
	e.requireError("/v1/chains/43114/blocks/50/transactions?pageSize=-1", 400, []string{"pageSize must not be less than 0"})
	e.requireError("/v1/chains/43114/blocks/5x/transactions", 400, []string{"blockId must be a decimal block number or a 0x-prefixed 32-byte block hash"})
	e.requireError("/v1/chains/43114/blocks/77/transactions", 404, "Block 77 not found on chain 43114")
	e.requireError("/v1/chains/1/blocks/77/transactions", 404, "Chain 1 not found")
	// A hash whose block a reorg replaced is not found, though block_hashes
	// knows its number.
	orphan := hashOf(cChain, 50, "orphan")
	e.store.orphans = map[store.Hash]uint64{orphan: 50}
	e.requireError("/v1/chains/43114/blocks/"+orphan.Hex()+"/transactions", 404, "Block "+orphan.Hex()+" not found on chain 43114")
	if settled {
		require.Equal(t, 6, e.store.settledReads) // the blocks with transactions, by number or hash
	} else {
		require.Zero(t, e.store.settledReads)
	}
}

func mustHex(s string) []byte {
	var out []byte
	for i := 0; i < len(s); i += 2 {
		var b byte
		fmt.Sscanf(s[i:i+2], "%02x", &b)
		out = append(out, b)
	}
	return out
}

func TestAllBlocks(t *testing.T) {
	e := newEnv(t)
	e.seed()
	for _, base := range []string{"/v1/blocks", "/v1/chains/allBlocks"} {
		t.Run(base, func(t *testing.T) {
			// Page through the merge: timestamps never increase, each
			// chain's blocks come once each in descending order.
			var all []evmBlock
			path := base + "?pageSize=7"
			for {
				var p listBlocksResponse
				require.Equal(t, http.StatusOK, e.get(path, &p))
				all = append(all, p.Blocks...)
				if p.NextPageToken == "" {
					break
				}
				path = base + "?pageSize=7&pageToken=" + p.NextPageToken
			}
			require.Len(t, all, 50)
			seen := map[string]bool{}
			last := map[string]int{"43114": 31, "43113": 21}
			for i, b := range all {
				if i > 0 {
					require.LessOrEqual(t, b.BlockTimestamp, all[i-1].BlockTimestamp)
				}
				key := b.ChainID + "/" + b.BlockNumber
				require.False(t, seen[key], "repeated %s", key)
				seen[key] = true
				var n int
				fmt.Sscan(b.BlockNumber, &n)
				require.Equal(t, last[b.ChainID]-1, n, "chain %s", b.ChainID)
				last[b.ChainID] = n
			}
			// Equal timestamps: lower chain id first.
			var p listBlocksResponse
			require.Equal(t, http.StatusOK, e.get(base+"?pageSize=3", &p))
			require.Equal(t, []string{"43113/20", "43114/30", "43114/29"}, []string{
				p.Blocks[0].ChainID + "/" + p.Blocks[0].BlockNumber, p.Blocks[1].ChainID + "/" + p.Blocks[1].BlockNumber,
				p.Blocks[2].ChainID + "/" + p.Blocks[2].BlockNumber})
		})
	}
	var p listBlocksResponse
	require.Equal(t, http.StatusOK, e.get("/v1/blocks?network=mainnet&pageSize=100", &p))
	require.Len(t, p.Blocks, 30)
	require.Empty(t, p.NextPageToken)
	require.Equal(t, http.StatusOK, e.get("/v1/blocks?network=fuji&pageSize=5", &p))
	for _, b := range p.Blocks {
		require.Equal(t, "43113", b.ChainID)
	}
	// The token is bound to its network filter and kind.
	badTok := []string{"pageToken must be a page token returned by the previous page of this list"}
	e.requireError("/v1/blocks?network=mainnet&pageToken="+p.NextPageToken, 400, badTok)
	require.Equal(t, http.StatusOK, e.get("/v1/blocks?network=testnet&pageSize=5&pageToken="+p.NextPageToken, nil))
	chainTok := e.tokens.Encode(pagetoken.Token{Kind: pagetoken.KindChainBlocks, ChainID: cChain, Cursor: 3})
	e.requireError("/v1/blocks?pageToken="+chainTok, 400, badTok)
	unknown := e.tokens.Encode(pagetoken.Token{Kind: pagetoken.KindAllBlocks, Positions: []pagetoken.Position{{ChainID: 5, Cursor: 1}}})
	e.requireError("/v1/blocks?pageToken="+unknown, 400, badTok)

	e.requireError("/v1/blocks?pageSize=0&network=x", 400, []string{"pageSize must not be less than 1",
		"network must be one of the following values: mainnet, fuji, testnet"})
	e.store.err = fmt.Errorf("%w: refused", store.ErrUnavailable)
	e.requireError("/v1/blocks", 503, nil)
}
