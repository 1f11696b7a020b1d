package watch_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/schemas/codec"
)

// TestVersionsRule checks the one rule on sequences of (key, version): a
// record below the highest version seen for its key is dropped, tombstones
// included; equal versions (a reconciler's republication) are applied.
func TestVersionsRule(t *testing.T) {
	type rec struct {
		key     string
		version uint64
		want    bool
	}
	a, b := codec.WatchAddressKey(hookA, addr(1)), codec.WatchAddressKey(hookA, addr(2))
	for _, tc := range []struct {
		name string
		recs []rec
	}{
		{"in order", []rec{{a, 1, true}, {a, 2, true}, {a, 3, true}}},
		{"a late older record is dropped", []rec{{a, 5, true}, {a, 3, false}, {a, 6, true}}},
		{"an identical republication is applied", []rec{{a, 5, true}, {a, 5, true}}},
		{"keys are independent", []rec{{a, 5, true}, {b, 1, true}, {b, 4, true}, {a, 4, false}}},
		{"the first record of a key is always applied", []rec{{b, 0, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := watch.NewVersions()
			high := map[string]uint64{}
			for i, r := range tc.recs {
				require.Equal(t, r.want, v.Admit([]byte(r.key), r.version), "record %d (%s v%d)", i, r.key, r.version)
				if r.want {
					high[r.key] = r.version
				}
				got, ok := v.Version([]byte(r.key))
				require.True(t, ok)
				require.Equal(t, high[r.key], got, "the version remembered after record %d", i)
			}
		})
	}
}

// TestVersionsTombstones: the version of a removal is remembered, so the
// record of the address from before the removal, arriving after it (a
// second instance's late produce, a reconciler's stale pass), cannot
// resurrect the address; a later re-add can.
func TestVersionsTombstones(t *testing.T) {
	v := watch.NewVersions()
	add := func(ver uint64) bool {
		r, err := watch.AddressRecord(accountdb.Address{WebhookID: hookA, Address: addr(1), Version: ver}, "43112")
		require.NoError(t, err)
		return v.AdmitRecord(r)
	}
	require.True(t, add(10))
	require.True(t, v.AdmitRecord(watch.Tombstone(codec.WatchAddressKey(hookA, addr(1)), 20)))
	require.False(t, add(10), "the address record from before its removal")
	require.False(t, add(19))
	require.True(t, add(21), "a re-add after the removal")
	require.Equal(t, 1, v.Len())
}
