package webhookapi

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

// Page tokens of the two webhook lists: base64url (no padding) of
//
//	payload || HMAC-SHA256(key, "moraine-webhook-page-token\x00" || payload)[:16]
//
// with payload = version (1) | kind (1) | issued-at (uvarint, Unix s) | kind
// fields (uvarint-length-prefixed strings and uvarints):
//
//	kindWebhooks:  account id, status filter, cursor createdAt, cursor id
//	kindAddresses: account id, webhook id, cursor address (lowercase)
//	kindDeliveries: account id, webhook id, cursor attemptedAt, message id, attempt
//
// A token carries a position (the last row of the page), not an offset, so
// rows added or removed meanwhile never shift a later page. It is bound to
// the account (another account's token is refused), to the list and filter,
// signed with the server key every instance shares, and expires after a TTL.
type tokenKind uint8

const (
	kindWebhooks   tokenKind = 1
	kindAddresses  tokenKind = 2
	kindDeliveries tokenKind = 3

	tokenVersion = 1
	tokenMACLen  = 16
	tokenMaxLen  = 1024
)

var tokenDomain = []byte("moraine-webhook-page-token\x00")

var errBadToken = errors.New("webhookapi: invalid page token")

type pageToken struct {
	kind      tokenKind
	accountID string
	// kindWebhooks
	status    string
	createdAt uint64
	id        string
	// kindAddresses and kindDeliveries
	webhookID string
	address   string
	// kindDeliveries
	attemptedAt uint64
	messageID   string
	attempt     uint64
}

type tokenCodec struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

func newTokenCodec(key []byte, ttl time.Duration, now func() time.Time) (*tokenCodec, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("webhookapi: page-token key must be at least 32 bytes, got %d", len(key))
	}
	return &tokenCodec{key: append([]byte(nil), key...), ttl: ttl, now: now}, nil
}

func (c *tokenCodec) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(tokenDomain)
	m.Write(payload)
	return m.Sum(nil)[:tokenMACLen]
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func (c *tokenCodec) encode(t pageToken) string {
	b := []byte{tokenVersion, byte(t.kind)}
	b = binary.AppendUvarint(b, uint64(c.now().Unix()))
	b = appendString(b, t.accountID)
	switch t.kind {
	case kindWebhooks:
		b = appendString(b, t.status)
		b = binary.AppendUvarint(b, t.createdAt)
		b = appendString(b, t.id)
	case kindAddresses:
		b = appendString(b, t.webhookID)
		b = appendString(b, t.address)
	case kindDeliveries:
		b = appendString(b, t.webhookID)
		b = binary.AppendUvarint(b, t.attemptedAt)
		b = appendString(b, t.messageID)
		b = binary.AppendUvarint(b, t.attempt)
	}
	b = append(b, c.mac(b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (c *tokenCodec) decode(s string, want tokenKind) (pageToken, error) {
	if len(s) > tokenMaxLen {
		return pageToken{}, errBadToken
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < 2+tokenMACLen {
		return pageToken{}, errBadToken
	}
	payload, sig := raw[:len(raw)-tokenMACLen], raw[len(raw)-tokenMACLen:]
	if !hmac.Equal(sig, c.mac(payload)) || payload[0] != tokenVersion || tokenKind(payload[1]) != want {
		return pageToken{}, errBadToken
	}
	r := bytes.NewReader(payload[2:])
	bad := false
	uv := func() uint64 {
		v, err := binary.ReadUvarint(r)
		if err != nil {
			bad = true
		}
		return v
	}
	str := func() string {
		n := uv()
		if bad || n > uint64(r.Len()) {
			bad = true
			return ""
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			bad = true
		}
		return string(b)
	}
	t := pageToken{kind: want}
	issued := uv()
	t.accountID = str()
	switch want {
	case kindWebhooks:
		t.status = str()
		t.createdAt = uv()
		t.id = str()
	case kindAddresses:
		t.webhookID = str()
		t.address = str()
	case kindDeliveries:
		t.webhookID = str()
		t.attemptedAt = uv()
		t.messageID = str()
		t.attempt = uv()
	}
	if bad || r.Len() != 0 {
		return pageToken{}, errBadToken
	}
	if c.ttl > 0 && c.now().Sub(time.Unix(int64(issued), 0)) > c.ttl {
		return pageToken{}, errBadToken
	}
	return t, nil
}
