package webhookapi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/moraine-data/moraine/query/internal/server/pagetoken"
)

// Page tokens of the webhook lists: pagetoken.Envelope (signed, versioned,
// expiring) under the domain "moraine-webhook-page-token", whose body holds
// (uvarint-length-prefixed strings and uvarints):
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
)

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
	env *pagetoken.Envelope
}

func newTokenCodec(key []byte, ttl time.Duration, now func() time.Time) (*tokenCodec, error) {
	env, err := pagetoken.NewEnvelope(key, "moraine-webhook-page-token", ttl, now)
	if err != nil {
		return nil, fmt.Errorf("webhookapi: %w", err)
	}
	return &tokenCodec{env: env}, nil
}

func (c *tokenCodec) encode(t pageToken) string {
	b := pagetoken.AppendString(nil, t.accountID)
	switch t.kind {
	case kindWebhooks:
		b = pagetoken.AppendString(b, t.status)
		b = binary.AppendUvarint(b, t.createdAt)
		b = pagetoken.AppendString(b, t.id)
	case kindAddresses:
		b = pagetoken.AppendString(b, t.webhookID)
		b = pagetoken.AppendString(b, t.address)
	case kindDeliveries:
		b = pagetoken.AppendString(b, t.webhookID)
		b = binary.AppendUvarint(b, t.attemptedAt)
		b = pagetoken.AppendString(b, t.messageID)
		b = binary.AppendUvarint(b, t.attempt)
	}
	return c.env.Seal(uint8(t.kind), b)
}

func (c *tokenCodec) decode(s string, want tokenKind) (pageToken, error) {
	r, _, err := c.env.Open(s, uint8(want))
	if err != nil {
		return pageToken{}, errBadToken
	}
	t := pageToken{kind: want, accountID: r.String()}
	switch want {
	case kindWebhooks:
		t.status = r.String()
		t.createdAt = r.Uvarint()
		t.id = r.String()
	case kindAddresses:
		t.webhookID = r.String()
		t.address = r.String()
	case kindDeliveries:
		t.webhookID = r.String()
		t.attemptedAt = r.Uvarint()
		t.messageID = r.String()
		t.attempt = r.Uvarint()
	}
	if r.Done() != nil {
		return pageToken{}, errBadToken
	}
	return t, nil
}
