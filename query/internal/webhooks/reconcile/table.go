package reconcile

import (
	"encoding/hex"
	"sync"

	"github.com/google/uuid"

	"github.com/moraine-data/moraine/schemas/codec"
)

// topicEntry is what the topic holds for one key: its last record.
type topicEntry struct {
	version   uint64
	offset    int64
	partition int32
	live      bool   // false: the last record is a tombstone
	gen       uint32 // the last full pass that found the key in ClickHouse
}

// compactKey packs a key of UUID ids and a 20-byte address into 37 bytes
// (kind, id, address), so that a million watched addresses cost tens of
// megabytes, not hundreds. Keys that do not pack (ids that are not
// canonical UUIDs) live in a string map instead.
type compactKey [37]byte

const (
	kindWebhook = 1
	kindAddress = 2
	kindAccount = 3
)

func packUUID(dst []byte, s string) bool {
	u, err := uuid.Parse(s)
	if err != nil || u.String() != s {
		return false
	}
	copy(dst, u[:])
	return true
}

func pack(key string) (compactKey, bool) {
	var k compactKey
	wk, err := codec.ParseWatchKey(key)
	if err != nil {
		return k, false
	}
	switch wk.Kind {
	case codec.WatchKeyWebhook:
		k[0] = kindWebhook
		return k, packUUID(k[1:17], wk.WebhookID)
	case codec.WatchKeyAddress:
		k[0] = kindAddress
		if _, err := hex.Decode(k[17:], []byte(wk.Address[2:])); err != nil {
			return k, false
		}
		return k, packUUID(k[1:17], wk.WebhookID)
	case codec.WatchKeyAccount:
		k[0] = kindAccount
		return k, packUUID(k[1:17], wk.AccountID)
	}
	return k, false
}

func (k compactKey) String() string {
	id := uuid.UUID(k[1:17]).String()
	switch k[0] {
	case kindWebhook:
		return codec.WatchWebhookKey(id)
	case kindAddress:
		return codec.WatchAddressKey(id, "0x"+hex.EncodeToString(k[17:]))
	default:
		return codec.WatchAccountKey(id)
	}
}

// table is the topic's current state as read by the reconciler's
// kafkautil.TableReader.
type table struct {
	mu      sync.Mutex
	compact map[compactKey]topicEntry
	other   map[string]topicEntry
}

func newTable() *table {
	return &table{compact: map[compactKey]topicEntry{}, other: map[string]topicEntry{}}
}

// apply records e as key's last record and returns the number of keys.
func (t *table) apply(key string, e topicEntry) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if k, ok := pack(key); ok {
		if old, ok := t.compact[k]; ok {
			e.gen = old.gen
		}
		t.compact[k] = e
	} else {
		if old, ok := t.other[key]; ok {
			e.gen = old.gen
		}
		t.other[key] = e
	}
	return len(t.compact) + len(t.other)
}

// get returns the entry of key and marks it as seen by pass gen (0: no mark).
func (t *table) get(key string, gen uint32) (topicEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if k, ok := pack(key); ok {
		e, ok := t.compact[k]
		if ok && gen != 0 {
			e.gen = gen
			t.compact[k] = e
		}
		return e, ok
	}
	e, ok := t.other[key]
	if ok && gen != 0 {
		e.gen = gen
		t.other[key] = e
	}
	return e, ok
}

// unseen calls fn for every live key not marked by pass gen.
func (t *table) unseen(gen uint32, fn func(key string, e topicEntry)) {
	t.mu.Lock()
	var keys []string
	var entries []topicEntry
	for k, e := range t.compact {
		if e.live && e.gen != gen {
			keys, entries = append(keys, k.String()), append(entries, e)
		}
	}
	for k, e := range t.other {
		if e.live && e.gen != gen {
			keys, entries = append(keys, k), append(entries, e)
		}
	}
	t.mu.Unlock()
	for i := range keys {
		fn(keys[i], entries[i])
	}
}

// each calls fn for every entry, under the table's lock.
func (t *table) each(fn func(topicEntry)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.compact {
		fn(e)
	}
	for _, e := range t.other {
		fn(e)
	}
}

func (t *table) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.compact) + len(t.other)
}
