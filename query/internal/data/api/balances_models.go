package api

import (
	"encoding/json"
	"math/big"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/nftmeta"
)

// The response shapes of the balance and NFT routes (hosted schemas
// GetNativeBalanceResponse, ListErc20BalancesResponse, ...). Optional
// fields are omitted, never null; tokenReputation is required and nullable
// and is always null (moraine has no reputation data).

type nativeTokenBalance struct {
	Name     string `json:"name"`
	Symbol   string `json:"symbol"`
	Decimals int    `json:"decimals"`
	LogoURI  string `json:"logoUri,omitempty"`
	ChainID  string `json:"chainId"`
	Balance  string `json:"balance"`
}

type getNativeBalanceResponse struct {
	NativeTokenBalance nativeTokenBalance `json:"nativeTokenBalance"`
}

type erc20TokenBalance struct {
	Address         string           `json:"address"`
	Name            string           `json:"name"`
	Symbol          string           `json:"symbol"`
	Decimals        int              `json:"decimals"`
	ErcType         string           `json:"ercType"`
	ChainID         string           `json:"chainId"`
	Balance         string           `json:"balance"`
	TokenReputation *json.RawMessage `json:"tokenReputation"`
}

type listErc20BalancesResponse struct {
	NextPageToken      string              `json:"nextPageToken,omitempty"`
	NativeTokenBalance nativeTokenBalance  `json:"nativeTokenBalance"`
	Erc20TokenBalances []erc20TokenBalance `json:"erc20TokenBalances"`
}

// nftMetadataFull is Erc721TokenMetadata and Erc1155TokenMetadata: what the
// NFT metadata worker fetched (nftmeta), every field but indexStatus
// omitted when empty.
type nftMetadataFull struct {
	IndexStatus                  string `json:"indexStatus"`
	MetadataLastUpdatedTimestamp int64  `json:"metadataLastUpdatedTimestamp,omitempty"`
	Name                         string `json:"name,omitempty"`
	Symbol                       string `json:"symbol,omitempty"`
	ImageURI                     string `json:"imageUri,omitempty"`
	Description                  string `json:"description,omitempty"`
	AnimationURI                 string `json:"animationUri,omitempty"`
	ExternalURL                  string `json:"externalUrl,omitempty"`
	Background                   string `json:"background,omitempty"`
	// Attributes: ERC-721 only; Decimals and Properties: ERC-1155 only.
	Attributes string `json:"attributes,omitempty"`
	Decimals   *int   `json:"decimals,omitempty"`
	Properties string `json:"properties,omitempty"`
}

// renderMetadata renders m for an NFT of kind; ok false: never indexed.
func renderMetadata(m nftmeta.Metadata, ok bool, kind evm.Kind) (tokenURI string, out nftMetadataFull) {
	if !ok {
		return "", nftMetadataFull{IndexStatus: nftmeta.StatusUnindexed}
	}
	out = nftMetadataFull{IndexStatus: m.IndexStatus, Name: m.Name, Symbol: m.Symbol, ImageURI: m.ImageURI,
		Description: m.Description, AnimationURI: m.AnimationURI, ExternalURL: m.ExternalURL, Background: m.Background}
	if out.IndexStatus == "" {
		out.IndexStatus = nftmeta.StatusUnindexed
	}
	if !m.LastUpdated.IsZero() {
		out.MetadataLastUpdatedTimestamp = m.LastUpdated.Unix()
	}
	if kind == evm.ERC1155 {
		out.Decimals, out.Properties = m.Decimals, m.Properties
	} else {
		out.Attributes = m.Attributes
	}
	return m.TokenURI, out
}

type erc721TokenBalance struct {
	Address      string          `json:"address"`
	Name         string          `json:"name"`
	Symbol       string          `json:"symbol"`
	ErcType      string          `json:"ercType"`
	TokenID      string          `json:"tokenId"`
	TokenURI     string          `json:"tokenUri"`
	Metadata     nftMetadataFull `json:"metadata"`
	OwnerAddress string          `json:"ownerAddress,omitempty"`
	ChainID      string          `json:"chainId"`
}

type erc1155TokenBalance struct {
	Address  string          `json:"address"`
	ErcType  string          `json:"ercType"`
	TokenID  string          `json:"tokenId"`
	TokenURI string          `json:"tokenUri"`
	Metadata nftMetadataFull `json:"metadata"`
	ChainID  string          `json:"chainId"`
	Balance  string          `json:"balance"`
}

type listErc721BalancesResponse struct {
	NextPageToken       string               `json:"nextPageToken,omitempty"`
	NativeTokenBalance  nativeTokenBalance   `json:"nativeTokenBalance"`
	Erc721TokenBalances []erc721TokenBalance `json:"erc721TokenBalances"`
}

type listErc1155BalancesResponse struct {
	NextPageToken        string                `json:"nextPageToken,omitempty"`
	NativeTokenBalance   nativeTokenBalance    `json:"nativeTokenBalance"`
	Erc1155TokenBalances []erc1155TokenBalance `json:"erc1155TokenBalances"`
}

type listCollectibleBalancesResponse struct {
	NextPageToken string `json:"nextPageToken,omitempty"`
	// CollectibleBalances holds erc721TokenBalance and erc1155TokenBalance
	// items.
	CollectibleBalances []any `json:"collectibleBalances"`
}

// erc721TokenFull and erc1155TokenFull are the hosted Erc721Token and
// Erc1155Token of the NFT routes (the transfers' token objects carry less).
type erc721TokenFull struct {
	Address      string          `json:"address"`
	Name         string          `json:"name"`
	Symbol       string          `json:"symbol"`
	ErcType      string          `json:"ercType"`
	TokenID      string          `json:"tokenId"`
	TokenURI     string          `json:"tokenUri"`
	Metadata     nftMetadataFull `json:"metadata"`
	OwnerAddress string          `json:"ownerAddress,omitempty"`
}

type erc1155TokenFull struct {
	Address  string          `json:"address"`
	ErcType  string          `json:"ercType"`
	TokenID  string          `json:"tokenId"`
	TokenURI string          `json:"tokenUri"`
	Metadata nftMetadataFull `json:"metadata"`
}

type listNftTokensResponse struct {
	NextPageToken string `json:"nextPageToken,omitempty"`
	// Tokens holds erc721TokenFull and erc1155TokenFull items.
	Tokens []any `json:"tokens"`
}

// nullJSON is tokenReputation's value: the reputation is unknown.
var nullJSON = json.RawMessage("null")

func nativeOf(c chains.Chain, balance *big.Int) nativeTokenBalance {
	return nativeTokenBalance{Name: c.NativeToken.Name, Symbol: c.NativeToken.Symbol, Decimals: c.NativeToken.Decimals,
		LogoURI: c.NativeToken.LogoURI, ChainID: c.EVMChainID, Balance: balance.String()}
}
