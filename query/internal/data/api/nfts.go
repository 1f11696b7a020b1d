package api

import (
	"fmt"
	"math/big"

	"github.com/gin-gonic/gin"

	"github.com/moraine-data/moraine/pkg/balances"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
)

// The NFT routes: a collection's tokens (every token id with a canonical
// transfer, in numeric order) and one token's details, each with its
// fetched metadata (nftmeta) and, for ERC-721, its current owner.

// renderNFTs renders NFTs of one collection with their metadata and names.
func (h *handlers) renderNFTs(c *gin.Context, chainID uint64, token evm.Address, nfts []balances.NFT) ([]any, bool) {
	ctx := c.Request.Context()
	refs := make([]nftmeta.Ref, len(nfts))
	named := false
	for i, n := range nfts {
		refs[i] = nftmeta.Ref{ChainID: chainID, Contract: token, TokenID: evm.Decimal(n.ID[:])}
		named = named || n.Kind == evm.ERC721
	}
	meta, err := h.balance.metadata.Lookup(ctx, refs)
	if err != nil {
		apierr.Write(c, balanceErr(err))
		return nil, false
	}
	var toks tokens
	if named {
		toks = h.history.contracts.Resolve(ctx, chainID, []evm.Address{token})
	}
	out := make([]any, 0, len(nfts))
	for i, n := range nfts {
		m, found := meta[refs[i]]
		uri, md := renderMetadata(m, found, n.Kind)
		if n.Kind == evm.ERC721 {
			t := toks.erc721(token, refs[i].TokenID)
			item := erc721TokenFull{Address: t.Address, Name: t.Name, Symbol: t.Symbol, ErcType: ercType721, TokenID: refs[i].TokenID,
				TokenURI: uri, Metadata: md}
			if n.Owner != (evm.Address{}) {
				item.OwnerAddress = n.Owner.Checksum() // omitted once burnt
			}
			out = append(out, item)
			continue
		}
		out = append(out, erc1155TokenFull{Address: checksum(token), ErcType: ercType1155, TokenID: refs[i].TokenID, TokenURI: uri, Metadata: md})
	}
	return out, true
}

// listTokens: GET /v1/chains/:chainId/nfts/collections/:address/tokens.
func (h *handlers) listTokens(c *gin.Context) {
	p := &params{c: c}
	id := p.chainID()
	token := evm.Address(p.address())
	size := p.pageSize("pageSize", 1, 100, 10)
	pageToken := p.pageToken()
	ch, found := h.validChain(p, id)
	if !found {
		return
	}
	var after *[32]byte
	if pageToken != "" {
		t, err := h.balance.tokens.decode(pageToken, tokenCollectionTokens)
		if err != nil || t.chainID != ch.ID() || t.address != token {
			apierr.Write(c, badToken())
			return
		}
		after = &t.last.TokenID
	}
	nfts, more, err := h.balance.service.CollectionTokens(c.Request.Context(), ch.ID(), token, after, size)
	if err != nil {
		apierr.Write(c, balanceErr(err))
		return
	}
	items, found := h.renderNFTs(c, ch.ID(), token, nfts)
	if !found {
		return
	}
	out := listNftTokensResponse{Tokens: items}
	if more && len(nfts) > 0 {
		t := balanceToken{kind: tokenCollectionTokens, chainID: ch.ID(), address: token}
		t.last.TokenID = nfts[len(nfts)-1].ID
		out.NextPageToken = h.balance.tokens.encode(t)
	}
	ok(c, out)
}

// getTokenDetails: GET /v1/chains/:chainId/nfts/collections/:address/tokens/:tokenId.
func (h *handlers) getTokenDetails(c *gin.Context) {
	p := &params{c: c}
	id := p.chainID()
	token := evm.Address(p.address())
	tokenID, valid := nftmeta.ParseTokenID(c.Param("tokenId"))
	if !valid {
		p.fail("tokenId must be a decimal token id no greater than 2^256-1")
	}
	ch, found := h.validChain(p, id)
	if !found {
		return
	}
	n, _ := new(big.Int).SetString(tokenID, 10)
	var word [32]byte
	n.FillBytes(word[:])
	nft, found, err := h.balance.service.NFT(c.Request.Context(), ch.ID(), token, word)
	switch {
	case err != nil:
		apierr.Write(c, balanceErr(err))
		return
	case !found:
		apierr.Write(c, apierr.NotFound(fmt.Sprintf("Token %s of %s not found on chain %s", tokenID, token.Checksum(), ch.EVMChainID)))
		return
	}
	items, found := h.renderNFTs(c, ch.ID(), token, []balances.NFT{nft})
	if !found {
		return
	}
	ok(c, items[0])
}
