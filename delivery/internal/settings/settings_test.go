package settings

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/schemas/codec"
)

func TestApply(t *testing.T) {
	tb := New(kafkautil.Config{Brokers: "127.0.0.1:1"}, slog.New(slog.DiscardHandler))
	const id = "6f1c7a52-7e8e-4a39-9d59-2f0f4c8b1a01"
	wh := func(status, url string, v uint64) *kgo.Record {
		r, err := watch.WebhookRecord(accountdb.Webhook{ID: id, AccountID: "acc", ChainID: "43112", URL: url, Status: status, Version: v})
		require.NoError(t, err)
		return r
	}
	tb.Apply(wh("active", "https://Example.com:8443/hook?x=1", 5))
	w, ok := tb.Webhook(id)
	require.True(t, ok)
	require.True(t, w.Active)
	require.Equal(t, "example.com:8443", w.Host)
	require.Equal(t, "acc", w.AccountID)

	tb.Apply(wh("inactive", "https://example.com/hook", 4)) // older: ignored
	w, _ = tb.Webhook(id)
	require.True(t, w.Active)

	tb.SetInactive(id, 7) // delivery's own deactivation
	tb.Apply(wh("active", "https://example.com/hook", 6))
	w, _ = tb.Webhook(id)
	require.False(t, w.Active, "a record older than the local change does not undo it")
	tb.Apply(wh("active", "ftp://example.com/hook", 8))
	w, _ = tb.Webhook(id)
	require.True(t, w.Active)
	require.Nil(t, w.URL, "not an http(s) url")

	acc, err := watch.AccountRecord(accountdb.Account{ID: "acc", Plan: "pro", Version: 1}, accountdb.Secret{Secret: "ab", Version: 2})
	require.NoError(t, err)
	tb.Apply(acc)
	a, ok := tb.Account("acc")
	require.True(t, ok)
	require.Equal(t, Account{ID: "acc", Plan: "pro", Secret: "ab", Version: 2}, a)

	// Address records are skipped; a tombstone deletes.
	addr, err := watch.AddressRecord(accountdb.Address{WebhookID: id, Address: "0x9702230a8ea53601f5cd2dc00fdbc13d4df4a8c7", Version: 9}, "43112")
	require.NoError(t, err)
	tb.Apply(addr)
	tb.Apply(&kgo.Record{Key: []byte(codec.WatchWebhookKey(id)), Headers: []kgo.RecordHeader{{Key: codec.VersionHeader, Value: codec.FormatVersion(9)}}})
	_, ok = tb.Webhook(id)
	require.False(t, ok)
	hooks, accounts := tb.Size()
	require.Equal(t, 0, hooks)
	require.Equal(t, 1, accounts)
}

// TestStaleRecordsAreDropped checks pkg/watch's rule (Versions) in
// delivery's table: a stale or replayed record cannot reactivate a webhook
// deactivated through the topic or by delivery itself, nor bring back a
// deleted webhook or an account's old secret.
func TestStaleRecordsAreDropped(t *testing.T) {
	tb := New(kafkautil.Config{Brokers: "127.0.0.1:1"}, slog.New(slog.DiscardHandler))
	const id = "6f1c7a52-7e8e-4a39-9d59-2f0f4c8b1a01"
	wh := func(status string, v uint64) *kgo.Record {
		r, err := watch.WebhookRecord(accountdb.Webhook{ID: id, AccountID: "acc", ChainID: "43112", URL: "https://example.com/hook", Status: status, Version: v})
		require.NoError(t, err)
		return r
	}
	active := func() bool { w, ok := tb.Webhook(id); return ok && w.Active }

	tb.Apply(wh(accountdb.StatusActive, 10))
	tb.Apply(wh(accountdb.StatusInactive, 20))
	tb.Apply(wh(accountdb.StatusActive, 10)) // replayed
	require.False(t, active(), "a replayed record reactivated a deactivated webhook")
	tb.Apply(wh(accountdb.StatusActive, 30))
	require.True(t, active())

	tb.SetInactive(id, 40)
	tb.Apply(wh(accountdb.StatusActive, 35)) // in flight before delivery's deactivation
	require.False(t, active(), "a record older than delivery's own deactivation undid it")
	tb.SetInactive(id, 38) // an older local change is refused too
	tb.Apply(wh(accountdb.StatusActive, 41))
	require.True(t, active(), "a reactivation after the deactivation is applied")

	tb.Apply(watch.Tombstone(codec.WatchWebhookKey(id), 50))
	tb.Apply(wh(accountdb.StatusActive, 41))
	_, ok := tb.Webhook(id)
	require.False(t, ok, "a stale record brought a deleted webhook back")

	acc := func(secret string, v uint64) *kgo.Record {
		r, err := watch.AccountRecord(accountdb.Account{ID: "acc", Plan: "free", Version: 1}, accountdb.Secret{Secret: secret, Version: v})
		require.NoError(t, err)
		return r
	}
	tb.Apply(acc("new", 9))
	tb.Apply(acc("old", 5))
	a, _ := tb.Account("acc")
	require.Equal(t, "new", a.Secret, "a stale record restored an old secret")
}
