package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/balances"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/server/pagetoken"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// fakeBalances serves holdings, progress, native balances and NFTs from
// tables, recording what it was asked.
type fakeBalances struct {
	mu        sync.Mutex
	holdings  map[evm.Address][]balances.Holding
	progress  balances.Progress
	native    map[uint64]*big.Int // by block
	nativeErr error
	err       error
	nfts      map[evm.Address][]balances.NFT
	// asked: the last query; settled: whether the last native read was of
	// a settled block.
	asked   balances.Query
	settled bool
}

func (f *fakeBalances) Holdings(_ context.Context, q balances.Query) (balances.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = q
	if f.err != nil {
		return balances.Result{}, f.err
	}
	var out []balances.Holding
	for _, h := range f.holdings[q.Holder] {
		kindOK := len(q.Kinds) == 0
		for _, k := range q.Kinds {
			kindOK = kindOK || k == h.Kind
		}
		tokenOK := len(q.Tokens) == 0
		for _, t := range q.Tokens {
			tokenOK = tokenOK || t == h.Token
		}
		if kindOK && tokenOK {
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b balances.Holding) int { return balances.ComparePairs(a.BalancePair, b.BalancePair) })
	page, more := balances.Page(out, q.After, q.Limit)
	return balances.Result{Holdings: page, More: more, Progress: f.progress}, nil
}

func (f *fakeBalances) Progress(context.Context, uint64) (balances.Progress, error) {
	return f.progress, f.err
}

func (f *fakeBalances) NativeBalance(_ context.Context, _ uint64, _ evm.Address, block uint64, settled bool) (*big.Int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settled = settled
	if f.nativeErr != nil {
		return nil, f.nativeErr
	}
	if v, ok := f.native[block]; ok {
		return v, nil
	}
	return big.NewInt(7), nil
}

func (f *fakeBalances) NFT(_ context.Context, _ uint64, token evm.Address, id [32]byte) (balances.NFT, bool, error) {
	for _, n := range f.nfts[token] {
		if n.ID == id {
			return n, true, f.err
		}
	}
	return balances.NFT{}, false, f.err
}

func (f *fakeBalances) CollectionTokens(_ context.Context, _ uint64, token evm.Address, after *[32]byte, limit int) ([]balances.NFT, bool, error) {
	var out []balances.NFT
	for _, n := range f.nfts[token] {
		if after == nil || bytes.Compare(n.ID[:], after[:]) > 0 {
			out = append(out, n)
		}
	}
	if len(out) > limit {
		return out[:limit], true, f.err
	}
	return out, false, f.err
}

// fakeMeta has the metadata of some NFTs.
type fakeMeta struct {
	m map[nftmeta.Ref]nftmeta.Metadata
}

func (f fakeMeta) Lookup(_ context.Context, refs []nftmeta.Ref) (map[nftmeta.Ref]nftmeta.Metadata, error) {
	out := map[nftmeta.Ref]nftmeta.Metadata{}
	for _, r := range refs {
		if m, ok := f.m[r]; ok {
			out[r] = m
		}
	}
	return out, nil
}

func addrN(n byte) evm.Address { return evm.Address{0xb0, 19: n} }

func idN(n uint64) (id [32]byte) {
	new(big.Int).SetUint64(n).FillBytes(id[:])
	return id
}

var (
	holderA = addrN(1)
	tokA    = addrN(10) // ERC-20, named
	tokB    = addrN(11) // ERC-20, does not answer name()
	tokC    = addrN(12) // ERC-20
	nftX    = addrN(20) // ERC-721
	itemY   = addrN(21) // ERC-1155
)

type balanceEnv struct {
	*env
	bal *fakeBalances
}

func newBalanceEnv(t *testing.T) *balanceEnv {
	t.Helper()
	cc, err := chains.Parse([]byte(chainFile))
	require.NoError(t, err)
	e := &env{t: t, store: newFakeStore(), history: newFakeHistory(), contracts: newFakeContracts(), reg: prometheus.NewRegistry(),
		now: time.Unix(1_800_000_000, 0)}
	e.tokens, err = pagetoken.NewCodec(bytes.Repeat([]byte("k"), 32), time.Hour, func() time.Time { return e.now })
	require.NoError(t, err)
	bal := &fakeBalances{holdings: map[evm.Address][]balances.Holding{}, native: map[uint64]*big.Int{}, nfts: map[evm.Address][]balances.NFT{},
		progress: balances.Progress{First: 0, HasFirst: true}}
	meta := fakeMeta{m: map[nftmeta.Ref]nftmeta.Metadata{
		{ChainID: cChain, Contract: nftX, TokenID: "5"}: {TokenURI: "ipfs://x/5", IndexStatus: nftmeta.StatusIndexed,
			LastUpdated: time.Unix(1_700_000_000, 0), Name: "Five", ImageURI: "ipfs://img/5", Attributes: `[{"trait_type":"a"}]`},
	}}
	e.router, _, err = newRouter(Deps{
		Logger: testenv.Logger(t), Chains: cc, Store: e.store, History: e.history, Contracts: e.contracts, Tokens: e.tokens,
		Config: DefaultConfig(), Now: func() time.Time { return e.now },
		Balances: bal, NFTMetadata: meta, BalanceSettle: 10,
	}, e.reg)
	require.NoError(t, err)
	e.store.setHead(store.Head{ChainID: cChain, Number: 1000, AdvancedAt: e.now})
	e.contracts.tokens[tokA] = &tokenmeta.Token{Name: "Alpha", Symbol: "ALP", Decimals: 6, HasDecimals: true}
	e.contracts.tokens[nftX] = &tokenmeta.Token{Name: "Xs", Symbol: "X"}
	h := func(kind evm.Kind, token evm.Address, id, v int64) balances.Holding {
		return balances.Holding{BalancePair: schema.BalancePair{Kind: uint8(kind), Token: token, TokenID: idN(uint64(id))}, Balance: big.NewInt(v)}
	}
	bal.holdings[holderA] = []balances.Holding{
		h(evm.ERC20, tokA, 0, 100), h(evm.ERC20, tokB, 0, 20), h(evm.ERC20, tokC, 0, 3),
		h(evm.ERC20, addrN(13), 0, 0), h(evm.ERC20, addrN(14), 0, -4), // not listed: zero, negative
		h(evm.ERC721, nftX, 5, 1), h(evm.ERC721, nftX, 9, 1), h(evm.ERC1155, itemY, 1, 40),
	}
	return &balanceEnv{env: e, bal: bal}
}

func balancePath(chain, route string, q url.Values) string {
	p := fmt.Sprintf("/v1/chains/%s/addresses/%s/balances:%s", chain, holderA.Hex(), route)
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return p
}

func TestBalanceValidation(t *testing.T) {
	e := newBalanceEnv(t)
	e.requireError("/v1/chains/43114/addresses/0x12/balances:listErc20?blockNumber=1e3&pageSize=501&contractAddresses=0x1,0x2&filterSpamTokens=maybe&currency=xyz",
		http.StatusBadRequest, []string{msgAddress, "blockNumber must be a decimal block number no greater than 18446744073709551615",
			"pageSize must not be greater than 500", "contractAddresses must be a comma-separated list of addresses",
			"filterSpamTokens must be a boolean value",
			"currency must be one of the following values: usd, eur, aud, cad, chf, clp, cny, czk, dkk, gbp, hkd, huf, jpy, nzd"})
	e.requireError(balancePath("43114", "listErc721", url.Values{"contractAddress": {"0xnope"}, "pageSize": {"0"}}), http.StatusBadRequest,
		[]string{"pageSize must not be less than 1", "contractAddress must be an Ethereum address"})
	e.requireError(balancePath("99", "getNative", nil), http.StatusNotFound, "Chain 99 not found")
	e.requireError(balancePath("43114", "getNative", url.Values{"blockNumber": {"1001"}}), http.StatusBadRequest,
		"blockNumber 1001 is not indexed yet: the indexed head of chain 43114 is block 1000")
	e.requireError(balancePath("43113", "listErc20", nil), http.StatusServiceUnavailable, "Chain 43113 has no indexed block yet")
	e.requireError("/v1/chains/43114/nfts/collections/"+nftX.Hex()+"/tokens/12a", http.StatusBadRequest,
		[]string{"tokenId must be a decimal token id no greater than 2^256-1"})
	e.requireError("/v1/chains/43114/nfts/collections/"+nftX.Hex()+"/tokens/77", http.StatusNotFound,
		"Token 77 of "+nftX.Checksum()+" not found on chain 43114")
	// The node: no state for an old block (a pruned node), or down.
	e.bal.nativeErr = fmt.Errorf("%w: missing trie node", balances.ErrNoState)
	e.requireError(balancePath("43114", "getNative", url.Values{"blockNumber": {"3"}}), http.StatusBadRequest,
		"The node of chain 43114 has no state for block 3 (a pruned node keeps recent blocks only): the native balance at that block is not available")
	e.bal.nativeErr = fmt.Errorf("%w: refused", balances.ErrNodeDown)
	e.requireError(balancePath("43114", "listErc20", nil), http.StatusServiceUnavailable, "Chain node is temporarily unavailable")
	e.bal.nativeErr = nil
	e.bal.err = fmt.Errorf("%w: 256 buckets behind", balances.ErrBehind)
	e.requireError(balancePath("43114", "listErc20", nil), http.StatusServiceUnavailable, "Balances at this block are still being summed; try again shortly")
	e.bal.err = errors.Join(balances.ErrUnavailable, errors.New("connection refused"))
	e.requireError(balancePath("43114", "listErc1155", nil), http.StatusServiceUnavailable, "Chain data is temporarily unavailable")
}

func TestNativeBalance(t *testing.T) {
	e := newBalanceEnv(t)
	e.bal.native[1000], e.bal.native[900] = big.NewInt(5e17), big.NewInt(1)
	var got getNativeBalanceResponse
	require.Equal(t, http.StatusOK, e.get(balancePath("43114", "getNative", url.Values{"currency": {"eur"}}), &got))
	require.Equal(t, nativeTokenBalance{Name: "Avalanche", Symbol: "AVAX", Decimals: 18, LogoURI: "https://example.org/avax.svg",
		ChainID: "43114", Balance: "500000000000000000"}, got.NativeTokenBalance)
	require.False(t, e.bal.settled, "the head is not settled")
	require.Equal(t, http.StatusOK, e.get(balancePath("43114", "getNative", url.Values{"blockNumber": {"900"}}), &got))
	require.Equal(t, "1", got.NativeTokenBalance.Balance)
	require.True(t, e.bal.settled, "block 900 is 100 below the head")
}

func TestErc20Balances(t *testing.T) {
	e := newBalanceEnv(t)
	code, raw := e.do(http.MethodGet, balancePath("43114", "listErc20", url.Values{"pageSize": {"2"}, "filterSpamTokens": {"false"}}))
	require.Equal(t, http.StatusOK, code, "%s", raw)
	require.Equal(t, []string{"nextPageToken", "nativeTokenBalance", "erc20TokenBalances"}, keys(t, raw))
	var page listErc20BalancesResponse
	require.NoError(t, json.Unmarshal(raw, &page))
	require.Equal(t, uint64(1000), e.bal.asked.Block)
	require.Equal(t, []uint8{1}, e.bal.asked.Kinds)
	require.Len(t, page.Erc20TokenBalances, 2)
	require.Equal(t, erc20TokenBalance{Address: tokA.Checksum(), Name: "Alpha", Symbol: "ALP", Decimals: 6, ErcType: "ERC-20",
		ChainID: "43114", Balance: "100"}, page.Erc20TokenBalances[0]) // tokenReputation: null, below
	require.Contains(t, string(raw), `"tokenReputation":null`)
	// A token that does not answer: "" and 0, as in transfers.
	require.Equal(t, "", page.Erc20TokenBalances[1].Name)
	require.Equal(t, "20", page.Erc20TokenBalances[1].Balance)
	// Page 2 at the first page's block although the head moved; a token of
	// another filter, or another block, is refused.
	e.store.setHead(store.Head{ChainID: cChain, Number: 1005, AdvancedAt: e.now})
	var page2 listErc20BalancesResponse
	require.Equal(t, http.StatusOK, e.get(balancePath("43114", "listErc20", url.Values{"pageSize": {"2"}, "pageToken": {page.NextPageToken}}), &page2))
	require.Equal(t, uint64(1000), e.bal.asked.Block)
	require.Len(t, page2.Erc20TokenBalances, 1)
	require.Equal(t, tokC.Checksum(), page2.Erc20TokenBalances[0].Address)
	require.Empty(t, page2.NextPageToken)
	e.requireError(balancePath("43114", "listErc20", url.Values{"pageToken": {page.NextPageToken}, "contractAddresses": {tokA.Hex()}}),
		http.StatusBadRequest, []string{"pageToken must be a page token returned by the previous page of this list"})
	e.requireError(balancePath("43114", "listErc20", url.Values{"pageToken": {page.NextPageToken}, "blockNumber": {"1003"}}),
		http.StatusBadRequest, []string{"pageToken must be a page token returned by the previous page of this list"})
	e.requireError(balancePath("43114", "listErc1155", url.Values{"pageToken": {page.NextPageToken}}),
		http.StatusBadRequest, []string{"pageToken must be a page token returned by the previous page of this list"})
	// The filter, with the spaces of the spec's example.
	require.Equal(t, http.StatusOK, e.get(balancePath("43114", "listErc20", url.Values{"contractAddresses": {tokC.Hex() + ", " + tokA.Hex()},
		"blockNumber": {"77"}}), &page))
	require.Equal(t, []evm.Address{tokC, tokA}, e.bal.asked.Tokens)
	require.Equal(t, uint64(77), e.bal.asked.Block)
	require.Len(t, page.Erc20TokenBalances, 2)
}

func TestNFTBalances(t *testing.T) {
	e := newBalanceEnv(t)
	var l721 listErc721BalancesResponse
	require.Equal(t, http.StatusOK, e.get(balancePath("43114", "listErc721", url.Values{"blockNumber": {"500"}}), &l721))
	require.Equal(t, uint64(500), e.bal.asked.Block)
	require.Equal(t, []erc721TokenBalance{
		{Address: nftX.Checksum(), Name: "Xs", Symbol: "X", ErcType: "ERC-721", TokenID: "5", TokenURI: "ipfs://x/5",
			Metadata: nftMetadataFull{IndexStatus: "INDEXED", MetadataLastUpdatedTimestamp: 1_700_000_000, Name: "Five", ImageURI: "ipfs://img/5",
				Attributes: `[{"trait_type":"a"}]`}, OwnerAddress: holderA.Checksum(), ChainID: "43114"},
		{Address: nftX.Checksum(), Name: "Xs", Symbol: "X", ErcType: "ERC-721", TokenID: "9", Metadata: nftMetadataFull{IndexStatus: "UNINDEXED"},
			OwnerAddress: holderA.Checksum(), ChainID: "43114"},
	}, l721.Erc721TokenBalances)
	var l1155 listErc1155BalancesResponse
	require.Equal(t, http.StatusOK, e.get(balancePath("43114", "listErc1155", nil), &l1155))
	require.Equal(t, []erc1155TokenBalance{{Address: itemY.Checksum(), ErcType: "ERC-1155", TokenID: "1", Metadata: nftMetadataFull{IndexStatus: "UNINDEXED"},
		ChainID: "43114", Balance: "40"}}, l1155.Erc1155TokenBalances)
	// Collectibles: both kinds, in token order, paged.
	var c1, c2 struct {
		NextPageToken       string            `json:"nextPageToken"`
		CollectibleBalances []json.RawMessage `json:"collectibleBalances"`
	}
	code, raw := e.do(http.MethodGet, balancePath("43114", "listCollectibles", url.Values{"pageSize": {"2"}}))
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, string(raw), "nativeTokenBalance")
	require.NoError(t, json.Unmarshal(raw, &c1))
	require.Len(t, c1.CollectibleBalances, 2)
	require.Equal(t, http.StatusOK, e.get(balancePath("43114", "listCollectibles", url.Values{"pageToken": {c1.NextPageToken}}), &c2))
	require.Len(t, c2.CollectibleBalances, 1)
	require.Contains(t, string(c2.CollectibleBalances[0]), `"ercType":"ERC-1155"`)
}

// A chain indexed from block 5000: lists say they may lack tokens (the
// header), except for the named ERC-20 tokens, which are opened; pairs
// whose opening the node could not say are left out, and said so; blocks
// before the opening block are refused.
func TestLateStartChain(t *testing.T) {
	e := newBalanceEnv(t)
	e.bal.progress = balances.Progress{First: 500, HasFirst: true}
	get := func(q url.Values) (*httptest.ResponseRecorder, listErc20BalancesResponse) {
		req := httptest.NewRequest(http.MethodGet, balancePath("43114", "listErc20", q), nil)
		w := httptest.NewRecorder()
		e.router.ServeHTTP(w, req)
		require.Equal(t, http.StatusOK, w.Code, "%s", w.Body)
		var out listErc20BalancesResponse
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out))
		return w, out
	}
	w, _ := get(nil)
	require.Equal(t, "chain 43114 is indexed from block 500: tokens the address has not moved since are not listed", w.Header().Get(headerIncomplete))
	w, _ = get(url.Values{"contractAddresses": {tokA.Hex()}})
	require.Empty(t, w.Header().Get(headerIncomplete))
	hs := e.bal.holdings[holderA]
	hs[1].Partial = true
	w, out := get(url.Values{"contractAddresses": {tokA.Hex() + "," + tokB.Hex()}})
	require.Equal(t, "the node could not say the opening balances at block 499 of 1 tokens: they are not listed", w.Header().Get(headerIncomplete))
	require.Len(t, out.Erc20TokenBalances, 1)
	e.requireError(balancePath("43114", "getNative", url.Values{"blockNumber": {"498"}}), http.StatusBadRequest,
		"blockNumber 498 is before the balances of chain 43114: they start at block 500 (opening balances at block 499)")
	require.Equal(t, http.StatusOK, e.get(balancePath("43114", "getNative", url.Values{"blockNumber": {"499"}}), nil))
}

func TestCollectionTokens(t *testing.T) {
	e := newBalanceEnv(t)
	for id := range uint64(6) {
		n := balances.NFT{Token: nftX, ID: idN(id), Kind: evm.ERC721, Owner: holderA, Block: 10}
		if id == 3 {
			n.Owner = evm.Address{} // burnt
		}
		e.bal.nfts[nftX] = append(e.bal.nfts[nftX], n)
	}
	e.bal.nfts[itemY] = []balances.NFT{{Token: itemY, ID: idN(1), Kind: evm.ERC1155, Block: 3}}
	base := "/v1/chains/43114/nfts/collections/" + nftX.Hex() + "/tokens"
	var p1, p2 listNftTokensResponse
	require.Equal(t, http.StatusOK, e.get(base+"?pageSize=3", &p1))
	require.Len(t, p1.Tokens, 3)
	require.NotEmpty(t, p1.NextPageToken)
	require.Equal(t, http.StatusOK, e.get(base+"?pageToken="+url.QueryEscape(p1.NextPageToken), &p2))
	require.Len(t, p2.Tokens, 3)
	require.Empty(t, p2.NextPageToken)
	raw, _ := json.Marshal(p2.Tokens[:2])
	require.JSONEq(t, `[{"address":"`+nftX.Checksum()+`","name":"Xs","symbol":"X","ercType":"ERC-721","tokenId":"3","tokenUri":"","metadata":{"indexStatus":"UNINDEXED"}},
		{"address":"`+nftX.Checksum()+`","name":"Xs","symbol":"X","ercType":"ERC-721","tokenId":"4","tokenUri":"","metadata":{"indexStatus":"UNINDEXED"},"ownerAddress":"`+holderA.Checksum()+`"}]`, string(raw))
	e.requireError("/v1/chains/43114/nfts/collections/"+itemY.Hex()+"/tokens?pageToken="+url.QueryEscape(p1.NextPageToken), http.StatusBadRequest,
		[]string{"pageToken must be a page token returned by the previous page of this list"})
	code, body := e.do(http.MethodGet, "/v1/chains/43114/nfts/collections/"+nftX.Hex()+"/tokens/5")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"address":"`+nftX.Checksum()+`","name":"Xs","symbol":"X","ercType":"ERC-721","tokenId":"5","tokenUri":"ipfs://x/5",
		"metadata":{"indexStatus":"INDEXED","metadataLastUpdatedTimestamp":1700000000,"name":"Five","imageUri":"ipfs://img/5","attributes":"[{\"trait_type\":\"a\"}]"},
		"ownerAddress":"`+holderA.Checksum()+`"}`, string(body))
	code, body = e.do(http.MethodGet, "/v1/chains/43114/nfts/collections/"+itemY.Hex()+"/tokens/0001")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"address":"`+itemY.Checksum()+`","ercType":"ERC-1155","tokenId":"1","tokenUri":"","metadata":{"indexStatus":"UNINDEXED"}}`, string(body))
}
