package codec

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/moraine-data/moraine/schemas/record"
)

// WatchEntrySchema is the SchemaHeader value of address-watch records
// (tombstones carry it too).
const WatchEntrySchema = "moraine.v1.WatchEntry"

// VersionHeader is the Kafka header holding the decimal version of the
// ClickHouse row an address-watch record mirrors. It is on every record,
// tombstones included (a tombstone has no value to carry it).
const VersionHeader = "version"

// accountKeyPrefix starts the key of account records; webhook ids are UUIDs
// and never start with it.
const accountKeyPrefix = "account:"

// WatchKeyKind says what an address-watch key names.
type WatchKeyKind int

// Key kinds.
const (
	WatchKeyWebhook WatchKeyKind = iota + 1
	WatchKeyAddress
	WatchKeyAccount
)

// WatchWebhookKey is the key of a webhook's settings record.
func WatchWebhookKey(webhookID string) string { return webhookID }

// WatchAddressKey is the key of one watched address; address is 0x + 40 hex
// in any case and is lower-cased.
func WatchAddressKey(webhookID, address string) string {
	return webhookID + "/" + strings.ToLower(address)
}

// WatchAccountKey is the key of an account's record.
func WatchAccountKey(accountID string) string { return accountKeyPrefix + accountID }

// WatchKey is a parsed address-watch key.
type WatchKey struct {
	Kind WatchKeyKind
	// WebhookID for webhook and address keys.
	WebhookID string
	// Address (0x + 40 lowercase hex) for address keys.
	Address string
	// AccountID for account keys.
	AccountID string
}

// ErrBadWatchKey is returned for a key that is none of the three forms.
var ErrBadWatchKey = errors.New("codec: malformed address-watch key")

// ParseWatchKey parses a key written by the Watch*Key functions.
func ParseWatchKey(key string) (WatchKey, error) {
	switch {
	case strings.HasPrefix(key, accountKeyPrefix):
		id := key[len(accountKeyPrefix):]
		if id == "" {
			return WatchKey{}, ErrBadWatchKey
		}
		return WatchKey{Kind: WatchKeyAccount, AccountID: id}, nil
	case key == "":
		return WatchKey{}, ErrBadWatchKey
	}
	id, addr, ok := strings.Cut(key, "/")
	if !ok {
		return WatchKey{Kind: WatchKeyWebhook, WebhookID: key}, nil
	}
	if id == "" || len(addr) != 42 || !strings.HasPrefix(addr, "0x") || strings.ToLower(addr) != addr {
		return WatchKey{}, ErrBadWatchKey
	}
	if _, err := hex.DecodeString(addr[2:]); err != nil {
		return WatchKey{}, ErrBadWatchKey
	}
	return WatchKey{Kind: WatchKeyAddress, WebhookID: id, Address: addr}, nil
}

// WatchPartitionKey returns the part of an address-watch key that picks the
// partition: the webhook id for webhook and address keys (so all records of
// a webhook share a partition and stay in order), the whole key otherwise.
func WatchPartitionKey(key []byte) []byte {
	if bytes.HasPrefix(key, []byte(accountKeyPrefix)) {
		return key
	}
	if i := bytes.IndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return key
}

// EncodeWatchEntry encodes e deterministically.
func EncodeWatchEntry(e *record.WatchEntry) ([]byte, error) {
	if e.GetEntry() == nil {
		return nil, errors.New("encode watch entry: empty entry")
	}
	return encode("watch entry", e)
}

// DecodeWatchEntry decodes an address-watch value; callers handle nil values
// (tombstones) before calling it.
func DecodeWatchEntry(b []byte) (*record.WatchEntry, error) {
	e, err := decode[record.WatchEntry]("watch entry", b)
	if err != nil {
		return nil, err
	}
	if e.GetEntry() == nil {
		return nil, errors.New("decode watch entry: empty entry")
	}
	return e, nil
}

// FormatVersion and ParseVersion convert the VersionHeader value.
func FormatVersion(v uint64) []byte { return strconv.AppendUint(nil, v, 10) }

// ParseVersion parses a VersionHeader value.
func ParseVersion(b []byte) (uint64, error) {
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("codec: bad %s header %q", VersionHeader, b)
	}
	return v, nil
}
