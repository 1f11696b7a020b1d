package watchlist

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// EventTypeAddressActivity is the only webhook type the matcher serves.
const EventTypeAddressActivity = "address_activity"

// Webhook is an immutable snapshot of one webhook's settings. A change
// replaces the snapshot, so a matcher may keep a pointer after the table
// moved on.
type Webhook struct {
	ID        string
	AccountID string
	ChainID   uint64
	// Active is status ACTIVE (and event type address_activity): only
	// active webhooks produce activity.
	Active             bool
	IncludeInternalTxs bool
	IncludeLogs        bool
	// EventSignatures are topic0 filters (32 bytes each); empty means none.
	EventSignatures [][]byte
	// Confirmations is how many blocks must be on top of a block before its
	// activity is delivered (0: at once, retracted on a reorg).
	Confirmations uint32
}

// WebhookFrom converts a settings record.
func WebhookFrom(w *record.WatchedWebhook) *Webhook {
	return &Webhook{
		ID: w.GetWebhookId(), AccountID: w.GetAccountId(), ChainID: w.GetChainId(),
		Active: w.GetStatus() == record.WebhookStatus_WEBHOOK_STATUS_ACTIVE &&
			(w.GetEventType() == "" || w.GetEventType() == EventTypeAddressActivity),
		IncludeInternalTxs: w.GetIncludeInternalTxs(),
		IncludeLogs:        w.GetIncludeLogs(),
		EventSignatures:    w.GetEventSignatures(),
		Confirmations:      w.GetConfirmations(),
	}
}

// multiFlag marks an index value that names a list of several webhooks
// (t.multi) instead of one webhook: most addresses are watched by one
// webhook, and keeping the map value a plain uint32 keeps the million-entry
// map free of pointers, so the garbage collector never scans it.
const multiFlag = 1 << 31

// hookSlot is one webhook the table knows, by settings or by addresses.
type hookSlot struct {
	id       string
	settings *Webhook // nil until the settings record arrives, and after its tombstone
	refs     int      // (chain, address) entries that name this slot
}

// Table is the watch table: chain -> address -> webhooks, plus every
// webhook's settings. It is safe for one writer (Apply, called by the
// topic reader) and many readers (Read).
type Table struct {
	mu        sync.RWMutex
	slots     []hookSlot
	freeSlots []uint32
	byID      map[string]uint32
	chains    map[uint64]map[evm.Address]uint32
	multi     [][]uint32
	freeMulti []uint32
	versions  *watch.Versions

	addresses atomic.Int64
	webhooks  atomic.Int64
	m         *metrics
	logger    *slog.Logger
}

// Deps are the table's optional dependencies.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// New returns an empty table.
func New(deps Deps) *Table {
	t := &Table{byID: map[string]uint32{}, chains: map[uint64]map[evm.Address]uint32{}, versions: watch.NewVersions(), logger: deps.Logger}
	if t.logger == nil {
		t.logger = slog.New(slog.DiscardHandler)
	}
	t.logger = t.logger.With("component", "watchlist")
	if deps.Registerer != nil {
		t.m = newMetrics(deps.Registerer, t)
	}
	return t
}

// ErrMalformed is returned by Apply for a record it cannot use.
var ErrMalformed = errors.New("watchlist: malformed record")

// ApplyRecord applies one record of the address-watch topic (the
// kafkautil.TableReader callback) by the rule of watch.Versions: a record
// older than what the table has seen for its key (tombstones included) is
// dropped and counted as stale, so a late or republished record can
// neither resurrect a removed address nor reactivate a deactivated webhook.
// A malformed record is logged and counted.
func (t *Table) ApplyRecord(r *kgo.Record) {
	if !t.versions.AdmitRecord(r) {
		if t.m != nil {
			t.m.stale.Inc()
		}
		return
	}
	if err := t.Apply(r.Key, r.Value); err != nil {
		if t.m != nil {
			t.m.malformed.Inc()
		}
		t.logger.Warn("malformed address-watch record; its key is dropped from the table",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
	}
}

// Apply applies one record's key and value (nil value: a tombstone) to the
// table, unconditionally: the record replaces what its key held, a
// tombstone deletes the key. Records from the topic go through ApplyRecord,
// which decides first whether the record is current; tests and benchmarks
// that feed the table in order call Apply.
//
// A malformed record (bad key, undecodable value, value of the wrong kind)
// deletes what its key held and returns an error wrapping ErrMalformed: the
// key's latest state is unknown, and watching nothing is the safe reading.
// Account records are ignored (delivery reads them).
func (t *Table) Apply(key, value []byte) error {
	k, err := codec.ParseWatchKey(string(key))
	if err != nil {
		return fmt.Errorf("%w: key %q: %v", ErrMalformed, key, err)
	}
	switch k.Kind {
	case codec.WatchKeyAccount:
		t.count("account")
		return nil
	case codec.WatchKeyWebhook:
		return t.applyWebhook(k.WebhookID, value)
	case codec.WatchKeyAddress:
		return t.applyAddress(k.WebhookID, k.Address, value)
	}
	return fmt.Errorf("%w: key %q", ErrMalformed, key)
}

func (t *Table) count(kind string) {
	if t.m != nil {
		t.m.applied.WithLabelValues(kind).Inc()
	}
}

func (t *Table) applyWebhook(id string, value []byte) error {
	var w *Webhook
	var bad error
	if value != nil {
		e, err := codec.DecodeWatchEntry(value)
		switch {
		case err != nil:
			bad = fmt.Errorf("%w: webhook %s: %v", ErrMalformed, id, err)
		case e.GetWebhook() == nil:
			bad = fmt.Errorf("%w: webhook key %s holds a %T", ErrMalformed, id, e.GetEntry())
		case e.GetWebhook().GetWebhookId() != "" && e.GetWebhook().GetWebhookId() != id:
			bad = fmt.Errorf("%w: webhook key %s holds webhook %s", ErrMalformed, id, e.GetWebhook().GetWebhookId())
		default:
			w = WebhookFrom(e.GetWebhook())
			w.ID = id
		}
	}
	if w == nil {
		t.count("tombstone")
	} else {
		t.count("webhook")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if w == nil {
		if i, ok := t.byID[id]; ok && t.slots[i].settings != nil {
			t.slots[i].settings = nil
			t.webhooks.Add(-1)
			t.release(i)
		}
		return bad
	}
	i := t.slot(id)
	if t.slots[i].settings == nil {
		t.webhooks.Add(1)
	}
	t.slots[i].settings = w
	return nil
}

func (t *Table) applyAddress(id, hexAddr string, value []byte) error {
	var addr evm.Address
	if _, err := hex.Decode(addr[:], []byte(hexAddr[2:])); err != nil {
		return fmt.Errorf("%w: address key %s/%s: %v", ErrMalformed, id, hexAddr, err)
	}
	var chain uint64
	var bad error
	live := false
	if value != nil {
		e, err := codec.DecodeWatchEntry(value)
		a := e.GetAddress()
		switch {
		case err != nil:
			bad = fmt.Errorf("%w: address %s/%s: %v", ErrMalformed, id, hexAddr, err)
		case a == nil:
			bad = fmt.Errorf("%w: address key %s/%s holds a %T", ErrMalformed, id, hexAddr, e.GetEntry())
		case a.GetWebhookId() != "" && a.GetWebhookId() != id,
			len(a.GetAddress()) != 0 && string(a.GetAddress()) != string(addr[:]):
			bad = fmt.Errorf("%w: address key %s/%s holds %s/%x", ErrMalformed, id, hexAddr, a.GetWebhookId(), a.GetAddress())
		default:
			chain, live = a.GetChainId(), true
		}
	}
	if live {
		t.count("address")
	} else {
		t.count("tombstone")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	i, known := t.byID[id]
	if !live {
		if known {
			t.unindex(i, addr, 0, false)
			t.release(i)
		}
		return bad
	}
	if !known {
		i = t.slot(id)
	}
	// A webhook's chain never changes; should a record say otherwise, the
	// last one wins here too.
	t.unindex(i, addr, chain, true)
	m := t.chains[chain]
	if m == nil {
		m = map[evm.Address]uint32{}
		t.chains[chain] = m
	}
	if t.add(m, addr, i) {
		t.slots[i].refs++
		t.addresses.Add(1)
	}
	return nil
}

// unindex removes (addr -> slot i) from every chain, except keep when
// skip is set.
func (t *Table) unindex(i uint32, addr evm.Address, keep uint64, skip bool) {
	for chain, m := range t.chains {
		if skip && chain == keep {
			continue
		}
		if t.remove(m, addr, i) {
			t.slots[i].refs--
			t.addresses.Add(-1)
			if len(m) == 0 {
				delete(t.chains, chain)
			}
		}
	}
}

// slot returns the index of webhook id, allocating one.
func (t *Table) slot(id string) uint32 {
	if i, ok := t.byID[id]; ok {
		return i
	}
	var i uint32
	if n := len(t.freeSlots); n > 0 {
		i = t.freeSlots[n-1]
		t.freeSlots = t.freeSlots[:n-1]
		t.slots[i] = hookSlot{id: id}
	} else {
		i = uint32(len(t.slots))
		if i >= multiFlag {
			panic("watchlist: more than 2^31 webhooks")
		}
		t.slots = append(t.slots, hookSlot{id: id})
	}
	t.byID[id] = i
	return i
}

// release frees slot i once nothing refers to it.
func (t *Table) release(i uint32) {
	s := &t.slots[i]
	if s.settings != nil || s.refs > 0 {
		return
	}
	delete(t.byID, s.id)
	*s = hookSlot{}
	t.freeSlots = append(t.freeSlots, i)
}

// add records that slot i watches addr in m; false if it already did.
func (t *Table) add(m map[evm.Address]uint32, addr evm.Address, i uint32) bool {
	v, ok := m[addr]
	switch {
	case !ok:
		m[addr] = i
		return true
	case v&multiFlag == 0:
		if v == i {
			return false
		}
		m[addr] = multiFlag | t.newMulti(v, i)
		return true
	}
	l := v &^ multiFlag
	for _, x := range t.multi[l] {
		if x == i {
			return false
		}
	}
	t.multi[l] = append(t.multi[l], i)
	return true
}

// remove deletes (addr -> slot i) from m; false if it was not there.
func (t *Table) remove(m map[evm.Address]uint32, addr evm.Address, i uint32) bool {
	v, ok := m[addr]
	switch {
	case !ok:
		return false
	case v&multiFlag == 0:
		if v != i {
			return false
		}
		delete(m, addr)
		return true
	}
	l := v &^ multiFlag
	list := t.multi[l]
	for j, x := range list {
		if x != i {
			continue
		}
		list = append(list[:j], list[j+1:]...)
		if len(list) == 1 {
			m[addr] = list[0]
			t.multi[l] = nil
			t.freeMulti = append(t.freeMulti, l)
		} else {
			t.multi[l] = list
		}
		return true
	}
	return false
}

func (t *Table) newMulti(a, b uint32) uint32 {
	list := []uint32{a, b}
	if n := len(t.freeMulti); n > 0 {
		l := t.freeMulti[n-1]
		t.freeMulti = t.freeMulti[:n-1]
		t.multi[l] = list
		return l
	}
	t.multi = append(t.multi, list)
	return uint32(len(t.multi) - 1)
}

// Addresses is the number of (webhook, address) entries.
func (t *Table) Addresses() int { return int(t.addresses.Load()) }

// Webhooks is the number of webhooks whose settings the table holds.
func (t *Table) Webhooks() int { return int(t.webhooks.Load()) }

// Watches reports whether any address is watched on chain.
func (t *Table) Watches(chain uint64) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.chains[chain]) > 0
}

// Read calls fn with a consistent view of the table, under a read lock:
// fn must not keep the view, and should be quick (it delays Apply).
func (t *Table) Read(fn func(View)) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	fn(View{t: t})
}

// View is a read-locked view of the table, valid only inside Read.
type View struct{ t *Table }

// Chain returns the addresses watched on chain.
func (v View) Chain(chain uint64) ChainView {
	return ChainView{t: v.t, m: v.t.chains[chain]}
}

// Webhook returns the settings of webhook slot i (from ChainView.Lookup),
// or nil when its settings record has not arrived or was deleted.
func (v View) Webhook(i uint32) *Webhook { return v.t.slots[i].settings }

// ChainView is one chain's address index.
type ChainView struct {
	t *Table
	m map[evm.Address]uint32
}

// Empty reports whether nothing is watched on the chain.
func (c ChainView) Empty() bool { return len(c.m) == 0 }

// Lookup appends to buf the webhook slots watching a and returns it.
func (c ChainView) Lookup(a evm.Address, buf []uint32) []uint32 {
	v, ok := c.m[a]
	switch {
	case !ok:
		return buf
	case v&multiFlag == 0:
		return append(buf, v)
	}
	return append(buf, c.t.multi[v&^multiFlag]...)
}

// Watching returns the ids of the webhooks watching a on chain (any
// status), for tests and debugging.
func (t *Table) Watching(chain uint64, a evm.Address) []string {
	var ids []string
	t.Read(func(v View) {
		for _, i := range v.Chain(chain).Lookup(a, nil) {
			ids = append(ids, t.slots[i].id)
		}
	})
	return ids
}

// Webhook returns the settings of webhook id, or nil.
func (t *Table) Webhook(id string) *Webhook {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if i, ok := t.byID[id]; ok {
		return t.slots[i].settings
	}
	return nil
}
