// Package pagetoken encodes the opaque, tamper-evident nextPageToken of the
// list endpoints. Envelope is the signed, versioned, expiring wrapper every
// list uses (the webhook lists lay out their own bodies in it); Codec is
// the block lists' body on top of it.
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

// Envelope signs and verifies token bodies; each list type lays out its own
// body (this package's Token, the webhook lists' tokens). A sealed token is
// base64url (no padding) of
//
//	version (1) | kind (1) | issued-at (uvarint, Unix s) | body | HMAC-SHA256(key, domain || all before)[:16]
//
// The domain separates token families signed with the same key.
type Envelope struct {
	key    []byte
	domain []byte
	ttl    time.Duration
	now    func() time.Time
}

// NewEnvelope returns an envelope with key (at least 32 bytes) and domain;
// ttl 0 means tokens never expire. now may be nil (time.Now).
func NewEnvelope(key []byte, domain string, ttl time.Duration, now func() time.Time) (*Envelope, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("pagetoken: key must be at least 32 bytes, got %d", len(key))
	}
	if now == nil {
		now = time.Now
	}
	return &Envelope{key: append([]byte(nil), key...), domain: []byte(domain + "\x00"), ttl: ttl, now: now}, nil
}

func (e *Envelope) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, e.key)
	m.Write(e.domain)
	m.Write(payload)
	return m.Sum(nil)[:macLen]
}

// Seal returns the token for body of kind, issued now.
func (e *Envelope) Seal(kind uint8, body []byte) string {
	b := []byte{version, kind}
	b = binary.AppendUvarint(b, uint64(e.now().Unix()))
	b = append(b, body...)
	b = append(b, e.mac(b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Open verifies s (signature, version, kind, age) and returns a reader of
// its body and when it was issued.
func (e *Envelope) Open(s string, kind uint8) (*Reader, time.Time, error) {
	if len(s) > maxLen {
		return nil, time.Time{}, ErrInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < 2+macLen {
		return nil, time.Time{}, ErrInvalid
	}
	payload, sig := raw[:len(raw)-macLen], raw[len(raw)-macLen:]
	if !hmac.Equal(sig, e.mac(payload)) || payload[0] != version || payload[1] != kind {
		return nil, time.Time{}, ErrInvalid
	}
	r := &Reader{r: bytes.NewReader(payload[2:])}
	issued := time.Unix(int64(r.Uvarint()), 0)
	if r.bad {
		return nil, time.Time{}, ErrInvalid
	}
	if e.ttl > 0 && e.now().Sub(issued) > e.ttl {
		return nil, time.Time{}, fmt.Errorf("%w: expired", ErrInvalid)
	}
	return r, issued, nil
}

// AppendString appends s with its uvarint length, for a body.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Reader reads a token body; any malformed read makes Done fail.
type Reader struct {
	r   *bytes.Reader
	bad bool
}

// Uvarint reads a uvarint.
func (r *Reader) Uvarint() uint64 {
	v, err := binary.ReadUvarint(r.r)
	if err != nil {
		r.bad = true
	}
	return v
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	b, err := r.r.ReadByte()
	if err != nil {
		r.bad = true
	}
	return b
}

// Fixed fills dst.
func (r *Reader) Fixed(dst []byte) {
	if _, err := io.ReadFull(r.r, dst); err != nil {
		r.bad = true
	}
}

// String reads a string written by AppendString.
func (r *Reader) String() string {
	n := r.Uvarint()
	if r.bad || n > uint64(r.r.Len()) {
		r.bad = true
		return ""
	}
	b := make([]byte, n)
	r.Fixed(b)
	return string(b)
}

// Done reports ErrInvalid unless every read succeeded and the body is used up.
func (r *Reader) Done() error {
	if r.bad || r.r.Len() != 0 {
		return ErrInvalid
	}
	return nil
}

// Codec signs and verifies the block lists' tokens.
type Codec struct {
	env *Envelope
}

// NewCodec returns a codec with key (at least 32 bytes); ttl 0 means tokens
// never expire. now may be nil (time.Now).
func NewCodec(key []byte, ttl time.Duration, now func() time.Time) (*Codec, error) {
	env, err := NewEnvelope(key, "moraine-page-token", ttl, now)
	if err != nil {
		return nil, err
	}
	return &Codec{env: env}, nil
}

// Envelope returns an envelope with the codec's key, lifetime and clock
// under another domain, for lists that lay out their own token bodies.
func (c *Codec) Envelope(domain string) *Envelope {
	e := *c.env
	e.domain = []byte(domain + "\x00")
	return &e
}

// Encode returns the token string for t; IssuedAt is set to now.
func (c *Codec) Encode(t Token) string {
	var b []byte
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
	return c.env.Seal(uint8(t.Kind), b)
}

// Decode verifies s and returns its token, which must be of kind want.
func (c *Codec) Decode(s string, want Kind) (Token, error) {
	r, issued, err := c.env.Open(s, uint8(want))
	if err != nil {
		return Token{}, err
	}
	t := Token{Kind: want, IssuedAt: issued}
	switch want {
	case KindChainBlocks:
		t.ChainID = r.Uvarint()
		t.Cursor = r.Uvarint()
	case KindAllBlocks:
		t.Network = r.Byte()
		n := r.Uvarint()
		if t.Network > NetworkTestnet || n > maxChains {
			return Token{}, ErrInvalid
		}
		for range n {
			t.Positions = append(t.Positions, Position{ChainID: r.Uvarint(), Cursor: r.Uvarint()})
		}
	case KindBlockTxs:
		t.ChainID = r.Uvarint()
		t.BlockNumber = r.Uvarint()
		r.Fixed(t.BlockHash[:])
		t.Cursor = r.Uvarint()
	default:
		return Token{}, ErrInvalid
	}
	if err := r.Done(); err != nil {
		return Token{}, err
	}
	return t, nil
}
