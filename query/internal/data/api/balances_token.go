package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/query/internal/server/pagetoken"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// Page tokens of the balance and NFT lists: pagetoken.Envelope under the
// domain "moraine-balance-page-token", whose body holds uvarints and raw
// bytes:
//
//	balanceList (kind = the route): chain id, holder (20 bytes), block,
//	            filter digest (8 bytes: the contract filter), last pair
//	            served (kind, token 20 bytes, token id 32 bytes)
//	collectionTokens: chain id, token (20 bytes), last token id served
//
// A balance list is a list at one block: the block is fixed by the first
// page (the indexed head when blockNumber is absent) and bound to the
// token, so the pages of one list never mix two blocks. The position is
// the last pair served, so the pages hold every pair once.
type balanceTokenKind uint8

const (
	tokenErc20Balances balanceTokenKind = iota + 1
	tokenErc721Balances
	tokenErc1155Balances
	tokenCollectibleBalances
	tokenCollectionTokens
)

var errBalanceToken = errors.New("api: invalid balance page token")

// balanceToken is the decoded body of a balance or NFT list token.
type balanceToken struct {
	kind    balanceTokenKind
	chainID uint64
	// holder (balance lists) or the collection (collectionTokens).
	address evm.Address
	block   uint64
	filter  [8]byte
	last    schema.BalancePair
}

type balanceTokens struct{ env *pagetoken.Envelope }

func newBalanceTokens(codec *pagetoken.Codec) *balanceTokens {
	return &balanceTokens{env: codec.Envelope("moraine-balance-page-token")}
}

func (c *balanceTokens) encode(t balanceToken) string {
	b := binary.AppendUvarint(nil, t.chainID)
	b = append(b, t.address[:]...)
	if t.kind != tokenCollectionTokens {
		b = binary.AppendUvarint(b, t.block)
		b = append(b, t.filter[:]...)
		b = append(b, t.last.Kind)
		b = append(b, t.last.Token[:]...)
	}
	b = append(b, t.last.TokenID[:]...)
	return c.env.Seal(uint8(t.kind), b)
}

func (c *balanceTokens) decode(s string, want balanceTokenKind) (balanceToken, error) {
	r, _, err := c.env.Open(s, uint8(want))
	if err != nil {
		return balanceToken{}, errBalanceToken
	}
	t := balanceToken{kind: want, chainID: r.Uvarint()}
	r.Fixed(t.address[:])
	if want != tokenCollectionTokens {
		t.block = r.Uvarint()
		r.Fixed(t.filter[:])
		t.last.Kind = r.Byte()
		r.Fixed(t.last.Token[:])
	}
	r.Fixed(t.last.TokenID[:])
	if r.Done() != nil {
		return balanceToken{}, errBalanceToken
	}
	return t, nil
}

// filterDigest binds a token to the contract filter of its list: the
// first 8 bytes of SHA-256 of the sorted addresses.
func filterDigest(tokens []evm.Address) (d [8]byte) {
	sorted := slices.Clone(tokens)
	slices.SortFunc(sorted, func(a, b evm.Address) int { return bytes.Compare(a[:], b[:]) })
	h := sha256.New()
	for _, a := range sorted {
		h.Write(a[:])
	}
	copy(d[:], h.Sum(nil))
	return d
}
