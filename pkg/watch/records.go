package watch

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// Record builders: the one mapping from ClickHouse rows to address-watch
// records, used by the request path and the reconciler alike, so both
// always publish the same bytes for the same row.

func newRecord(key string, value []byte, version uint64) *kgo.Record {
	return &kgo.Record{
		Key:   []byte(key),
		Value: value,
		Headers: []kgo.RecordHeader{
			{Key: codec.SchemaHeader, Value: []byte(codec.WatchEntrySchema)},
			{Key: codec.VersionHeader, Value: codec.FormatVersion(version)},
		},
	}
}

func parseHex(s string, n int) ([]byte, error) {
	b, err := hex.DecodeString(strings.TrimPrefix(strings.ToLower(s), "0x"))
	if err != nil || len(b) != n {
		return nil, fmt.Errorf("watch: %q is not 0x + %d hex bytes", s, n)
	}
	return b, nil
}

// WebhookRecord is the settings record of w.
func WebhookRecord(w accountdb.Webhook) (*kgo.Record, error) {
	chain, err := strconv.ParseUint(w.ChainID, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("watch: webhook %s: chain id %q: %w", w.ID, w.ChainID, err)
	}
	status := record.WebhookStatus_WEBHOOK_STATUS_INACTIVE
	if w.Status == accountdb.StatusActive {
		status = record.WebhookStatus_WEBHOOK_STATUS_ACTIVE
	}
	sigs := make([][]byte, 0, len(w.EventSignatures))
	for _, s := range w.EventSignatures {
		b, err := parseHex(s, 32)
		if err != nil {
			return nil, fmt.Errorf("watch: webhook %s: %w", w.ID, err)
		}
		sigs = append(sigs, b)
	}
	v, err := codec.EncodeWatchEntry(&record.WatchEntry{Version: w.Version, Entry: &record.WatchEntry_Webhook{Webhook: &record.WatchedWebhook{
		WebhookId: w.ID, AccountId: w.AccountID, ChainId: chain, EventType: w.EventType, Status: status, Url: w.URL,
		IncludeInternalTxs: w.IncludeInternalTxs, IncludeLogs: w.IncludeLogs, EventSignatures: sigs,
		CreatedAtUnixMs: int64(w.CreatedAt), Confirmations: w.Confirmations,
	}}})
	if err != nil {
		return nil, err
	}
	return newRecord(codec.WatchWebhookKey(w.ID), v, w.Version), nil
}

// AddressRecord is the record of one (webhook, address) row: a tombstone
// when the address was removed. chainID is the webhook's chain.
func AddressRecord(a accountdb.Address, chainID string) (*kgo.Record, error) {
	key := codec.WatchAddressKey(a.WebhookID, a.Address)
	if a.Removed {
		return newRecord(key, nil, a.Version), nil
	}
	chain, err := strconv.ParseUint(chainID, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("watch: webhook %s: chain id %q: %w", a.WebhookID, chainID, err)
	}
	addr, err := parseHex(a.Address, 20)
	if err != nil {
		return nil, err
	}
	v, err := codec.EncodeWatchEntry(&record.WatchEntry{Version: a.Version, Entry: &record.WatchEntry_Address{Address: &record.WatchedAddress{
		WebhookId: a.WebhookID, ChainId: chain, Address: addr,
	}}})
	if err != nil {
		return nil, err
	}
	return newRecord(key, v, a.Version), nil
}

// AccountVersion is the version of an account's record: it mirrors two rows
// (the account and its secret), so it is the newer of the two.
func AccountVersion(a accountdb.Account, s accountdb.Secret) uint64 { return max(a.Version, s.Version) }

// AccountRecord is the record of an account and its secret (zero Secret
// before the first one).
func AccountRecord(a accountdb.Account, s accountdb.Secret) (*kgo.Record, error) {
	ver := AccountVersion(a, s)
	v, err := codec.EncodeWatchEntry(&record.WatchEntry{Version: ver, Entry: &record.WatchEntry_Account{Account: &record.WatchedAccount{
		AccountId: a.ID, Plan: a.Plan, SharedSecret: s.Secret,
	}}})
	if err != nil {
		return nil, err
	}
	return newRecord(codec.WatchAccountKey(a.ID), v, ver), nil
}

// Tombstone is the record that deletes key, at version.
func Tombstone(key string, version uint64) *kgo.Record { return newRecord(key, nil, version) }

// RecordVersion reads a record's version header (0 if absent or bad).
func RecordVersion(r *kgo.Record) uint64 {
	for _, h := range r.Headers {
		if h.Key == codec.VersionHeader {
			v, _ := codec.ParseVersion(h.Value)
			return v
		}
	}
	return 0
}
