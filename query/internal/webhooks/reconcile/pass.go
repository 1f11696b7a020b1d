package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/schemas/codec"
)

// pass is one reconciliation: what differs between ClickHouse and the topic.
type pass struct {
	w      *Reconciler
	ends   map[int32]int64
	cutoff uint64
	gen    uint32

	accounts []string
	webhooks []accountdb.Webhook
	addrs    map[string][]accountdb.Address // by webhook id
	deferred int
}

// needs reports whether key must be republished: the topic's last record
// is not ClickHouse's state (live at version, or absent/tombstone when
// !live). Keys whose last record arrived after the pass began are left
// alone (a writer is at work on them), and so are rows younger than the
// grace period (their writer may still be producing them).
func (p *pass) needs(key string, live bool, version uint64) bool {
	e, ok := p.w.table.get(key, p.gen)
	if ok && e.offset >= p.ends[e.partition] {
		return false
	}
	if live {
		if ok && e.live && e.version == version {
			return false
		}
	} else if !ok || !e.live {
		return false
	}
	if version >= p.cutoff {
		p.deferred++
		return false
	}
	return true
}

// Reconcile makes the topic agree with ClickHouse: it reads the topic up to
// its current end, reads ClickHouse, and republishes every key whose last
// record differs from ClickHouse's latest row. A full pass checks every
// key and also tombstones live keys ClickHouse does not have at all; an
// incremental pass checks every webhook and account and the addresses
// changed within Lookback (or since the oldest change this process failed
// to publish).
func (w *Reconciler) Reconcile(ctx context.Context, full bool) (err error) {
	start := w.now()
	mode := "incremental"
	if full {
		mode = "full"
	}
	defer func() {
		res := "ok"
		if err != nil {
			res = "error"
		}
		w.metrics.runs.WithLabelValues(mode, res).Inc()
		w.metrics.runDuration.WithLabelValues(mode).Observe(time.Since(start).Seconds())
	}()
	ends, err := w.catchUp(ctx)
	if err != nil {
		return err
	}
	p := &pass{w: w, ends: ends, addrs: map[string][]accountdb.Address{}}
	p.cutoff = uint64(start.Add(-w.cfg.Grace).UnixNano())
	since := uint64(start.Add(-w.cfg.Lookback).UnixNano())
	if v, ok := w.oldestPending(); ok && v <= since {
		since = v - 1
	}
	if full {
		w.gen++
		p.gen = w.gen
	}

	accounts, err := w.store.Accounts(ctx)
	if err != nil {
		return err
	}
	secrets, err := w.store.AllSecrets(ctx)
	if err != nil {
		return err
	}
	secretOf := make(map[string]accountdb.Secret, len(secrets))
	for _, s := range secrets {
		secretOf[s.AccountID] = s
	}
	for _, a := range accounts {
		if p.needs(codec.WatchAccountKey(a.ID), true, watch.AccountVersion(a, secretOf[a.ID])) {
			p.accounts = append(p.accounts, a.ID)
		}
	}
	webhooks, err := w.store.AllWebhooks(ctx)
	if err != nil {
		return err
	}
	byID := make(map[string]accountdb.Webhook, len(webhooks))
	for _, wh := range webhooks {
		byID[wh.ID] = wh
		if p.needs(codec.WatchWebhookKey(wh.ID), true, wh.Version) {
			p.webhooks = append(p.webhooks, wh)
		}
	}
	visit := func(a accountdb.Address) error {
		// An address of a webhook ClickHouse does not have is a leftover
		// of a create that failed before its webhook row: never published.
		_, known := byID[a.WebhookID]
		if p.needs(codec.WatchAddressKey(a.WebhookID, a.Address), known && !a.Removed, a.Version) {
			p.addrs[a.WebhookID] = append(p.addrs[a.WebhookID], a)
		}
		return nil
	}
	if full {
		err = w.store.AllAddresses(ctx, visit)
	} else {
		err = w.store.AddressChangesSince(ctx, since, visit)
	}
	if err != nil {
		return err
	}
	if err := p.fix(ctx, byID); err != nil {
		return err
	}
	if full {
		if err := p.tombstonePhantoms(ctx); err != nil {
			return err
		}
	}
	w.settle(p.cutoff)
	return nil
}

func (p *pass) publish(ctx context.Context, kind string, recs []*kgo.Record) error {
	if err := p.w.Publish(ctx, recs); err != nil {
		return err
	}
	p.w.metrics.republished.WithLabelValues(kind).Add(float64(len(recs)))
	if len(recs) > 0 {
		p.w.logger.Info("republished address-watch records missing from the topic", "kind", kind, "records", len(recs))
	}
	return nil
}

// fix republishes the differing keys. Each key is re-read from ClickHouse
// under its lock, so a concurrent request of this process (which holds the
// same lock from its write to its produce) cannot be overtaken by an older
// state.
func (p *pass) fix(ctx context.Context, byID map[string]accountdb.Webhook) error {
	for _, id := range p.accounts {
		if err := p.fixAccount(ctx, id); err != nil {
			return err
		}
	}
	for _, wh := range p.webhooks {
		if err := p.fixWebhook(ctx, wh); err != nil {
			return err
		}
	}
	for id, addrs := range p.addrs {
		wh, known := byID[id]
		for len(addrs) > 0 {
			n := min(len(addrs), 2000)
			if err := p.fixAddresses(ctx, wh, known, addrs[:n]); err != nil {
				return err
			}
			addrs = addrs[n:]
		}
	}
	return nil
}

func (p *pass) fixAccount(ctx context.Context, id string) error {
	unlock := p.w.locks.Account(id)
	defer unlock()
	a, err := p.w.store.Account(ctx, id)
	if err != nil {
		return err
	}
	s, err := p.w.store.Secret(ctx, id)
	if err != nil && !errors.Is(err, accountdb.ErrNotFound) {
		return err
	}
	rec, err := watch.AccountRecord(a, s)
	if err != nil {
		return err
	}
	return p.publish(ctx, "account", []*kgo.Record{rec})
}

func (p *pass) fixWebhook(ctx context.Context, wh accountdb.Webhook) error {
	unlock := p.w.locks.Webhook(wh.ID)
	defer unlock()
	cur, err := p.w.store.Webhook(ctx, wh.AccountID, wh.ID)
	if err != nil {
		return err
	}
	rec, err := watch.WebhookRecord(cur)
	if err != nil {
		// A row the API could not have written (bad chain id or
		// signature): report it, do not stop reconciling the others.
		p.w.logger.Error("webhook row cannot be published", "webhook_id", wh.ID, "err", err)
		return nil
	}
	return p.publish(ctx, "webhook", []*kgo.Record{rec})
}

func (p *pass) fixAddresses(ctx context.Context, wh accountdb.Webhook, known bool, rows []accountdb.Address) error {
	unlock := p.w.locks.Webhook(rows[0].WebhookID)
	defer unlock()
	var recs []*kgo.Record
	if !known {
		for _, a := range rows {
			a.Removed = true
			rec, err := watch.AddressRecord(a, "")
			if err != nil {
				return err
			}
			recs = append(recs, rec)
		}
		return p.publish(ctx, "tombstone", recs)
	}
	keys := make([]string, len(rows))
	for i, a := range rows {
		keys[i] = a.Address
	}
	states, err := p.w.store.AddressStates(ctx, wh.ID, keys)
	if err != nil {
		return err
	}
	for _, k := range keys {
		st, ok := states[k]
		if !ok {
			continue
		}
		rec, err := watch.AddressRecord(st, wh.ChainID)
		if err != nil {
			p.w.logger.Error("address row cannot be published", "webhook_id", wh.ID, "err", err)
			continue
		}
		recs = append(recs, rec)
	}
	return p.publish(ctx, "address", recs)
}

// tombstonePhantoms deletes live keys that no ClickHouse row backs (a
// ClickHouse database restored from an older backup, or records written by
// something else). Only keys settled before the pass began are touched.
//
// Safety valve: when more than 100 keys and more than half of the live ones
// look like phantoms, the likelier explanation is a misconfiguration (this
// instance reads another database than the one that wrote the topic), and
// deleting them would silence every webhook of the real deployment; the
// pass then refuses, logs an error and counts it, and an operator decides.
func (p *pass) tombstonePhantoms(ctx context.Context) error {
	var recs []*kgo.Record
	live := 0
	p.w.table.each(func(e topicEntry) {
		if e.live {
			live++
		}
	})
	p.w.table.unseen(p.gen, func(key string, e topicEntry) {
		if e.offset >= p.ends[e.partition] {
			return
		}
		recs = append(recs, watch.Tombstone(key, e.version))
	})
	if len(recs) > 100 && len(recs) > live/2 {
		p.w.metrics.phantomsRefused.Inc()
		p.w.logger.Error("refusing to tombstone address-watch keys that ClickHouse does not have: too many; is this instance reading the database that wrote the topic?",
			"phantoms", len(recs), "live_keys", live, "topic", p.w.topic)
		return nil
	}
	for len(recs) > 0 {
		n := min(len(recs), 2000)
		if err := p.publish(ctx, "phantom", recs[:n]); err != nil {
			return fmt.Errorf("reconcile: tombstone keys missing from clickhouse: %w", err)
		}
		recs = recs[n:]
	}
	return nil
}
