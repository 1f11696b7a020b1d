package reconcile

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/schemas/codec"
)

func TestCompactKeysRoundTrip(t *testing.T) {
	const id = "6f1c7a52-7e8e-4a39-9d59-2f0f4c8b1a01"
	for _, key := range []string{
		codec.WatchWebhookKey(id),
		codec.WatchAddressKey(id, "0x9702230A8Ea53601f5cD2dc00fDBc13d4dF4A8c7"),
		codec.WatchAccountKey(id),
	} {
		k, ok := pack(key)
		require.True(t, ok, key)
		require.Equal(t, key, k.String())
	}
	// Keys that do not pack still work, in the string map.
	for _, key := range []string{"not-a-uuid", "6F1C7A52-7E8E-4A39-9D59-2F0F4C8B1A01", "account:x", "x/0x9702230a8ea53601f5cd2dc00fdbc13d4df4a8c7"} {
		_, ok := pack(key)
		require.False(t, ok, key)
	}
	tb := newTable()
	require.Equal(t, 1, tb.apply("not-a-uuid", topicEntry{version: 3, offset: 7, partition: 1, live: true}))
	require.Equal(t, 2, tb.apply(codec.WatchWebhookKey(id), topicEntry{version: 4, offset: 2, partition: 0, live: true}))
	e, ok := tb.get("not-a-uuid", 9)
	require.True(t, ok)
	require.Equal(t, uint64(3), e.version)
	var unseen []string
	tb.unseen(9, func(key string, _ topicEntry) { unseen = append(unseen, key) })
	require.Equal(t, []string{codec.WatchWebhookKey(id)}, unseen)
	require.Equal(t, 2, tb.size())
}
