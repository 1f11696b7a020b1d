package watchlist

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

const (
	hookA = "401da7d9-d6d7-46c8-b431-72ff1e1543f4"
	hookB = "263942d1-74a4-4416-aeb4-948b9b9bb7cc"
	addr1 = "0x9702230a8ea53601f5cd2dc00fdbc13d4df4a8c7"
	addr2 = "0xb97ef9ef8734c71904d8002f8b6bc66dd9c48a6e"
)

func address(s string) evm.Address {
	b, err := hex.DecodeString(strings.TrimPrefix(strings.ToLower(s), "0x"))
	if err != nil {
		panic(err)
	}
	a, _ := evm.AddressFrom(b)
	return a
}

// op is one record: key and value (nil: tombstone).
type op struct {
	key   string
	value []byte
}

func webhookOp(id string, chain uint64, status record.WebhookStatus) op {
	v, err := codec.EncodeWatchEntry(&record.WatchEntry{Version: 1, Entry: &record.WatchEntry_Webhook{Webhook: &record.WatchedWebhook{
		WebhookId: id, AccountId: "acc", ChainId: chain, EventType: "address_activity", Status: status,
	}}})
	if err != nil {
		panic(err)
	}
	return op{codec.WatchWebhookKey(id), v}
}

func addrOp(id string, chain uint64, a string) op {
	addr := address(a)
	v, err := codec.EncodeWatchEntry(&record.WatchEntry{Version: 1, Entry: &record.WatchEntry_Address{Address: &record.WatchedAddress{
		WebhookId: id, ChainId: chain, Address: addr[:],
	}}})
	if err != nil {
		panic(err)
	}
	return op{codec.WatchAddressKey(id, a), v}
}

func tomb(key string) op { return op{key: key} }

const active, inactive = record.WebhookStatus_WEBHOOK_STATUS_ACTIVE, record.WebhookStatus_WEBHOOK_STATUS_INACTIVE

// TestApply checks last-write-wins per key and tombstones on sequences of
// records; want lists, per (chain, address), the watching webhooks.
func TestApply(t *testing.T) {
	type watch struct {
		chain uint64
		addr  string
		hooks []string
	}
	for _, tc := range []struct {
		name      string
		ops       []op
		want      []watch
		addresses int
		webhooks  int
		active    map[string]bool
	}{
		{
			name:      "address before its webhook is indexed; the webhook arrives later",
			ops:       []op{addrOp(hookA, 43114, addr1), webhookOp(hookA, 43114, active)},
			want:      []watch{{43114, addr1, []string{hookA}}, {43113, addr1, nil}},
			addresses: 1, webhooks: 1, active: map[string]bool{hookA: true},
		},
		{
			name:      "checksummed key spelling is the same address",
			ops:       []op{addrOp(hookA, 43114, "0x9702230A8Ea53601f5cD2dc00fDBc13d4dF4A8c7"), addrOp(hookA, 43114, addr1)},
			want:      []watch{{43114, addr1, []string{hookA}}},
			addresses: 1,
		},
		{
			name:      "tombstone removes the address",
			ops:       []op{addrOp(hookA, 43114, addr1), addrOp(hookA, 43114, addr2), tomb(hookA + "/" + addr1)},
			want:      []watch{{43114, addr1, nil}, {43114, addr2, []string{hookA}}},
			addresses: 1,
		},
		{
			name:      "re-added after its tombstone",
			ops:       []op{addrOp(hookA, 43114, addr1), tomb(hookA + "/" + addr1), addrOp(hookA, 43114, addr1)},
			want:      []watch{{43114, addr1, []string{hookA}}},
			addresses: 1,
		},
		{
			name:      "two webhooks on one address, one removed",
			ops:       []op{addrOp(hookA, 43114, addr1), addrOp(hookB, 43114, addr1), addrOp(hookB, 43114, addr2), tomb(hookA + "/" + addr1)},
			want:      []watch{{43114, addr1, []string{hookB}}, {43114, addr2, []string{hookB}}},
			addresses: 2,
		},
		{
			name:      "two webhooks on one address, both kept",
			ops:       []op{addrOp(hookA, 43114, addr1), addrOp(hookB, 43114, addr1), addrOp(hookB, 43114, addr1)},
			want:      []watch{{43114, addr1, []string{hookA, hookB}}},
			addresses: 2,
		},
		{
			name:      "last settings win: deactivated keeps its addresses",
			ops:       []op{webhookOp(hookA, 43114, active), addrOp(hookA, 43114, addr1), webhookOp(hookA, 43114, inactive)},
			want:      []watch{{43114, addr1, []string{hookA}}},
			addresses: 1, webhooks: 1, active: map[string]bool{hookA: false},
		},
		{
			name:     "reactivated",
			ops:      []op{webhookOp(hookA, 43114, inactive), webhookOp(hookA, 43114, active)},
			webhooks: 1,
			active:   map[string]bool{hookA: true},
		},
		{
			name:      "webhook tombstone drops its settings",
			ops:       []op{webhookOp(hookA, 43114, active), addrOp(hookA, 43114, addr1), tomb(hookA)},
			want:      []watch{{43114, addr1, []string{hookA}}},
			addresses: 1, webhooks: 0,
		},
		{
			name:      "a chain change of an address record: the last one wins",
			ops:       []op{addrOp(hookA, 43114, addr1), addrOp(hookA, 43113, addr1)},
			want:      []watch{{43114, addr1, nil}, {43113, addr1, []string{hookA}}},
			addresses: 1,
		},
		{
			name:      "tombstones of unknown keys and account records change nothing",
			ops:       []op{tomb(hookA + "/" + addr1), tomb(hookB), tomb("account:x"), {key: "account:x", value: []byte{1}}},
			addresses: 0,
		},
		{
			name:      "a malformed value deletes what its key held",
			ops:       []op{addrOp(hookA, 43114, addr1), {key: hookA + "/" + addr1, value: []byte{0xff, 0xff}}},
			want:      []watch{{43114, addr1, nil}},
			addresses: 0,
		},
		{
			name:      "a webhook record under an address key is malformed",
			ops:       []op{addrOp(hookA, 43114, addr1), {key: hookA + "/" + addr1, value: webhookOp(hookA, 43114, active).value}},
			want:      []watch{{43114, addr1, nil}},
			addresses: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl := New(Deps{})
			for _, o := range tc.ops {
				_ = tbl.Apply([]byte(o.key), o.value)
			}
			for _, w := range tc.want {
				got := tbl.Watching(w.chain, address(w.addr))
				slices.Sort(got)
				want := slices.Clone(w.hooks)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("chain %d %s: watched by %v, want %v", w.chain, w.addr, got, want)
				}
			}
			if tbl.Addresses() != tc.addresses {
				t.Errorf("Addresses() = %d, want %d", tbl.Addresses(), tc.addresses)
			}
			if tbl.Webhooks() != tc.webhooks {
				t.Errorf("Webhooks() = %d, want %d", tbl.Webhooks(), tc.webhooks)
			}
			for id, want := range tc.active {
				w := tbl.Webhook(id)
				if w == nil || w.Active != want {
					t.Errorf("webhook %s = %+v, want active=%v", id, w, want)
				}
			}
		})
	}
}

func TestApplyErrors(t *testing.T) {
	tbl := New(Deps{})
	for _, o := range []op{
		{key: "", value: []byte{1}},
		{key: hookA + "/0x12", value: []byte{1}},
		{key: hookA, value: []byte{0xff}},
		{key: hookA, value: addrOp(hookA, 1, addr1).value},
		{key: hookA + "/" + addr1, value: addrOp(hookB, 1, addr1).value},
		{key: hookA + "/" + addr1, value: addrOp(hookA, 1, addr2).value},
		{key: hookB, value: webhookOp(hookA, 1, active).value},
	} {
		if err := tbl.Apply([]byte(o.key), o.value); !errors.Is(err, ErrMalformed) {
			t.Errorf("Apply(%q) = %v, want ErrMalformed", o.key, err)
		}
	}
	if tbl.Addresses() != 0 || tbl.Webhooks() != 0 {
		t.Fatalf("malformed records left state: %d addresses, %d webhooks", tbl.Addresses(), tbl.Webhooks())
	}
}

// TestSlotsAreReused checks that webhooks that come and go do not grow the
// table: slots and multi-webhook lists are recycled.
func TestSlotsAreReused(t *testing.T) {
	tbl := New(Deps{})
	for round := 0; round < 100; round++ {
		for h := 0; h < 3; h++ {
			id := fmt.Sprintf("hook-%d-%d", round, h)
			_ = tbl.Apply([]byte(codec.WatchAddressKey(id, addr1)), addrOp(id, 1, addr1).value)
		}
		for h := 0; h < 3; h++ {
			_ = tbl.Apply([]byte(codec.WatchAddressKey(fmt.Sprintf("hook-%d-%d", round, h), addr1)), nil)
		}
	}
	if len(tbl.slots) > 3 || len(tbl.multi) > 1 || len(tbl.byID) != 0 || len(tbl.chains) != 0 {
		t.Fatalf("table grew: %d slots, %d lists, %d ids, %d chains", len(tbl.slots), len(tbl.multi), len(tbl.byID), len(tbl.chains))
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	tbl := New(Deps{Registerer: reg})
	for _, o := range []op{webhookOp(hookA, 1, active), addrOp(hookA, 1, addr1), addrOp(hookA, 1, addr2), tomb(hookA + "/" + addr2)} {
		_ = tbl.Apply([]byte(o.key), o.value)
	}
	if n, err := testutil.GatherAndCount(reg, "moraine_processor_watchlist_addresses", "moraine_processor_watchlist_webhooks"); err != nil || n != 2 {
		t.Fatalf("gauges: %d, %v", n, err)
	}
	if got := testutil.ToFloat64(tbl.m.applied.WithLabelValues("address")); got != 2 {
		t.Errorf("applied{address} = %v", got)
	}
	if got := testutil.ToFloat64(tbl.m.applied.WithLabelValues("tombstone")); got != 1 {
		t.Errorf("applied{tombstone} = %v", got)
	}
}

// TestStaleRecordsAreDropped drives ApplyRecord, the topic reader's entry
// point, with the records pkg/watch builds from ClickHouse rows, and checks
// pkg/watch's rule (Versions): a stale or replayed record can neither
// resurrect a removed address nor reactivate a deactivated webhook, and a
// newer change still applies.
func TestStaleRecordsAreDropped(t *testing.T) {
	reg := prometheus.NewRegistry()
	tbl := New(Deps{Registerer: reg})
	hook := func(status string, v uint64) *kgo.Record {
		r, err := watch.WebhookRecord(accountdb.Webhook{ID: hookA, AccountID: "acc", ChainID: "43114", EventType: "address_activity", Status: status, Version: v})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	addrRec := func(v uint64, removed bool) *kgo.Record {
		r, err := watch.AddressRecord(accountdb.Address{WebhookID: hookA, Address: addr1, Version: v, Removed: removed}, "43114")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	watching := func() bool { return len(tbl.Watching(43114, address(addr1))) == 1 }
	active := func() bool { w := tbl.Webhook(hookA); return w != nil && w.Active }

	tbl.ApplyRecord(hook(accountdb.StatusActive, 10))
	tbl.ApplyRecord(addrRec(11, false))
	if !watching() || !active() {
		t.Fatal("the webhook and its address are not in the table")
	}
	tbl.ApplyRecord(addrRec(20, true))
	tbl.ApplyRecord(hook(accountdb.StatusInactive, 21))
	// Late records from before the changes: one produced by a slower
	// instance, one republished by a reconciler that read ClickHouse early.
	tbl.ApplyRecord(addrRec(11, false))
	tbl.ApplyRecord(hook(accountdb.StatusActive, 10))
	tbl.ApplyRecord(addrRec(19, false))
	if watching() {
		t.Error("a stale record resurrected a removed address")
	}
	if active() {
		t.Error("a stale record reactivated a deactivated webhook")
	}
	if got := testutil.ToFloat64(tbl.m.stale); got != 3 {
		t.Errorf("stale_records_total = %v, want 3", got)
	}
	// Newer changes apply.
	tbl.ApplyRecord(addrRec(30, false))
	tbl.ApplyRecord(hook(accountdb.StatusActive, 31))
	if !watching() || !active() {
		t.Error("a newer re-add or reactivation was dropped")
	}
}
