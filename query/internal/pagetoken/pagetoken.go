// Package pagetoken encodes the opaque, tamper-evident nextPageToken of the
// list endpoints.
//
// A token is base64url (no padding) of
//
//	payload || HMAC-SHA256(key, "moraine-page-token\x00" || payload)[:16]
//
// where payload is
//
//	version (1 byte, =1) | kind (1 byte) | issued-at (uvarint, unix seconds) | kind fields
//
// and the kind fields are uvarints and raw bytes:
//
//	KindChainBlocks: chain id, cursor (the next block number to read: number <= cursor)
//	KindAllBlocks:   network filter (1 byte: 0 all, 1 mainnet, 2 testnet),
//	                 count, then count pairs of (chain id, cursor)
//	KindBlockTxs:    chain id, block number, block hash (32 bytes), cursor (next tx index)
//
// The token carries a position, not a page number: rows appended after the
// first page (new blocks have higher numbers) never shift a later page, so a
// page boundary neither skips nor repeats a row. Tokens are bound to their
// kind (and chain, network filter or block, checked by the caller), signed
// with a server key shared by every instance, and expire after a TTL.
package pagetoken

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// Kind is the list a token belongs to.
type Kind uint8

// Token kinds.
const (
	KindChainBlocks Kind = 1
	KindAllBlocks   Kind = 2
	KindBlockTxs    Kind = 3
)

// Network filters of the all-chains list.
const (
	NetworkAll     uint8 = 0
	NetworkMainnet uint8 = 1
	NetworkTestnet uint8 = 2
)

const (
	version   = 1
	macLen    = 16
	maxLen    = 8 << 10 // a token longer than this is not ours
	maxChains = 1000
)

var macDomain = []byte("moraine-page-token\x00")

// ErrInvalid is returned for any token that does not decode, verify, match
// the expected kind, or has expired. Callers answer 400.
var ErrInvalid = errors.New("pagetoken: invalid page token")

// Position is one chain's cursor in an all-chains token.
type Position struct {
	ChainID uint64
	Cursor  uint64
}

// Token is the decoded cursor.
type Token struct {
	Kind     Kind
	IssuedAt time.Time

	ChainID     uint64   // KindChainBlocks, KindBlockTxs
	Cursor      uint64   // KindChainBlocks: next block number; KindBlockTxs: next tx index
	BlockNumber uint64   // KindBlockTxs
	BlockHash   [32]byte // KindBlockTxs

	Network   uint8      // KindAllBlocks
	Positions []Position // KindAllBlocks
}

// Codec signs and verifies tokens.
type Codec struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

// NewCodec returns a codec with key (at least 32 bytes); ttl 0 means tokens
// never expire. now may be nil (time.Now).
func NewCodec(key []byte, ttl time.Duration, now func() time.Time) (*Codec, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("pagetoken: key must be at least 32 bytes, got %d", len(key))
	}
	if now == nil {
		now = time.Now
	}
	return &Codec{key: append([]byte(nil), key...), ttl: ttl, now: now}, nil
}

func (c *Codec) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(macDomain)
	m.Write(payload)
	return m.Sum(nil)[:macLen]
}

// Encode returns the token string for t; IssuedAt is set to now.
func (c *Codec) Encode(t Token) string {
	b := []byte{version, byte(t.Kind)}
	b = binary.AppendUvarint(b, uint64(c.now().Unix()))
	switch t.Kind {
	case KindChainBlocks:
		b = binary.AppendUvarint(b, t.ChainID)
		b = binary.AppendUvarint(b, t.Cursor)
	case KindAllBlocks:
		b = append(b, t.Network)
		b = binary.AppendUvarint(b, uint64(len(t.Positions)))
		for _, p := range t.Positions {
			b = binary.AppendUvarint(b, p.ChainID)
			b = binary.AppendUvarint(b, p.Cursor)
		}
	case KindBlockTxs:
		b = binary.AppendUvarint(b, t.ChainID)
		b = binary.AppendUvarint(b, t.BlockNumber)
		b = append(b, t.BlockHash[:]...)
		b = binary.AppendUvarint(b, t.Cursor)
	}
	b = append(b, c.mac(b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode verifies s and returns its token, which must be of kind want.
func (c *Codec) Decode(s string, want Kind) (Token, error) {
	if len(s) > maxLen {
		return Token{}, ErrInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < 2+macLen {
		return Token{}, ErrInvalid
	}
	payload, sig := raw[:len(raw)-macLen], raw[len(raw)-macLen:]
	if !hmac.Equal(sig, c.mac(payload)) {
		return Token{}, ErrInvalid
	}
	if payload[0] != version || Kind(payload[1]) != want {
		return Token{}, ErrInvalid
	}
	r := bytes.NewReader(payload[2:])
	var bad bool
	uv := func() uint64 {
		v, err := binary.ReadUvarint(r)
		if err != nil {
			bad = true
		}
		return v
	}
	t := Token{Kind: want}
	issued := uv()
	t.IssuedAt = time.Unix(int64(issued), 0)
	switch want {
	case KindChainBlocks:
		t.ChainID = uv()
		t.Cursor = uv()
	case KindAllBlocks:
		nb, err := r.ReadByte()
		if err != nil || nb > NetworkTestnet {
			return Token{}, ErrInvalid
		}
		t.Network = nb
		n := uv()
		if bad || n > maxChains {
			return Token{}, ErrInvalid
		}
		for range n {
			t.Positions = append(t.Positions, Position{ChainID: uv(), Cursor: uv()})
		}
	case KindBlockTxs:
		t.ChainID = uv()
		t.BlockNumber = uv()
		if _, err := io.ReadFull(r, t.BlockHash[:]); err != nil {
			bad = true
		}
		t.Cursor = uv()
	default:
		return Token{}, ErrInvalid
	}
	if bad || r.Len() != 0 {
		return Token{}, ErrInvalid
	}
	if c.ttl > 0 && c.now().Sub(t.IssuedAt) > c.ttl {
		return Token{}, fmt.Errorf("%w: expired", ErrInvalid)
	}
	return t, nil
}
