package watch

import (
	"hash/fnv"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Versions is the one rule by which every reader of the address-watch topic
// (the matcher's watch table, delivery's settings) applies records:
//
//	A record is applied when its version is at least the highest version
//	the reader has seen for its key, tombstones included; otherwise it is
//	dropped. Records of equal version are applied in topic order.
//
// Why versions and not topic order: a record is only ever built from a
// ClickHouse row (see the package doc), and ClickHouse's latest row of a key
// is the row with the highest version (ReplacingMergeTree(version), read
// with FINAL). So the highest version a reader has seen is never newer than
// the truth, and a lower one is a row ClickHouse has already replaced: a
// record produced late by a slower instance, or one republished by a
// reconciler that read ClickHouse before the newer row was written. Applying
// it would resurrect a removed address or reactivate a deactivated webhook
// until the reconciler's next pass; dropping it is what ClickHouse's own
// rule would do. Clock skew between writers cannot make this rule refuse the
// truth: Clock.Next always writes above the row it read, and between two
// truly concurrent writes the higher version wins in ClickHouse too.
//
// Tombstones keep their version: the key's versions stay known after a
// removal, so an older record arriving after the tombstone is dropped. The
// reader therefore remembers one version per key it ever saw in this
// process, 16 bytes of hash and 8 of version each, in a map without
// pointers (the garbage collector does not scan it). On a restart the
// compacted topic holds each key's newest record last, so nothing is lost.
//
// A caller that changes its own state ahead of the topic (delivery's
// deactivation, settings.Table.SetInactive) Admits that version first, so
// the record still in flight from before the change is dropped when it
// arrives.
type Versions struct {
	mu   sync.Mutex
	seen map[[16]byte]uint64
}

// NewVersions returns a Versions that has seen nothing.
func NewVersions() *Versions { return &Versions{seen: map[[16]byte]uint64{}} }

// keyHash is the 128-bit FNV-1a hash of key: collisions are out of reach
// (2^-64 for a billion keys), and a fixed-size key keeps the map pointer-free.
func keyHash(key []byte) [16]byte {
	h := fnv.New128a()
	h.Write(key)
	var out [16]byte
	h.Sum(out[:0])
	return out
}

// Admit applies the rule to a record of key at version: it reports whether
// the record is to be applied and, if so, remembers version as the key's.
func (v *Versions) Admit(key []byte, version uint64) bool {
	k := keyHash(key)
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur, ok := v.seen[k]; ok && version < cur {
		return false
	}
	v.seen[k] = version
	return true
}

// AdmitRecord is Admit for an address-watch record, whose version is its
// version header (RecordVersion; tombstones carry it too).
func (v *Versions) AdmitRecord(r *kgo.Record) bool { return v.Admit(r.Key, RecordVersion(r)) }

// Version is the highest version remembered for key (false: none), for a
// writer that changes a key on top of what it holds without a version of
// its own (the matcher's replays add messages to a block's stream entry).
func (v *Versions) Version(key []byte) (uint64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	cur, ok := v.seen[keyHash(key)]
	return cur, ok
}

// Forget drops key's remembered version, for state whose keys come and go
// for good (the matcher's per-block stream entries) and whose reader
// catches up before it acts, so that the map does not grow for ever. The
// address-watch readers never forget: a removal must keep refusing the
// records from before it.
func (v *Versions) Forget(key []byte) {
	k := keyHash(key)
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.seen, k)
}

// Len is the number of keys whose version is remembered.
func (v *Versions) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.seen)
}
