package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/query/internal/data/store"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// Addresses of the history tests: alice sends to bob through router,
// usdToken is an ERC-20, nftToken an ERC-721, itemsToken an ERC-1155.
var (
	alice      = mkAddr(0xa1)
	bob        = mkAddr(0xb0)
	router     = mkAddr(0x20)
	usdToken   = mkAddr(0x10)
	nftToken   = mkAddr(0x11)
	itemsToken = mkAddr(0x12)
	created    = mkAddr(0xc0)
)

func mkAddr(n byte) store.Address {
	var a store.Address
	a[0], a[19] = 0x42, n
	return a
}

func hexAddr(a store.Address) string { return evm.Address(a).Hex() }

func txHashOf(n uint64) store.Hash { return hashOf(99, n, "tx") }

// seedHistory gives alice, on the C-Chain (blocks 1..30 of seed), a
// transaction in every block from 5 to 24 (to the router; index 0), with an
// ERC-20 transfer alice -> bob and a reverted internal call router -> bob in
// every even block; and a transfer of NFT #7 and of items (two ids) in block
// 25, bob's deployment of a contract in block 26.
func (e *env) seedHistory() {
	e.seed()
	h := e.history
	for n := uint64(5); n <= 24; n++ {
		b := block(cChain, n, 1000+2*n)
		tx := store.IndexRow{Seek: store.Seek{Block: n}, Block: b, TxHash: txHashOf(n), Roles: schema.RoleSender, TxType: 2,
			From: alice[:], To: router[:], Value: "5", Gas: 90000, GasPrice: "25000000000", Nonce: n, Selector: []byte{0xa9, 0x05, 0x9c, 0xbb},
			Status: 1, GasUsed: 50000}
		if n%2 == 0 {
			xfer := store.Transfer{Kind: uint8(evm.ERC20), Token: usdToken[:], From: alice[:], To: bob[:], LogIndex: 3, Value: "1000000"}
			in := store.Internal{Type: "CALL", From: router[:], To: bob[:], Value: "5", Gas: 30000, GasUsed: 21000, Reverted: true}
			// alice's row carries her transfer; the router's call to bob is
			// not hers.
			tx.Roles |= schema.RoleTransferParty
			tx.Transfers = []store.Transfer{xfer}
			row := store.IndexRow{Seek: store.Seek{Block: n, Position: 3}, Block: b, TxHash: txHashOf(n), Transfer: xfer}
			h.add(cChain, alice, schema.ListERC20, row)
			h.add(cChain, bob, schema.ListERC20, row)
			h.add(cChain, usdToken, schema.ListTokenTransfers, row)
			irow := store.IndexRow{Seek: store.Seek{Block: n, Position: 2}, Block: b, TxHash: txHashOf(n), Internal: in}
			h.add(cChain, router, schema.ListInternal, irow)
			h.add(cChain, bob, schema.ListInternal, irow)
		}
		h.add(cChain, alice, schema.ListTransactions, tx)
	}
	b25 := block(cChain, 25, 1050)
	nft := store.IndexRow{Seek: store.Seek{Block: 25, Position: 1}, Block: b25, TxHash: txHashOf(25),
		Transfer: store.Transfer{Kind: uint8(evm.ERC721), Token: nftToken[:], From: bob[:], To: alice[:], LogIndex: 1, Value: "1", TokenID: "7"}}
	h.add(cChain, alice, schema.ListERC721, nft)
	h.add(cChain, nftToken, schema.ListTokenTransfers, nft)
	for i, id := range []string{"3", "4"} {
		it := store.IndexRow{Seek: store.Seek{Block: 25, Position: 2, Sub: uint32(i)}, Block: b25, TxHash: txHashOf(25),
			Transfer: store.Transfer{Kind: uint8(evm.ERC1155), Token: itemsToken[:], From: bob[:], To: alice[:], LogIndex: 2, Value: "10", TokenID: id}}
		h.add(cChain, alice, schema.ListERC1155, it)
		h.add(cChain, itemsToken, schema.ListTokenTransfers, it)
	}
	b26 := block(cChain, 26, 1052)
	dep := store.IndexRow{Seek: store.Seek{Block: 26}, Block: b26, TxHash: txHashOf(26),
		Deployment: store.Deployment{Contract: created[:], Deployer: bob[:]}}
	h.add(cChain, bob, schema.ListDeployments, dep)
	h.add(cChain, created, schema.ListCreation, dep)
	h.addTx(cChain, store.TxRef{Block: b26}, store.FullTx{Tx: store.Tx{Hash: txHashOf(26), From: bob[:], ContractAddress: created[:],
		Value: "0", Status: 1}, Input: []byte{0x60, 0x80}})
	e.contracts.tokens[evm.Address(usdToken)] = &tokenmeta.Token{Name: "Moraine USD", Symbol: "MUSD", Decimals: 6, HasDecimals: true}
	e.contracts.tokens[evm.Address(nftToken)] = &tokenmeta.Token{Name: "Punks", Symbol: "PNK"}
	e.contracts.contracts[evm.Address(created)] = &tokenmeta.Contract{HasCode: true, Kind: evm.ERC20, Name: "New", Symbol: "NEW", Decimals: 18, HasDecimals: true}
}

// pages walks a list route with pageSize and returns every item.
func (e *env) pages(path, key string, pageSize int) []map[string]any {
	e.t.Helper()
	var out []map[string]any
	token := ""
	for range 100 {
		u := path + sep(path) + fmt.Sprintf("pageSize=%d", pageSize)
		if token != "" {
			u += "&pageToken=" + url.QueryEscape(token)
		}
		var resp map[string]any
		code, raw := e.do(http.MethodGet, u)
		require.Equal(e.t, http.StatusOK, code, "%s: %s", u, raw)
		require.NotContains(e.t, string(raw), "null", u)
		require.NoError(e.t, json.Unmarshal(raw, &resp))
		items, _ := resp[key].([]any)
		require.LessOrEqual(e.t, len(items), pageSize)
		for _, it := range items {
			out = append(out, it.(map[string]any))
		}
		next, _ := resp["nextPageToken"].(string)
		if next == "" {
			return out
		}
		token = next
	}
	e.t.Fatal("no end")
	return nil
}

func sep(u string) string {
	if strings.Contains(u, "?") {
		return "&"
	}
	return "?"
}

func TestHistoryValidation(t *testing.T) {
	e := newEnv(t)
	e.seedHistory()
	a := "/v1/chains/43114/addresses/" + hexAddr(alice)
	for _, tc := range []struct {
		path   string
		status int
		msg    any
	}{
		{"/v1/chains/43114/addresses/0x12/transactions", 400, []string{"Invalid address format"}},
		{"/v1/chains/43114/addresses/" + strings.Repeat("a", 42) + "/transactions:listErc20", 400, []string{"Invalid address format"}},
		{"/v1/chains/43114/transactions/0xabc", 400, []string{"txHash must be a 0x-prefixed 32-byte transaction hash"}},
		{a + "/transactions?startBlock=-1", 400, []string{"startBlock must not be less than 0"}},
		{a + "/transactions?startBlock=1.5&endBlock=x", 400, []string{"startBlock must be an integer number", "endBlock must be an integer number"}},
		{a + "/transactions:listNative?startBlock=9&endBlock=9", 400, []string{"endBlock must be greater than startBlock"}},
		// One past the documented maximum, exactly and as floats.
		{a + "/transactions?startBlock=9223372036854775808", 400, []string{"startBlock must not be greater than 9223372036854775807"}},
		{a + "/transactions?endBlock=99999999999999999999", 400, []string{"endBlock must not be greater than 9223372036854775807"}},
		{a + "/transactions?startBlock=1e19", 400, []string{"startBlock must not be greater than 9223372036854775807"}},
		{a + "/transactions?startBlock=9223372036854775807&endBlock=9223372036854775807", 400, []string{"endBlock must be greater than startBlock"}},
		{a + "/transactions?sortOrder=up", 400, []string{"sortOrder must be one of the following values: asc, desc"}},
		{a + "/transactions:listInternals?pageSize=101", 400, []string{"pageSize must not be greater than 100"}},
		{"/v1/chains/43114/transactions?status=pending", 400, []string{"status must be one of the following values: failed, success"}},
		{"/v1/transactions?network=devnet&pageSize=0", 400, []string{"pageSize must not be less than 1", "network must be one of the following values: mainnet, fuji, testnet"}},
		{"/v1/chains/43114/contracts/" + hexAddr(created) + "/transactions:getDeployment?currency=btc", 400,
			[]string{"currency must be one of the following values: usd, eur, aud, cad, chf, clp, cny, czk, dkk, gbp, hkd, huf, jpy, nzd"}},
		{"/v1/chains/x!/addresses/0x12", 400, []string{"chainId must be a decimal EVM chain id or a base58 blockchain id", "Invalid address format"}},
		{"/v1/chains/999/addresses/" + hexAddr(alice) + "/transactions", 404, "Chain 999 not found"},
		{"/v1/address/0xnothex/chains", 400, []string{"Invalid address format"}},
		{"/v1/chains/address/0xnothex", 400, []string{"Invalid address format"}},
		{"/v1/chains/43114/transactions/0x" + strings.Repeat("00", 32), 404,
			"Transaction 0x" + strings.Repeat("00", 32) + " not found on chain 43114"},
		{"/v1/chains/43114/contracts/" + hexAddr(alice) + "/transactions:getDeployment", 404,
			"No deployment of " + evm.Address(alice).Checksum() + " found on chain 43114"},
		{"/v1/chains/43114/addresses/" + hexAddr(bob) + "/transactions:listEverything", 404, nil},
	} {
		e.requireError(tc.path, tc.status, tc.msg)
	}
	// The documented maximum is accepted (issue 27: a float rounding made
	// it 2^63 and refused it): the range is past the head, so empty.
	var max listTransactionDetailsResponse
	require.Equal(t, http.StatusOK, e.get(a+"/transactions?startBlock=9223372036854775807", &max))
	require.Empty(t, max.Transactions)
	require.Equal(t, http.StatusOK, e.get(a+"/transactions?startBlock=0&endBlock=9223372036854775807", &max))
	require.Len(t, max.Transactions, 10)
	require.Equal(t, http.StatusOK, e.get(a+"/transactions?startBlock=%209223372036854775806%20", nil))
	// A parameter given twice or with brackets is refused, not read as its
	// first value (issue 27).
	e.requireError(a+"/transactions?pageSize=5&pageSize=500", 400, []string{"pageSize must be given once (it was given 2 times)"})
	e.requireError("/v1/chains/43114/transactions?status[]=failed", 400,
		[]string{"status[] is not a parameter: give status once, as status=value (brackets are not supported)"})
	// Parameters the route does not document are ignored, as NestJS does.
	require.Equal(t, http.StatusOK, e.get(a+"/transactions:listErc20?sortOrder=whatever&foo=1", nil))
	// A valid currency is accepted: there is no price to convert.
	require.Equal(t, http.StatusOK, e.get("/v1/chains/43114/contracts/"+hexAddr(created)+"/transactions:getDeployment?currency=eur", nil))
}

func TestAddressTransactionsPages(t *testing.T) {
	e := newEnv(t)
	e.seedHistory()
	base := "/v1/chains/43114/addresses/" + hexAddr(alice) + "/transactions"
	all := e.pages(base, "transactions", 3)
	require.Len(t, all, 20)
	first := all[0]
	require.Equal(t, "24", first["nativeTransaction"].(map[string]any)["blockNumber"], "newest first")
	require.Equal(t, []string{"nativeTransaction", "erc20Transfers"}, keysOf(t, first), "empty arrays are omitted")
	n := first["nativeTransaction"].(map[string]any)
	require.Equal(t, evm.Address(alice).Checksum(), n["from"].(map[string]any)["address"])
	require.Equal(t, map[string]any{"callType": "CONTRACT_CALL", "methodHash": "0xa9059cbb"}, n["method"])
	require.Equal(t, "2", fmt.Sprint(n["txType"]))
	require.Equal(t, []any{map[string]any{
		"from": map[string]any{"address": evm.Address(alice).Checksum()}, "to": map[string]any{"address": evm.Address(bob).Checksum()},
		"logIndex": 3.0, "value": "1000000",
		"erc20Token": map[string]any{"address": evm.Address(usdToken).Checksum(), "name": "Moraine USD", "symbol": "MUSD", "decimals": 6.0, "ercType": "ERC-20"},
	}}, first["erc20Transfers"])
	// alice is not a party of the router's internal call to bob: none listed.
	_, has := first["internalTransactions"]
	require.False(t, has && len(first["internalTransactions"].([]any)) > 0, "alice's page must not list router -> bob calls")
	require.Len(t, all[1], 1, "block 23: no transfer, only the transaction")

	// Oldest first within [10, 20).
	asc := e.pages(base+"?sortOrder=asc&startBlock=10&endBlock=20", "transactions", 4)
	var blocks []string
	for _, it := range asc {
		blocks = append(blocks, it["nativeTransaction"].(map[string]any)["blockNumber"].(string))
	}
	require.Equal(t, []string{"10", "11", "12", "13", "14", "15", "16", "17", "18", "19"}, blocks)

	// The token is bound to its list and filters.
	var page listTransactionDetailsResponse
	require.Equal(t, http.StatusOK, e.get(base+"?pageSize=2", &page))
	tok := url.QueryEscape(page.NextPageToken)
	for _, p := range []string{
		base + ":listNative?pageToken=" + tok,
		base + "?sortOrder=asc&pageToken=" + tok,
		base + "?startBlock=3&pageToken=" + tok,
		"/v1/chains/43114/addresses/" + hexAddr(bob) + "/transactions?pageToken=" + tok,
		"/v1/chains/43113/addresses/" + hexAddr(alice) + "/transactions?pageToken=" + tok,
		"/v1/chains/43114/transactions?pageToken=" + tok,
		base + "?pageToken=" + tok[:len(tok)-2] + "AA",
	} {
		e.requireError(p, 400, []string{"pageToken must be a page token returned by the previous page of this list"})
	}
	// The store was asked with the page's start and the window hint.
	require.Equal(t, http.StatusOK, e.get(base+"?pageSize=2&pageToken="+tok, nil))
	last := e.history.reads[len(e.history.reads)-1]
	require.Equal(t, &store.Seek{Block: 22}, last.Start)
	require.Equal(t, uint64(7), last.Window)
	require.Equal(t, 3, last.Limit)
	require.Equal(t, uint64(30), last.Hi, "the head")
}

func keysOf(t *testing.T, m map[string]any) []string {
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	// Marshal sorts keys: compare as a set in the spec's order instead.
	var out []string
	for _, k := range []string{"nativeTransaction", "erc20Transfers", "erc721Transfers", "erc1155Transfers", "internalTransactions"} {
		if _, ok := m[k]; ok {
			out = append(out, k)
		}
	}
	require.NotEmpty(t, raw)
	return out
}

func TestTransferAndInternalLists(t *testing.T) {
	e := newEnv(t)
	e.seedHistory()
	a := "/v1/chains/43114/addresses/" + hexAddr(alice)
	erc20 := e.pages(a+"/transactions:listErc20", "transactions", 4)
	require.Len(t, erc20, 10)
	require.Equal(t, "24", erc20[0]["blockNumber"])
	require.Equal(t, txHashOf(24).Hex(), erc20[0]["txHash"])
	require.Equal(t, 1048.0, erc20[0]["blockTimestamp"])

	nft := e.pages(a+"/transactions:listErc721", "transactions", 10)
	require.Len(t, nft, 1)
	require.Equal(t, map[string]any{"address": evm.Address(nftToken).Checksum(), "name": "Punks", "symbol": "PNK", "ercType": "ERC-721",
		"tokenId": "7", "tokenUri": "", "metadata": map[string]any{"indexStatus": "UNINDEXED"}}, nft[0]["erc721Token"])
	_, hasValue := nft[0]["value"]
	require.False(t, hasValue, "Erc721Transfer has no value")

	items := e.pages(a+"/transactions:listErc1155", "transactions", 10)
	require.Len(t, items, 2)
	require.Equal(t, "4", items[0]["erc1155Token"].(map[string]any)["tokenId"], "newest first: the batch's second element")
	require.Equal(t, "10", items[0]["value"])

	internals := e.pages("/v1/chains/43114/addresses/"+hexAddr(bob)+"/transactions:listInternals", "transactions", 3)
	require.Len(t, internals, 10)
	require.Equal(t, map[string]any{"blockNumber": "24", "blockTimestamp": 1048.0, "blockHash": hashOf(cChain, 24, "").Hex(),
		"txHash": txHashOf(24).Hex(), "from": map[string]any{"address": evm.Address(router).Checksum()},
		"to": map[string]any{"address": evm.Address(bob).Checksum()}, "internalTxType": "CALL", "value": "5", "isReverted": true,
		"gasUsed": "21000", "gasLimit": "30000"}, internals[0])

	// The token's transfers: every standard in one list.
	for _, tc := range []struct {
		token store.Address
		n     int
		key   string
	}{{usdToken, 10, "erc20Token"}, {nftToken, 1, "erc721Token"}, {itemsToken, 2, "erc1155Token"}} {
		got := e.pages("/v1/chains/43114/tokens/"+hexAddr(tc.token)+"/transfers", "transfers", 4)
		require.Len(t, got, tc.n)
		require.Contains(t, got[0], tc.key)
	}
	// An ERC-20 whose contract does not answer: "" and 0 decimals.
	delete(e.contracts.tokens, evm.Address(usdToken))
	erc20 = e.pages(a+"/transactions:listErc20", "transactions", 100)
	require.Equal(t, map[string]any{"address": evm.Address(usdToken).Checksum(), "name": "", "symbol": "", "decimals": 0.0, "ercType": "ERC-20"},
		erc20[0]["erc20Token"])
}

func TestGetTransaction(t *testing.T) {
	e := newEnv(t)
	e.seed()
	b := block(cChain, 12, 1024)
	ms := uint64(1024123)
	b.TimestampMs = &ms
	hash := txHashOf(12)
	e.history.addTx(cChain, store.TxRef{Block: b, Index: 4}, store.FullTx{
		Tx: store.Tx{BlockIndex: 4, Hash: hash, Type: 2, From: alice[:], To: router[:], Value: "7", Gas: 300000, GasPrice: "30",
			EffectiveGasPrice: "26", Nonce: 9, Selector: []byte{1, 2, 3, 4}, InputLen: 5, Status: 1, GasUsed: 120000},
		Input: []byte{1, 2, 3, 4, 5}, MaxFeePerGas: "30", MaxPriorityFeePerGas: "1",
		Transfers: []store.Transfer{
			{Kind: uint8(evm.ERC20), Token: usdToken[:], From: alice[:], To: bob[:], LogIndex: 40, Value: "99"},
			{Kind: uint8(evm.ERC721), Token: nftToken[:], From: bob[:], To: alice[:], LogIndex: 41, Value: "1", TokenID: "7"},
		},
		Internals: []store.Internal{
			{Type: "CALL", From: router[:], To: bob[:], Value: "7", Gas: 2300, GasUsed: 0, Reverted: true},
			{Type: "CREATE2", From: router[:], To: created[:], Value: "0", Gas: 100000, GasUsed: 50000},
		},
	})
	e.contracts.tokens[evm.Address(usdToken)] = &tokenmeta.Token{Name: "Moraine USD", Symbol: "MUSD", Decimals: 6, HasDecimals: true}
	code, raw := e.do(http.MethodGet, "/v1/chains/43114/transactions/"+hash.Hex())
	require.Equal(t, http.StatusOK, code, "%s", raw)
	require.Equal(t, []string{"erc20Transfers", "erc721Transfers", "erc1155Transfers", "internalTransactions", "networkTokenDetails", "nativeTransaction"},
		keys(t, raw))
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &got))
	chk := func(a store.Address) string { return evm.Address(a).Checksum() }
	require.JSONEq(t, fmt.Sprintf(`{"blockNumber":"12","blockTimestamp":1024,"blockTimestampMilliseconds":1024123,
		"blockHash":"%s","chainId":"43114","blockIndex":4,"txHash":"%s","txStatus":"1","txType":2,"gasLimit":"300000",
		"gasUsed":"120000","gasPrice":"30","nonce":"9","from":{"address":"%s"},"to":{"address":"%s"},
		"method":{"callType":"CONTRACT_CALL","methodHash":"0x01020304"},"value":"7","input":"0x0102030405",
		"baseFeePerGas":"25000000000","maxFeePerGas":"30","maxPriorityFeePerGas":"1"}`,
		b.Hash.Hex(), hash.Hex(), chk(alice), chk(router)), string(got["nativeTransaction"]))
	require.JSONEq(t, fmt.Sprintf(`[{"from":{"address":"%s"},"to":{"address":"%s"},"logIndex":40,"value":"99",
		"erc20Token":{"address":"%s","name":"Moraine USD","symbol":"MUSD","decimals":6,"ercType":"ERC-20"}}]`,
		chk(alice), chk(bob), chk(usdToken)), string(got["erc20Transfers"]))
	require.Contains(t, string(got["erc721Transfers"]), `"tokenId":"7"`)
	require.JSONEq(t, `[]`, string(got["erc1155Transfers"]))
	require.JSONEq(t, fmt.Sprintf(`[
		{"from":{"address":"%s"},"to":{"address":"%s"},"internalTxType":"CALL","value":"7","isReverted":true,"gasUsed":"0","gasLimit":"2300"},
		{"from":{"address":"%s"},"to":{"address":"%s"},"internalTxType":"CREATE2","value":"0","isReverted":false,"gasUsed":"50000","gasLimit":"100000"}]`,
		chk(router), chk(bob), chk(router), chk(created)), string(got["internalTransactions"]))
	require.JSONEq(t, `{"networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18,"logoUri":"https://example.org/avax.svg"}}`,
		string(got["networkTokenDetails"]))

	e.history.err = errors.Join(store.ErrUnavailable, errors.New("down"))
	e.requireError("/v1/chains/43114/transactions/"+hash.Hex(), 503, "Chain data is temporarily unavailable")
}

func TestContractsAndDeployments(t *testing.T) {
	e := newEnv(t)
	e.seedHistory()
	code, raw := e.do(http.MethodGet, "/v1/chains/43114/addresses/"+hexAddr(created))
	require.Equal(t, http.StatusOK, code, "%s", raw)
	require.JSONEq(t, fmt.Sprintf(`{"name":"New","address":"%s","deploymentDetails":{"txHash":"%s","deployerAddress":"%s"},
		"ercType":"ERC-20","symbol":"NEW","decimals":18}`, evm.Address(created).Checksum(), txHashOf(26).Hex(), evm.Address(bob).Checksum()), string(raw))
	// An NFT contract moraine saw no deployment of.
	e.contracts.contracts[evm.Address(nftToken)] = &tokenmeta.Contract{HasCode: true, Kind: evm.ERC721, Name: "Punks", Symbol: "PNK"}
	code, raw = e.do(http.MethodGet, "/v1/chains/43114/addresses/"+hexAddr(nftToken))
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, fmt.Sprintf(`{"name":"Punks","address":"%s","ercType":"ERC-721","symbol":"PNK"}`, evm.Address(nftToken).Checksum()), string(raw))
	// A contract answering nothing; an address without code.
	e.contracts.contracts[evm.Address(router)] = &tokenmeta.Contract{HasCode: true}
	code, raw = e.do(http.MethodGet, "/v1/chains/43114/addresses/"+hexAddr(router))
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, fmt.Sprintf(`{"address":"%s","ercType":"UNKNOWN"}`, evm.Address(router).Checksum()), string(raw))
	e.requireError("/v1/chains/43114/addresses/"+hexAddr(alice), 404, "Contract "+evm.Address(alice).Checksum()+" not found on chain 43114")

	deps := e.pages("/v1/chains/43114/contracts/"+hexAddr(bob)+"/deployments", "contracts", 10)
	require.Len(t, deps, 1)
	require.Equal(t, "ERC-20", deps[0]["ercType"])
	require.Equal(t, 18.0, deps[0]["decimals"])

	var tx map[string]any
	require.Equal(t, http.StatusOK, e.get("/v1/chains/43114/contracts/"+hexAddr(created)+"/transactions:getDeployment", &tx))

	e.contracts.err = errors.New("node down")
	e.requireError("/v1/chains/43114/addresses/"+hexAddr(created), 503, "Chain node is temporarily unavailable")
	e.requireError("/v1/chains/43114/contracts/"+hexAddr(bob)+"/deployments", 503, "Chain node is temporarily unavailable")
}

func latestTx(chain, n uint64, ts uint64, idx uint32) store.LatestTx {
	return store.LatestTx{Block: block(chain, n, ts), Tx: store.Tx{BlockIndex: idx, Hash: hashOf(chain, n*10+uint64(idx), "t"),
		From: alice[:], To: bob[:], Value: "1", Status: 1}}
}

func TestLatestTransactions(t *testing.T) {
	e := newEnv(t)
	e.seed()
	// C-Chain: blocks 30..21, two transactions each; Fuji: blocks 20..11, one each, timestamps interleaved.
	for n := uint64(30); n > 20; n-- {
		e.history.latest[cChain] = append(e.history.latest[cChain], latestTx(cChain, n, 1000+2*n, 1), latestTx(cChain, n, 1000+2*n, 0))
	}
	for n := uint64(20); n > 10; n-- {
		e.history.latest[fuji] = append(e.history.latest[fuji], latestTx(fuji, n, 1000+3*n, 0))
	}
	chain := e.pages("/v1/chains/43114/transactions", "transactions", 3)
	require.Len(t, chain, 20)
	require.Equal(t, "30", chain[0]["blockNumber"])
	require.Equal(t, 1.0, chain[0]["blockIndex"])
	require.Equal(t, 0.0, chain[1]["blockIndex"])

	all := e.pages("/v1/transactions", "transactions", 4)
	require.Len(t, all, 30)
	for i := 1; i < len(all); i++ {
		require.GreaterOrEqual(t, all[i-1]["blockTimestamp"].(float64), all[i]["blockTimestamp"].(float64), "merge order at %d", i)
	}
	// A network filter; the deprecated twin.
	main := e.pages("/v1/chains/allTransactions?network=mainnet", "transactions", 7)
	require.Len(t, main, 20)
	for _, tx := range main {
		require.Equal(t, "43114", tx["chainId"])
	}
	// A chain whose scan stopped short ends the merge early, with a token.
	e.history.resume[fuji] = &store.Seek{Block: 5, TxIndex: 9}
	var page listTransactionsResponse
	require.Equal(t, http.StatusOK, e.get("/v1/transactions?network=fuji&pageSize=50", &page))
	require.Len(t, page.Transactions, 10)
	require.NotEmpty(t, page.NextPageToken)
	var chainPage listTransactionsResponse
	require.Equal(t, http.StatusOK, e.get("/v1/chains/43113/transactions?pageSize=50&status=failed", &chainPage))
	require.NotEmpty(t, chainPage.NextPageToken, "a short page with more to scan has a token")
	e.requireError("/v1/chains/43113/transactions?pageToken="+url.QueryEscape(chainPage.NextPageToken), 400,
		[]string{"pageToken must be a page token returned by the previous page of this list"})
}

func TestAddressChains(t *testing.T) {
	e := newEnv(t)
	e.seedHistory()
	var got listAddressChainsResponse
	for _, p := range []string{"/v1/address/" + hexAddr(alice) + "/chains", "/v1/chains/address/" + hexAddr(alice)} {
		require.Equal(t, http.StatusOK, e.get(p, &got))
		require.Len(t, got.IndexedChains, 1)
		require.Equal(t, "43114", got.IndexedChains[0].ChainID)
		require.Equal(t, "OK", got.IndexedChains[0].Status)
	}
	code, raw := e.do(http.MethodGet, "/v1/address/"+hexAddr(mkAddr(0x77))+"/chains")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"indexedChains":[]}`, string(raw))
	// /v1/chains/{chainId} and the literal /v1/chains/address/{address} do not clash.
	require.Equal(t, http.StatusOK, e.get("/v1/chains/43114", nil))
}
