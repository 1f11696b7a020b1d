package api

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/moraine-data/moraine/pkg/balances"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
)

// BalanceService is what the balance and NFT routes read; balances.Service
// implements it, handler tests use a fake.
type BalanceService interface {
	Holdings(ctx context.Context, q balances.Query) (balances.Result, error)
	Progress(ctx context.Context, chainID uint64) (balances.Progress, error)
	NativeBalance(ctx context.Context, chainID uint64, addr evm.Address, block uint64, settled bool) (*big.Int, error)
	NFT(ctx context.Context, chainID uint64, token evm.Address, id [32]byte) (balances.NFT, bool, error)
	CollectionTokens(ctx context.Context, chainID uint64, token evm.Address, after *[32]byte, limit int) ([]balances.NFT, bool, error)
}

// NFTMetadata is what the NFT metadata worker fetched (nftmeta.Reader).
type NFTMetadata interface {
	Lookup(ctx context.Context, refs []nftmeta.Ref) (map[nftmeta.Ref]nftmeta.Metadata, error)
}

// balanceDeps are what the balance and NFT handlers add.
type balanceDeps struct {
	service  BalanceService
	metadata NFTMetadata
	tokens   *balanceTokens
	// settle is how far below the indexed head a block is settled (no
	// reorg reaches it): its native balances are remembered.
	settle uint64
}

// The incomplete-answer header (docs/balances.md, "Chains indexed from a
// later block"): present, with the reason, when a list may lack balances.
const headerIncomplete = "X-Moraine-Incomplete"

var decimalParam = regexp.MustCompile(`^[0-9]{1,20}$`)

// maxContractFilter bounds contractAddresses.
const maxContractFilter = 100

// blockNumberParam reads the optional blockNumber query parameter: a
// decimal block number (the spec's type is string).
func (p *params) blockNumberParam() (uint64, bool) {
	raw, ok := p.c.GetQuery("blockNumber")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(raw, 10, 64)
	if !decimalParam.MatchString(raw) || err != nil {
		p.fail("blockNumber must be a decimal block number no greater than 18446744073709551615")
		return 0, false
	}
	return n, true
}

// contractList reads contractAddresses: addresses separated by commas
// (spaces around them allowed, as the spec's example has them).
func (p *params) contractList() []evm.Address {
	raw, ok := p.c.GetQuery("contractAddresses")
	if !ok {
		return nil
	}
	var out []evm.Address
	for _, s := range strings.Split(raw, ",") {
		s = strings.TrimSpace(s)
		a, err := store.ParseAddress(s)
		if !addressParam.MatchString(s) || err != nil {
			p.fail("contractAddresses must be a comma-separated list of addresses")
			return nil
		}
		out = append(out, evm.Address(a))
	}
	if len(out) > maxContractFilter {
		p.fail("contractAddresses must not hold more than %d addresses", maxContractFilter)
		return nil
	}
	return out
}

// contractOne reads contractAddress.
func (p *params) contractOne() []evm.Address {
	raw, ok := p.c.GetQuery("contractAddress")
	if !ok {
		return nil
	}
	a, err := store.ParseAddress(raw)
	if !addressParam.MatchString(raw) || err != nil {
		p.fail("contractAddress must be an Ethereum address")
		return nil
	}
	return []evm.Address{evm.Address(a)}
}

// boolean reads an optional boolean query parameter ("true" or "false").
func (p *params) boolean(name string) {
	if raw, ok := p.c.GetQuery(name); ok && raw != "true" && raw != "false" {
		p.fail("%s must be a boolean value", name)
	}
}

// balanceSpec is what one balance route accepts and lists.
type balanceSpec struct {
	kinds []uint8
	token balanceTokenKind
	// list: contractAddresses (ERC-20) instead of contractAddress.
	list bool
	// erc20: the route takes filterSpamTokens and currency.
	erc20 bool
	// native: the response carries the holder's native balance.
	native bool
}

// balanceList is one validated, read page of a balance list.
type balanceList struct {
	chain    chains.Chain
	holder   evm.Address
	holdings []balances.Holding
	native   *big.Int
	next     string
}

// atBlock is the block a balance request is answered at, after checks.
type atBlock struct {
	chain   chains.Chain
	block   uint64
	settled bool
	// head is the indexed head the block was checked against.
	head balances.Head
	// incomplete explains why a list at this block may lack balances ("":
	// it does not).
	incomplete string
}

// resolveBlock checks a balance request's block (given, or else the
// indexed head) against the chain's indexed head and its balances' start,
// and answers the error itself.
func (h *handlers) resolveBlock(c *gin.Context, ch chains.Chain, block uint64, given bool) (atBlock, bool) {
	heads, found := h.indexedHeads(c)
	if !found {
		return atBlock{}, false
	}
	head := heads[ch.ID()]
	if !head.Exists {
		apierr.Write(c, apierr.Unavailable(fmt.Sprintf("Chain %s has no indexed block yet", ch.EVMChainID), nil))
		return atBlock{}, false
	}
	if !given {
		block = head.Number
	}
	if block > head.Number {
		apierr.Write(c, apierr.New(http.StatusBadRequest, fmt.Sprintf("blockNumber %d is not indexed yet: the indexed head of chain %s is block %d",
			block, ch.EVMChainID, head.Number)))
		return atBlock{}, false
	}
	at := atBlock{chain: ch, block: block, settled: head.Number >= h.balance.settle && block <= head.Number-h.balance.settle,
		head: balances.Head{Number: head.Number, Hash: head.Hash}}
	p, err := h.balance.service.Progress(c.Request.Context(), ch.ID())
	if err != nil {
		apierr.Write(c, balanceErr(err))
		return atBlock{}, false
	}
	if !p.Complete() {
		if block < p.OpeningBlock() {
			apierr.Write(c, apierr.New(http.StatusBadRequest, fmt.Sprintf("blockNumber %d is before the balances of chain %s: they start at block %d (opening balances at block %d)",
				block, ch.EVMChainID, p.First, p.OpeningBlock())))
			return atBlock{}, false
		}
		at.incomplete = fmt.Sprintf("chain %s is indexed from block %d: tokens the address has not moved since are not listed", ch.EVMChainID, p.First)
	}
	return at, true
}

// balanceErr maps an error of the balance reads to the API error.
func balanceErr(err error) error {
	switch {
	case errors.Is(err, balances.ErrBehind):
		return apierr.Unavailable("Balances at this block are still being summed; try again shortly", err)
	case errors.Is(err, balances.ErrUnavailable), errors.Is(err, store.ErrUnavailable), errors.Is(err, nftmeta.ErrUnavailable):
		return apierr.Unavailable("Chain data is temporarily unavailable", err)
	}
	return apierr.Internal(err)
}

// nativeErr maps an error of a native balance read to the API error.
func nativeErr(err error, ch chains.Chain, block uint64) error {
	if errors.Is(err, balances.ErrNoState) {
		return apierr.New(http.StatusBadRequest, fmt.Sprintf("The node of chain %s has no state for block %d (a pruned node keeps recent blocks only): the native balance at that block is not available",
			ch.EVMChainID, block))
	}
	return apierr.Unavailable("Chain node is temporarily unavailable", err)
}

// nativeBalance reads the holder's native balance at the block, or answers
// the error and returns false.
func (h *handlers) nativeBalance(c *gin.Context, at atBlock, holder evm.Address) (*big.Int, bool) {
	v, err := h.balance.service.NativeBalance(c.Request.Context(), at.chain.ID(), holder, at.block, at.settled)
	if err != nil {
		apierr.Write(c, nativeErr(err, at.chain, at.block))
		return nil, false
	}
	return v, true
}

// readBalanceList validates a balance route's request and reads its page;
// it writes the error response itself and returns false on failure.
func (h *handlers) readBalanceList(c *gin.Context, spec balanceSpec) (balanceList, bool) {
	p := &params{c: c}
	id := p.chainID()
	holder := evm.Address(p.address())
	block, given := p.blockNumberParam()
	size := p.pageSize("pageSize", 1, 500, 10)
	token := p.pageToken()
	var contracts []evm.Address
	if spec.list {
		contracts = p.contractList()
	} else {
		contracts = p.contractOne()
	}
	if spec.erc20 {
		p.boolean("filterSpamTokens")
		p.enum("currency", currencies)
	}
	ch, found := h.validChain(p, id)
	if !found {
		return balanceList{}, false
	}
	digest := filterDigest(contracts)
	var last *balanceToken
	if token != "" {
		t, err := h.balance.tokens.decode(token, spec.token)
		if err != nil || t.chainID != ch.ID() || t.address != holder || t.filter != digest || (given && t.block != block) {
			apierr.Write(c, badToken())
			return balanceList{}, false
		}
		block, given, last = t.block, true, &t
	}
	at, found := h.resolveBlock(c, ch, block, given)
	if !found {
		return balanceList{}, false
	}
	ctx := c.Request.Context()
	q := balances.Query{ChainID: ch.ID(), Holder: holder, Block: at.block, Kinds: spec.kinds, Tokens: contracts, Limit: size, Head: &at.head}
	if last != nil {
		q.After = &last.last
	}
	res, err := h.balance.service.Holdings(ctx, q)
	if err != nil {
		apierr.Write(c, balanceErr(err))
		return balanceList{}, false
	}
	out := balanceList{chain: ch, holder: holder}
	partial := 0
	for _, hd := range res.Holdings {
		switch {
		case hd.Partial:
			partial++
		case hd.Listable():
			out.holdings = append(out.holdings, hd)
		}
	}
	if res.More && len(out.holdings) > 0 {
		lastPair := out.holdings[len(out.holdings)-1].BalancePair
		out.next = h.balance.tokens.encode(balanceToken{kind: spec.token, chainID: ch.ID(), address: holder, block: at.block, filter: digest, last: lastPair})
	}
	incomplete := at.incomplete
	if incomplete != "" && spec.list && len(contracts) > 0 {
		incomplete = "" // every named ERC-20 token was opened
	}
	if partial > 0 {
		incomplete = strings.TrimPrefix(incomplete+fmt.Sprintf("; the node could not say the opening balances at block %d of %d tokens: they are not listed",
			res.Progress.OpeningBlock(), partial), "; ")
	}
	if incomplete != "" {
		c.Header(headerIncomplete, incomplete)
	}
	if spec.native {
		if out.native, found = h.nativeBalance(c, at, holder); !found {
			return balanceList{}, false
		}
	}
	return out, true
}

// getNativeBalance: GET .../addresses/:address/balances:getNative. The
// native balance is the node's eth_getBalance at the block (the indexed
// head by default); no EVM log shows every move of the native token.
func (h *handlers) getNativeBalance(c *gin.Context) {
	p := &params{c: c}
	id := p.chainID()
	holder := evm.Address(p.address())
	block, given := p.blockNumberParam()
	p.enum("currency", currencies)
	ch, found := h.validChain(p, id)
	if !found {
		return
	}
	at, found := h.resolveBlock(c, ch, block, given)
	if !found {
		return
	}
	v, found := h.nativeBalance(c, at, holder)
	if !found {
		return
	}
	ok(c, getNativeBalanceResponse{NativeTokenBalance: nativeOf(ch, v)})
}

// listErc20Balances: GET .../balances:listErc20. The holder's ERC-20
// balances at the block, by token address, with token names from the
// token contracts and the native balance.
func (h *handlers) listErc20Balances(c *gin.Context) {
	l, read := h.readBalanceList(c, balanceSpec{kinds: []uint8{uint8(evm.ERC20)}, token: tokenErc20Balances, list: true, erc20: true, native: true})
	if !read {
		return
	}
	addrs := make([]evm.Address, len(l.holdings))
	for i, hd := range l.holdings {
		addrs[i] = hd.Token
	}
	toks := tokens(h.history.contracts.Resolve(c.Request.Context(), l.chain.ID(), addrs))
	out := listErc20BalancesResponse{NextPageToken: l.next, NativeTokenBalance: nativeOf(l.chain, l.native),
		Erc20TokenBalances: make([]erc20TokenBalance, 0, len(l.holdings))}
	for _, hd := range l.holdings {
		t := toks.erc20(hd.Token)
		out.Erc20TokenBalances = append(out.Erc20TokenBalances, erc20TokenBalance{Address: t.Address, Name: t.Name, Symbol: t.Symbol,
			Decimals: t.Decimals, ErcType: ercType20, ChainID: l.chain.EVMChainID, Balance: hd.Balance.String(), TokenReputation: &nullJSON})
	}
	ok(c, out)
}

// nftItems renders NFT holdings as balance items, with their token names
// and fetched metadata.
func (h *handlers) nftItems(ctx context.Context, l balanceList) ([]any, error) {
	var named []evm.Address
	refs := make([]nftmeta.Ref, len(l.holdings))
	for i, hd := range l.holdings {
		refs[i] = nftmeta.Ref{ChainID: l.chain.ID(), Contract: hd.Token, TokenID: evm.Decimal(hd.TokenID[:])}
		if evm.Kind(hd.Kind) == evm.ERC721 {
			named = append(named, hd.Token)
		}
	}
	meta, err := h.balance.metadata.Lookup(ctx, refs)
	if err != nil {
		return nil, err
	}
	toks := tokens(h.history.contracts.Resolve(ctx, l.chain.ID(), named))
	items := make([]any, 0, len(l.holdings))
	for i, hd := range l.holdings {
		m, found := meta[refs[i]]
		uri, md := renderMetadata(m, found, evm.Kind(hd.Kind))
		if evm.Kind(hd.Kind) == evm.ERC721 {
			t := toks.erc721(hd.Token, refs[i].TokenID)
			items = append(items, erc721TokenBalance{Address: t.Address, Name: t.Name, Symbol: t.Symbol, ErcType: ercType721,
				TokenID: refs[i].TokenID, TokenURI: uri, Metadata: md, OwnerAddress: l.holder.Checksum(), ChainID: l.chain.EVMChainID})
			continue
		}
		items = append(items, erc1155TokenBalance{Address: checksum(hd.Token), ErcType: ercType1155, TokenID: refs[i].TokenID,
			TokenURI: uri, Metadata: md, ChainID: l.chain.EVMChainID, Balance: hd.Balance.String()})
	}
	return items, nil
}

// listErc721Balances: GET .../balances:listErc721, the NFTs the holder
// owns at the block (blockNumber: moraine's extension).
func (h *handlers) listErc721Balances(c *gin.Context) {
	l, items, read := readNFTsOf[erc721TokenBalance](h, c, evm.ERC721, tokenErc721Balances)
	if !read {
		return
	}
	ok(c, listErc721BalancesResponse{NextPageToken: l.next, NativeTokenBalance: nativeOf(l.chain, l.native),
		Erc721TokenBalances: items})
}

// listErc1155Balances: GET .../balances:listErc1155.
func (h *handlers) listErc1155Balances(c *gin.Context) {
	l, items, read := readNFTsOf[erc1155TokenBalance](h, c, evm.ERC1155, tokenErc1155Balances)
	if !read {
		return
	}
	ok(c, listErc1155BalancesResponse{NextPageToken: l.next, NativeTokenBalance: nativeOf(l.chain, l.native),
		Erc1155TokenBalances: items})
}

// readNFTsOf reads a page of the holder's NFTs of one standard, with the
// native balance, as the items of that standard's list (T: what nftItems
// makes of its holdings); false when it has answered with an error.
func readNFTsOf[T any](h *handlers, c *gin.Context, kind evm.Kind, token balanceTokenKind) (balanceList, []T, bool) {
	l, read := h.readBalanceList(c, balanceSpec{kinds: []uint8{uint8(kind)}, token: token, native: true})
	if !read {
		return l, nil, false
	}
	items, err := h.nftItems(c.Request.Context(), l)
	if err != nil {
		apierr.Write(c, balanceErr(err))
		return l, nil, false
	}
	out := make([]T, 0, len(items))
	for _, it := range items {
		out = append(out, it.(T))
	}
	return l, out, true
}

// listCollectibleBalances: GET .../balances:listCollectibles, ERC-721 and
// ERC-1155 holdings in one list (blockNumber: moraine's extension).
func (h *handlers) listCollectibleBalances(c *gin.Context) {
	l, read := h.readBalanceList(c, balanceSpec{kinds: []uint8{uint8(evm.ERC721), uint8(evm.ERC1155)}, token: tokenCollectibleBalances})
	if !read {
		return
	}
	items, err := h.nftItems(c.Request.Context(), l)
	if err != nil {
		apierr.Write(c, balanceErr(err))
		return
	}
	ok(c, listCollectibleBalancesResponse{NextPageToken: l.next, CollectibleBalances: items})
}

// blockNumberExtension documents blockNumber where the hosted operation
// lacks it (listErc721Balances, listCollectibleBalances).
const blockNumberExtension = `[{"name": "blockNumber", "required": false, "in": "query",
  "description": "The block number, if not defined the block number will be the latest block. A moraine extension: the hosted API lists these balances at the latest block only.",
  "example": "6479329", "schema": {"type": "string"}}]`
