package webhookapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/guard"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/query/internal/access/auth"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
)

// Store is what the webhook API reads and writes; *accountdb.DB implements it.
type Store interface {
	Account(ctx context.Context, id string) (accountdb.Account, error)
	Webhook(ctx context.Context, accountID, id string) (accountdb.Webhook, error)
	Webhooks(ctx context.Context, accountID, status string, after accountdb.WebhookCursor, limit int) ([]accountdb.Webhook, error)
	CountActiveWebhooks(ctx context.Context, accountID string) (int, error)
	WebhookByRequestHash(ctx context.Context, accountID, hash string, sinceMs uint64) (accountdb.Webhook, error)
	PutWebhook(ctx context.Context, w accountdb.Webhook) error
	AddressStates(ctx context.Context, webhookID string, addrs []string) (map[string]accountdb.Address, error)
	PutAddresses(ctx context.Context, rows []accountdb.Address) error
	CountAddresses(ctx context.Context, webhookID string) (int, error)
	AddressPage(ctx context.Context, webhookID, after string, limit, total int) ([]accountdb.Address, error)
	AddressesOf(ctx context.Context, webhookIDs []string, perWebhook int) (map[string][]string, error)
	Secret(ctx context.Context, accountID string) (accountdb.Secret, error)
	PutSecret(ctx context.Context, s accountdb.Secret) error
	Deliveries(ctx context.Context, webhookID string, after accountdb.DeliveryCursor, limit int) ([]accountdb.Delivery, error)
	PutReplayJob(ctx context.Context, j accountdb.ReplayJob) error
	ReplayJob(ctx context.Context, webhookID, id string) (accountdb.ReplayJob, error)
	ReplayJobs(ctx context.Context, webhookID string, limit int) ([]accountdb.ReplayJob, error)
	ReplayProgressOf(ctx context.Context, webhookID string, ids []string) (map[string]accountdb.ReplayProgress, error)
	ReplayDeliveryCounts(ctx context.Context, webhookID, replayID string, since uint64) (accountdb.ReplayDeliveries, error)
}

// Publisher produces address-watch records; *reconcile.Reconciler implements it.
type Publisher interface {
	Publish(ctx context.Context, recs []*kgo.Record) error
}

// Op names a change, Step a point between the steps of a change (for Hooks).
type (
	Op   string
	Step string
)

// Changes.
const (
	OpCreate          Op = "create"
	OpUpdate          Op = "update"
	OpDeactivate      Op = "deactivate"
	OpAddAddresses    Op = "add-addresses"
	OpRemoveAddresses Op = "remove-addresses"
	OpRotateSecret    Op = "rotate-secret"
)

// Steps of a change, in order (watch.Step). StepAddressesWritten only
// happens in a create that has addresses.
const (
	StepBeforeWrite      = Step(watch.StepBeforeWrite)
	StepAddressesWritten = Step(watch.StepAddressesWritten)
	StepWritten          = Step(watch.StepWritten)
	StepPublished        = Step(watch.StepPublished)
)

// Hooks observe the steps of every change. The crash tests make Step end
// the process, to prove that a crash between any two steps loses no
// acknowledged change and creates no phantom one.
type Hooks struct {
	Step func(op Op, step Step)
}

func (h Hooks) step(op Op, s Step) {
	if h.Step != nil {
		h.Step(op, s)
	}
}

// view is a webhook with the addresses its response shows.
type view struct {
	w         accountdb.Webhook
	addresses []string
	// replayID is the replay a create with fromBlock started.
	replayID string
}

type service struct {
	cfg     Config
	store   Store
	indexed Indexed
	pub     Publisher
	locks   *watch.Locks
	clock   *accountdb.Clock
	plans   *plan.Set
	hooks   Hooks
	chains  *chains.Config
	logger  *slog.Logger
	now     func() time.Time
	metrics *metrics
	// policy is the delivery target policy (package guard).
	policy guard.Policy
}

// checkURL applies the delivery target policy to a URL being accepted: a
// 400 naming the reason, or a 503 when the name could not be resolved for
// reasons of the resolver.
func (s *service) checkURL(ctx context.Context, raw string) error {
	err := guard.CheckURL(ctx, raw, s.policy)
	var ue *guard.URLError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ue) && ue.Temporary:
		return apierr.Unavailable(ue.Message, err)
	case ue != nil:
		return apierr.Validation(ue.Message)
	}
	return apierr.Internal(err)
}

// storeErr maps a store error: not found → 404, anything else → 503.
func storeErr(err error, notFound string) error {
	if errors.Is(err, accountdb.ErrNotFound) {
		return apierr.NotFound(notFound)
	}
	return apierr.Unavailable("Webhook storage is temporarily unavailable", err)
}

const msgWebhookNotFound = "Webhook not found"

func forbidden(format string, args ...any) error {
	return apierr.New(http.StatusForbidden, fmt.Sprintf(format, args...))
}

// changed counts a change that was written; a failed publish is logged
// and counted but cannot fail the request: ClickHouse already holds the
// change and the reconciler publishes whatever this could not.
func (s *service) changed(op Op, id string, u watch.Update) {
	if !u.Changed {
		return
	}
	if u.PublishErr != nil {
		s.metrics.publishFailures.WithLabelValues(string(op)).Inc()
		s.logger.Warn("webhook change written but not yet published; the reconciler will publish it",
			"op", op, "webhook_id", id, "err", u.PublishErr)
	}
	s.metrics.changes.WithLabelValues(string(op)).Inc()
}

func requestHash(accountID string, r createRequest) string {
	addrs := make([]string, len(r.Addresses))
	for i, a := range r.Addresses {
		addrs[i] = strings.ToLower(a)
	}
	sort.Strings(addrs)
	sigs := append([]string(nil), r.EventSignatures...)
	sort.Strings(sigs)
	b, _ := json.Marshal([]any{accountID, r.URL, r.Chain.EVMChainID, addrs, sigs, r.Name, r.Description, r.IncludeInternalTxs, r.IncludeLogs, r.Confirmations, r.FromBlock})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func (s *service) create(ctx context.Context, p auth.Principal, r createRequest) (view, error) {
	acc := p.Account
	pl := s.plans.GetOrFree(acc.Plan)
	if len(r.Addresses) > pl.AddressesPerWebhook {
		return view{}, forbidden("The %s plan allows at most %d addresses per webhook", pl.Name, pl.AddressesPerWebhook)
	}
	unlock := s.locks.Account(acc.ID)
	defer unlock()

	hash := requestHash(acc.ID, r)
	now := s.now()
	if s.cfg.CreateDedupeWindow > 0 {
		since := uint64(now.Add(-s.cfg.CreateDedupeWindow).UnixMilli())
		w, err := s.store.WebhookByRequestHash(ctx, acc.ID, hash, since)
		switch {
		case err == nil:
			// Possibly a retry of a create that succeeded (the SDK retries
			// POST on 5xx and connection errors): answer with that webhook,
			// but only while it is still what this request asks for. One
			// deactivated or changed since is not the answer to a retry,
			// and the request is a new create.
			v, err := s.get(ctx, acc.ID, w.ID)
			if err != nil {
				return view{}, err
			}
			if v.w.Status == accountdb.StatusActive && requestHash(acc.ID, requestOf(v, r.Chain, r.FromBlock)) == hash {
				s.metrics.deduplicated.Inc()
				return v, nil
			}
		case !errors.Is(err, accountdb.ErrNotFound):
			return view{}, storeErr(err, "")
		}
	}
	if err := s.checkQuota(ctx, acc.ID, pl); err != nil {
		return view{}, err
	}

	id, err := uuid.NewRandom()
	if err != nil {
		return view{}, apierr.Internal(err)
	}
	w := accountdb.Webhook{
		AccountID: acc.ID, ID: id.String(), URL: r.URL, ChainID: r.Chain.EVMChainID, EventType: eventAddressActivity,
		Name: r.Name, Description: r.Description, EventSignatures: r.EventSignatures,
		IncludeInternalTxs: r.IncludeInternalTxs, IncludeLogs: r.IncludeLogs, Status: accountdb.StatusActive,
		CreatedAt: uint64(now.UnixMilli()), RequestHash: hash, Confirmations: r.Confirmations,
	}
	if w.EventSignatures == nil {
		w.EventSignatures = []string{}
	}
	rows := make([]accountdb.Address, len(r.Addresses))
	for i, a := range r.Addresses {
		rows[i] = accountdb.Address{WebhookID: w.ID, Address: strings.ToLower(a), Given: a}
	}
	var replayID string
	if r.FromBlock != nil {
		// The webhook starts in the past: a replay from fromBlock to the
		// head, written first, so that nothing can fail after the webhook
		// exists (a job whose webhook was never written fails on its own).
		j, err := s.fromBlockJob(ctx, p, w, *r.FromBlock)
		if err != nil {
			return view{}, err
		}
		if err := s.store.PutReplayJob(ctx, j); err != nil {
			return view{}, storeErr(err, "")
		}
		s.metrics.replays.Inc()
		replayID = j.ID
	}
	u, err := s.writer(OpCreate).CreateWebhook(ctx, w, rows)
	if err != nil {
		return view{}, storeErr(err, "")
	}
	s.changed(OpCreate, w.ID, u)
	return view{w: u.After, addresses: append([]string{}, r.Addresses...), replayID: replayID}, nil
}

// requestOf is the create request that would make v as it is now, with
// fromBlock (which a webhook does not keep: it started a replay).
func requestOf(v view, ch chains.Chain, fromBlock *uint64) createRequest {
	return createRequest{
		URL: v.w.URL, Chain: ch, Addresses: v.addresses, EventSignatures: v.w.EventSignatures,
		Name: v.w.Name, Description: v.w.Description, IncludeInternalTxs: v.w.IncludeInternalTxs, IncludeLogs: v.w.IncludeLogs,
		Confirmations: v.w.Confirmations, FromBlock: fromBlock,
	}
}

// checkQuota refuses one more active webhook when the account has as many
// as its plan allows. Inactive webhooks (deleted, or deactivated by
// delivery) do not count, so deleting frees a place and reactivating takes
// one. Callers hold the account's lock.
func (s *service) checkQuota(ctx context.Context, accountID string, pl plan.Plan) error {
	n, err := s.store.CountActiveWebhooks(ctx, accountID)
	if err != nil {
		return storeErr(err, "")
	}
	if n >= pl.WebhooksPerAccount {
		return forbidden("The %s plan allows at most %d active webhooks per account; deactivate one (DELETE /v1/webhooks/{id}) first", pl.Name, pl.WebhooksPerAccount)
	}
	return nil
}

// get reads one of the account's webhooks with its addresses.
func (s *service) get(ctx context.Context, accountID, id string) (view, error) {
	w, err := s.store.Webhook(ctx, accountID, id)
	if err != nil {
		return view{}, storeErr(err, msgWebhookNotFound)
	}
	addrs, err := s.store.AddressesOf(ctx, []string{id}, s.cfg.MaxAddressesInResponse)
	if err != nil {
		return view{}, storeErr(err, "")
	}
	return view{w: w, addresses: nonNil(addrs[id])}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// list reads a page of the account's webhooks, newest first; more reports
// whether another page exists.
func (s *service) list(ctx context.Context, accountID, status string, after accountdb.WebhookCursor, limit int) ([]view, bool, error) {
	ws, err := s.store.Webhooks(ctx, accountID, status, after, limit+1)
	if err != nil {
		return nil, false, storeErr(err, "")
	}
	more := len(ws) > limit
	if more {
		ws = ws[:limit]
	}
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	addrs, err := s.store.AddressesOf(ctx, ids, s.cfg.MaxAddressesInResponse)
	if err != nil {
		return nil, false, storeErr(err, "")
	}
	out := make([]view, len(ws))
	for i, w := range ws {
		out[i] = view{w: w, addresses: nonNil(addrs[w.ID])}
	}
	return out, more, nil
}

// update applies a PATCH (or the DELETE deactivation) through
// watch.Writer (the webhook's lock, ClickHouse, then the topic). A request
// that changes nothing writes nothing.
func (s *service) update(ctx context.Context, p auth.Principal, id string, r updateRequest, op Op) (view, error) {
	reactivate := r.Status != nil && *r.Status == accountdb.StatusActive
	if reactivate {
		// Reactivating takes a place of the plan's quota: hold the
		// account's lock (before the webhook's, as creates do) so that
		// concurrent creates and reactivations count each other.
		unlock := s.locks.Account(p.Account.ID)
		defer unlock()
	}
	var addresses []string
	u, err := s.writer(op).UpdateWebhook(ctx, p.Account.ID, id, func(cur accountdb.Webhook, w *accountdb.Webhook) error {
		// Read under the lock, before the write: nothing after the write
		// may fail the request.
		addrs, err := s.store.AddressesOf(ctx, []string{id}, s.cfg.MaxAddressesInResponse)
		if err != nil {
			return storeErr(err, "")
		}
		addresses = nonNil(addrs[id])
		set := func(dst *string, v *string) {
			if v != nil {
				*dst = *v
			}
		}
		set(&w.Name, r.Name)
		set(&w.Description, r.Description)
		set(&w.URL, r.URL)
		set(&w.Status, r.Status)
		if r.IncludeLogs != nil {
			w.IncludeLogs = *r.IncludeLogs
		}
		if r.Confirmations != nil {
			w.Confirmations = *r.Confirmations
		}
		if r.IncludeInternalTxs != nil {
			if *r.IncludeInternalTxs && !w.IncludeInternalTxs && !s.chainHasTraces(w.ChainID) {
				return apierr.Validation(fmt.Sprintf("includeInternalTxs is only available on chains with traces, and chain %s has none", w.ChainID))
			}
			w.IncludeInternalTxs = *r.IncludeInternalTxs
		}
		if cur.Status != accountdb.StatusActive && w.Status == accountdb.StatusActive {
			if err := s.checkQuota(ctx, p.Account.ID, s.plans.GetOrFree(p.Account.Plan)); err != nil {
				return err
			}
		}
		// The target policy again when the URL changes or the webhook comes
		// back to life: its name may resolve elsewhere now, and a webhook
		// from before the policy was applied at accept time may break it.
		if w.URL != cur.URL || (w.Status == accountdb.StatusActive && cur.Status != accountdb.StatusActive) {
			if err := s.checkURL(ctx, w.URL); err != nil {
				return err
			}
		}
		return nil
	})
	if err := s.writerErr(err); err != nil {
		return view{}, err
	}
	s.changed(op, id, u)
	return view{w: u.After, addresses: addresses}, nil
}

// writerErr maps an error of a webhook's Writer change: the API errors of
// the caller's own checks as they are, store errors as storeErr.
func (s *service) writerErr(err error) error {
	var apiErr *apierr.Error
	switch {
	case err == nil, errors.As(err, &apiErr):
		return err
	}
	return storeErr(err, msgWebhookNotFound)
}

// writer is the shared change path, with the crash-test hooks of op.
func (s *service) writer(op Op) watch.Writer {
	return watch.Writer{
		Store: s.store, Publisher: s.pub, Locks: s.locks, Clock: s.clock,
		Step: func(st watch.Step) { s.hooks.step(op, Step(st)) },
	}
}

// chainHasTraces reports whether ingest fetches call traces on the chain.
func (s *service) chainHasTraces(chainID string) bool {
	ch, ok := s.chains.Find(chainID)
	return ok && ch.Traces
}

// changeAddresses adds (remove false) or removes addresses under the
// webhook's lock. Adding a watched address or removing an absent one is a
// no-op; matching is case-insensitive and the first spelling is kept.
func (s *service) changeAddresses(ctx context.Context, p auth.Principal, id string, given []string, remove bool) (view, error) {
	op := OpAddAddresses
	if remove {
		op = OpRemoveAddresses
	}
	var list []string
	u, err := s.writer(op).UpdateAddresses(ctx, p.Account.ID, id, func(cur accountdb.Webhook) ([]accountdb.Address, error) {
		addrs, err := s.store.AddressesOf(ctx, []string{id}, s.cfg.MaxAddressesInResponse)
		if err != nil {
			return nil, storeErr(err, "")
		}
		list = nonNil(addrs[id])
		keys := make([]string, len(given))
		for i, a := range given {
			keys[i] = strings.ToLower(a)
		}
		states, err := s.store.AddressStates(ctx, id, keys)
		if err != nil {
			return nil, storeErr(err, "")
		}
		// Every new row goes above the newest state of the addresses named.
		var floor uint64
		for _, st := range states {
			floor = max(floor, st.Version)
		}
		var rows []accountdb.Address
		for i, k := range keys {
			st, known := states[k]
			watched := known && !st.Removed
			switch {
			case !remove && !watched:
				rows = append(rows, accountdb.Address{WebhookID: id, Address: k, Given: given[i], Version: floor})
			case remove && watched:
				rows = append(rows, accountdb.Address{WebhookID: id, Address: k, Given: st.Given, Removed: true, Version: floor})
			}
		}
		if len(rows) == 0 || remove {
			return rows, nil
		}
		pl := s.plans.GetOrFree(p.Account.Plan)
		n, err := s.store.CountAddresses(ctx, id)
		if err != nil {
			return nil, storeErr(err, "")
		}
		if n+len(rows) > pl.AddressesPerWebhook {
			return nil, forbidden("The %s plan allows at most %d addresses per webhook; this webhook has %d and the request adds %d",
				pl.Name, pl.AddressesPerWebhook, n, len(rows))
		}
		return rows, nil
	})
	if err := s.writerErr(err); err != nil {
		return view{}, err
	}
	if !u.Changed {
		return view{w: u.After, addresses: list}, nil
	}
	s.changed(op, id, u)
	return view{w: u.After, addresses: s.applyToList(list, u.Addresses)}, nil
}

// applyToList is the response's address list after rows were written: the
// list read before the change (at most MaxAddressesInResponse, in address
// order) with the change applied in memory, so that nothing after the write
// can fail the request.
func (s *service) applyToList(list []string, rows []accountdb.Address) []string {
	byKey := make(map[string]string, len(list)+len(rows))
	for _, a := range list {
		byKey[strings.ToLower(a)] = a
	}
	for _, r := range rows {
		if r.Removed {
			delete(byKey, r.Address)
		} else {
			byKey[r.Address] = r.Given
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > s.cfg.MaxAddressesInResponse {
		keys = keys[:s.cfg.MaxAddressesInResponse]
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = byKey[k]
	}
	return out
}

// listAddresses reads a page of a webhook's addresses and its total.
func (s *service) listAddresses(ctx context.Context, accountID, id, after string, limit int) ([]accountdb.Address, int, bool, error) {
	if _, err := s.store.Webhook(ctx, accountID, id); err != nil {
		return nil, 0, false, storeErr(err, msgWebhookNotFound)
	}
	total, err := s.store.CountAddresses(ctx, id)
	if err != nil {
		return nil, 0, false, storeErr(err, "")
	}
	rows, err := s.store.AddressPage(ctx, id, after, limit+1, total)
	if err != nil {
		return nil, 0, false, storeErr(err, "")
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	return rows, total, more, nil
}

// rotateSecret generates a new shared secret for the account.
func (s *service) rotateSecret(ctx context.Context, p auth.Principal) (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", apierr.Internal(err)
	}
	u, err := s.writer(OpRotateSecret).PutSecret(ctx, p.Account.ID, hex.EncodeToString(raw))
	if err != nil {
		return "", storeErr(err, "Account not found")
	}
	s.changed(OpRotateSecret, "", u)
	return u.Secret.Secret, nil
}

func (s *service) secret(ctx context.Context, accountID string) (string, error) {
	sec, err := s.store.Secret(ctx, accountID)
	if err != nil {
		return "", storeErr(err, "Shared secret not found: generate one with POST /v1/webhooks:generateOrRotateSharedSecret")
	}
	return sec.Secret, nil
}

// listDeliveries reads a page of a webhook's delivery log, newest first;
// another account's webhook is not found.
func (s *service) listDeliveries(ctx context.Context, accountID, id string, after accountdb.DeliveryCursor, limit int) ([]accountdb.Delivery, bool, error) {
	if _, err := s.store.Webhook(ctx, accountID, id); err != nil {
		return nil, false, storeErr(err, msgWebhookNotFound)
	}
	rows, err := s.store.Deliveries(ctx, id, after, limit+1)
	if err != nil {
		return nil, false, storeErr(err, "")
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	return rows, more, nil
}
