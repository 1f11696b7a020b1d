// Package sign computes the signature headers of a webhook delivery
// (CONTRACT.md section 5.4 and the decisions table; docs/webhook-signatures.md
// is the receivers' guide).
//
// Every message is signed twice with one HMAC-SHA256 key:
//
//	x-signature:        base64(HMAC-SHA256(key, body))
//	webhook-id:         the messageId
//	webhook-timestamp:  Unix seconds of the attempt
//	webhook-signature:  "v1," + base64(HMAC-SHA256(key, webhook-id + "." + webhook-timestamp + "." + body))
//
// x-signature is the hosted service's header; the other three are Standard
// Webhooks (https://www.standardwebhooks.com), which let a receiver reject
// replays by the timestamp. base64 is the standard alphabet with padding.
//
// The body is the payload exactly as delivery sends it: RFC 8785 canonical
// JSON, so the raw body and its canonical form are the same bytes and both
// of the hosted service's verifier readings (raw body, canonicalized JSON)
// agree.
//
// The key is the account's shared secret (64 lowercase hex characters)
// read in one of two ways, chosen per deployment:
//
//	hex   (default) the 32 bytes the hex string encodes: the official docs'
//	      and AvaCloud SDK's isValidSignature reading;
//	utf8  the 64 bytes of the string itself: the ChainKit TypeScript SDK's
//	      validateWebhook reading.
//
// Standard Webhooks libraries take the key as "whsec_" + base64(key bytes).
//
// The webhook stream (moraine extensions, docs/webhook-stream.md) adds:
//
//	moraine-sequence:      the webhook's sequence number of the message (decimal)
//	moraine-message-kind:  activity or retraction
//	moraine-replay:        the replay job's id, on replayed messages only
//	moraine-signature:     "v1," + base64(HMAC-SHA256(key, webhook-id + "." + webhook-timestamp + "." +
//	                       moraine-sequence + "." + moraine-message-kind + "." + moraine-replay + "." + body))
//
// so a receiver can trust the sequence it uses to find gaps; the body, and
// with it x-signature and webhook-signature, stays the hosted service's.
//
// An account without a secret cannot be signed for: delivery then sends
// no x-signature and no webhook-signature (see package pipeline).
//
// testdata/vectors.json holds test vectors (secret, encoding, body,
// messageId, timestamp, expected headers), checked by TestVectors and
// published in docs/webhook-signatures.md.
package sign

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
)

// Header names.
const (
	HeaderSignature         = "x-signature"
	HeaderWebhookID         = "webhook-id"
	HeaderWebhookTimestamp  = "webhook-timestamp"
	HeaderWebhookSignature  = "webhook-signature"
	standardWebhooksVersion = "v1,"
)

// Encoding says how a shared secret becomes HMAC key bytes.
type Encoding string

// Key encodings.
const (
	Hex  Encoding = "hex"
	UTF8 Encoding = "utf8"
)

// ParseEncoding validates a --delivery.signature-key-encoding value.
func ParseEncoding(s string) (Encoding, error) {
	switch Encoding(s) {
	case Hex, UTF8:
		return Encoding(s), nil
	}
	return "", fmt.Errorf("sign: key encoding %q: want hex or utf8", s)
}

// ErrNoSecret is returned when the account has no shared secret.
var ErrNoSecret = errors.New("sign: no shared secret")

// Key returns the HMAC key of secret under enc. A secret that is not
// valid hex under Hex is an error (the API only ever stores 64 hex
// characters).
func Key(secret string, enc Encoding) ([]byte, error) {
	if secret == "" {
		return nil, ErrNoSecret
	}
	switch enc {
	case UTF8:
		return []byte(secret), nil
	case Hex, "":
		k, err := hex.DecodeString(secret)
		if err != nil {
			return nil, fmt.Errorf("sign: shared secret is not hex: %w", err)
		}
		return k, nil
	}
	return nil, fmt.Errorf("sign: unknown key encoding %q", enc)
}

// Stream header names (moraine extensions).
const (
	HeaderSequence        = "moraine-sequence"
	HeaderMessageKind     = "moraine-message-kind"
	HeaderReplay          = "moraine-replay"
	HeaderStreamSignature = "moraine-signature"
)

// Message kinds (moraine-message-kind).
const (
	KindActivity   = "activity"
	KindRetraction = "retraction"
)

// Headers are the signature headers of one attempt.
type Headers struct {
	Signature        string // x-signature
	WebhookID        string // webhook-id
	WebhookTimestamp string // webhook-timestamp
	WebhookSignature string // webhook-signature
	// The stream's (empty on messages without a sequence, written before
	// sequences existed).
	Sequence        string // moraine-sequence
	MessageKind     string // moraine-message-kind
	Replay          string // moraine-replay
	StreamSignature string // moraine-signature
}

// Stream is what the stream headers carry.
type Stream struct {
	// Sequence is the webhook's number of the message; 0: none.
	Sequence uint64
	// Kind is KindActivity or KindRetraction.
	Kind string
	// ReplayID is the replay job of a replayed message, else "".
	ReplayID string
}

// WithStream adds the stream headers of s to h (from Sign or Unsigned),
// signed with key when key is not nil.
func WithStream(h Headers, key []byte, s Stream, body []byte) Headers {
	if s.Sequence == 0 {
		return h
	}
	h.Sequence = strconv.FormatUint(s.Sequence, 10)
	h.MessageKind = s.Kind
	h.Replay = s.ReplayID
	if key != nil {
		m := hmac.New(sha256.New, key)
		for _, part := range []string{h.WebhookID, h.WebhookTimestamp, h.Sequence, h.MessageKind, h.Replay} {
			m.Write([]byte(part))
			m.Write([]byte{'.'})
		}
		m.Write(body)
		h.StreamSignature = standardWebhooksVersion + base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	return h
}

// Sign computes the headers of body for messageID at unixSeconds with key
// (from Key).
func Sign(key []byte, messageID string, unixSeconds int64, body []byte) Headers {
	ts := strconv.FormatInt(unixSeconds, 10)
	m := hmac.New(sha256.New, key)
	m.Write(body)
	sig := base64.StdEncoding.EncodeToString(m.Sum(nil))
	m.Reset()
	m.Write([]byte(messageID))
	m.Write([]byte{'.'})
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	std := standardWebhooksVersion + base64.StdEncoding.EncodeToString(m.Sum(nil))
	return Headers{Signature: sig, WebhookID: messageID, WebhookTimestamp: ts, WebhookSignature: std}
}

// Unsigned are the headers of an attempt without a key: the Standard
// Webhooks id and timestamp only.
func Unsigned(messageID string, unixSeconds int64) Headers {
	return Headers{WebhookID: messageID, WebhookTimestamp: strconv.FormatInt(unixSeconds, 10)}
}

// Verify checks an x-signature value against body and key in constant time
// (receivers' reference; tests and the benchmark receiver use it).
func Verify(key, body []byte, signature string) bool {
	got, err := base64.StdEncoding.DecodeString(signature)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}
