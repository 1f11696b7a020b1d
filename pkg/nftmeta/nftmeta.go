// Package nftmeta is NFT metadata as moraine stores and serves it: the names
// of one NFT (Ref), what the API renders of it (Metadata), and the indexing
// statuses of the hosted API's NftTokenMetadataStatus.
//
// The metadata worker (fetching tokenURI/uri documents) writes it; the query
// routes that render NFTs read it through Reader.
package nftmeta

import (
	"math/big"
	"time"

	"github.com/moraine-data/moraine/pkg/evm"
)

// The values of the spec's NftTokenMetadataStatus.
const (
	StatusUnknown                 = "UNKNOWN"
	StatusMissingToken            = "MISSING_TOKEN"
	StatusInvalidTokenURI         = "INVALID_TOKEN_URI"
	StatusInvalidTokenURIScheme   = "INVALID_TOKEN_URI_SCHEME"
	StatusUnreachableTokenURI     = "UNREACHABLE_TOKEN_URI"
	StatusThrottledTokenURI       = "THROTTLED_TOKEN_URI"
	StatusMetadataContentTooLarge = "METADATA_CONTENT_TOO_LARGE"
	StatusInvalidMetadata         = "INVALID_METADATA"
	StatusInvalidMetadataJSON     = "INVALID_METADATA_JSON"
	StatusIndexed                 = "INDEXED"
	StatusUnindexed               = "UNINDEXED"
)

// ReindexInterval is how often reindexNft may be asked of one NFT ("once
// per hour for each NFT token"): the API refuses a request within it of the
// last one it accepted, and the metadata worker skips one that reaches it
// within it of the last reindex it fetched.
const ReindexInterval = time.Hour

// Statuses lists every NftTokenMetadataStatus value in the spec's order.
var Statuses = []string{
	StatusUnknown, StatusMissingToken, StatusInvalidTokenURI, StatusInvalidTokenURIScheme,
	StatusUnreachableTokenURI, StatusThrottledTokenURI, StatusMetadataContentTooLarge,
	StatusInvalidMetadata, StatusInvalidMetadataJSON, StatusIndexed, StatusUnindexed,
}

// Ref names one NFT.
type Ref struct {
	ChainID  uint64
	Contract evm.Address
	TokenID  string // decimal, no leading zeros ("0" for zero)
}

// Metadata is what the API renders of one NFT (Erc721TokenMetadata /
// Erc1155TokenMetadata of the spec).
type Metadata struct {
	TokenURI    string    // as the contract answered ("" when not read yet or the call failed)
	IndexStatus string    // one of Statuses; StatusUnindexed when never fetched
	LastUpdated time.Time // zero when never fetched (then metadataLastUpdatedTimestamp is omitted)

	Name, Symbol, Description, ImageURI, AnimationURI, ExternalURL, Background string

	Attributes string // ERC-721: the JSON text of the document's "attributes" ("" when absent)
	Properties string // ERC-1155: the JSON text of the document's "properties" ("" when absent)
	Decimals   *int   // ERC-1155 "decimals" when the document has it
}

// maxUint256 bounds token ids: they are uint256 on chain.
var maxUint256 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

// ParseTokenID reads a token id as the API accepts it (decimal digits, at
// most 2^256-1) and returns it in the canonical form of Ref.TokenID
// (no leading zeros); ok is false for anything else.
func ParseTokenID(s string) (id string, ok bool) {
	if s == "" || len(s) > 78 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return "", false
		}
	}
	n, ok := new(big.Int).SetString(s, 10)
	if !ok || n.Cmp(maxUint256) > 0 {
		return "", false
	}
	return n.String(), true
}

// TokenIDFromWord is the canonical decimal form of a 32-byte big-endian
// token id word (as transfer logs carry it).
func TokenIDFromWord(word []byte) string { return new(big.Int).SetBytes(word).String() }
