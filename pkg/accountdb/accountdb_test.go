package accountdb_test

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/accountdb/accountdbtest"
)

func TestAccountsAndKeys(t *testing.T) {
	db, _, _ := accountdbtest.Open(t)
	ctx := t.Context()
	clock := accountdb.NewClock(nil)

	a := accountdb.Account{ID: "acc-1", Name: "one", Plan: "free", CreatedAt: 1, Version: clock.Next(0)}
	require.NoError(t, db.PutAccount(ctx, a))
	got, err := db.Account(ctx, "acc-1")
	require.NoError(t, err)
	require.Equal(t, a, got)
	_, err = db.Account(ctx, "nope")
	require.ErrorIs(t, err, accountdb.ErrNotFound)

	a.Plan, a.Version = "pro", clock.Next(a.Version)
	require.NoError(t, db.PutAccount(ctx, a))
	all, err := db.Accounts(ctx)
	require.NoError(t, err)
	require.Equal(t, []accountdb.Account{a}, all)

	k := accountdb.Key{Hash: "h1", ID: "k1", Prefix: "mk_1", AccountID: "acc-1", CreatedAt: 5, Version: clock.Next(0)}
	require.NoError(t, db.PutKey(ctx, k))
	got1, err := db.KeyByHash(ctx, "h1")
	require.NoError(t, err)
	require.Equal(t, k, got1)
	k.RevokedAt, k.Version = 9, clock.Next(k.Version)
	require.NoError(t, db.PutKey(ctx, k))
	got1, err = db.KeyByID(ctx, "k1")
	require.NoError(t, err)
	require.True(t, got1.Revoked())
	ks, err := db.Keys(ctx, "acc-1")
	require.NoError(t, err)
	require.Equal(t, []accountdb.Key{k}, ks)
	_, err = db.KeyByHash(ctx, "h2")
	require.ErrorIs(t, err, accountdb.ErrNotFound)
}

// TestOperatorKeys: a key is an operator key while its latest row says so;
// a key without a row is not.
func TestOperatorKeys(t *testing.T) {
	db, _, _ := accountdbtest.Open(t)
	ctx := t.Context()
	clock := accountdb.NewClock(nil)
	op, err := db.IsOperator(ctx, "k1")
	require.NoError(t, err)
	require.False(t, op)
	require.NoError(t, db.SetOperator(ctx, "k1", true, clock.Next(0)))
	op, err = db.IsOperator(ctx, "k1")
	require.NoError(t, err)
	require.True(t, op)
	op, err = db.IsOperator(ctx, "k2")
	require.NoError(t, err)
	require.False(t, op)
	require.NoError(t, db.SetOperator(ctx, "k1", false, clock.Next(0)))
	op, err = db.IsOperator(ctx, "k1")
	require.NoError(t, err)
	require.False(t, op)
}

func TestWebhooksPagingAndIsolation(t *testing.T) {
	db, _, _ := accountdbtest.Open(t)
	ctx := t.Context()
	clock := accountdb.NewClock(nil)
	for i := range 7 {
		w := accountdb.Webhook{
			AccountID: "acc-1", ID: fmt.Sprintf("w%d", i), URL: "https://x", ChainID: "43112", EventType: "address_activity",
			Status: accountdb.StatusActive, CreatedAt: uint64(100 + i/2), Version: clock.Next(0),
		}
		if i%3 == 0 {
			w.Status = accountdb.StatusInactive
		}
		require.NoError(t, db.PutWebhook(ctx, w))
	}
	require.NoError(t, db.PutWebhook(ctx, accountdb.Webhook{AccountID: "acc-2", ID: "other", Status: "active", CreatedAt: 500, Version: clock.Next(0)}))

	var ids []string
	cur := accountdb.FirstWebhookPage
	for {
		page, err := db.Webhooks(ctx, "acc-1", "", cur, 3)
		require.NoError(t, err)
		for _, w := range page {
			ids = append(ids, w.ID)
		}
		if len(page) < 3 {
			break
		}
		last := page[len(page)-1]
		cur = accountdb.WebhookCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	require.Equal(t, []string{"w6", "w5", "w4", "w3", "w2", "w1", "w0"}, ids)

	inactive, err := db.Webhooks(ctx, "acc-1", accountdb.StatusInactive, accountdb.FirstWebhookPage, 10)
	require.NoError(t, err)
	require.Len(t, inactive, 3)

	// Only active webhooks count against the plan: 7 webhooks, 3 inactive.
	n, err := db.CountActiveWebhooks(ctx, "acc-1")
	require.NoError(t, err)
	require.Equal(t, 4, n)
	_, err = db.Webhook(ctx, "acc-1", "other")
	require.ErrorIs(t, err, accountdb.ErrNotFound)

	// A newer version replaces the row, also under the status filter.
	w, err := db.Webhook(ctx, "acc-1", "w0")
	require.NoError(t, err)
	require.Equal(t, []string{}, w.EventSignatures)
	w.Status, w.Version, w.EventSignatures = accountdb.StatusActive, clock.Next(w.Version), []string{"0xabc"}
	require.NoError(t, db.PutWebhook(ctx, w))
	inactive, err = db.Webhooks(ctx, "acc-1", accountdb.StatusInactive, accountdb.FirstWebhookPage, 10)
	require.NoError(t, err)
	require.Len(t, inactive, 2)
	got, err := db.Webhook(ctx, "acc-1", "w0")
	require.NoError(t, err)
	require.Equal(t, []string{"0xabc"}, got.EventSignatures)
	// The count reads the newest version only: w0 is active again.
	n, err = db.CountActiveWebhooks(ctx, "acc-1")
	require.NoError(t, err)
	require.Equal(t, 5, n)
}

func TestAddresses(t *testing.T) {
	db, _, _ := accountdbtest.Open(t)
	ctx := t.Context()
	clock := accountdb.NewClock(nil)
	v1 := clock.Next(0)
	var rows []accountdb.Address
	var want []string
	for i := range 300 {
		a := fmt.Sprintf("0x%040x", uint64(i)*0x9e3779b97f4a7c15)
		rows = append(rows, accountdb.Address{WebhookID: "w1", Address: a, Given: a, Version: v1})
		want = append(want, a)
	}
	rows = append(rows, accountdb.Address{WebhookID: "w2", Address: want[0], Given: "0xAB", Version: v1})
	require.NoError(t, db.PutAddresses(ctx, rows))
	sort.Strings(want)

	// Remove one.
	v2 := clock.Next(v1)
	require.NoError(t, db.PutAddresses(ctx, []accountdb.Address{{WebhookID: "w1", Address: want[10], Given: want[10], Removed: true, Version: v2}}))
	want = append(want[:10:10], want[11:]...)

	n, err := db.CountAddresses(ctx, "w1")
	require.NoError(t, err)
	require.Equal(t, 299, n)

	var got []string
	after := ""
	for {
		page, err := db.AddressPage(ctx, "w1", after, 7, n)
		require.NoError(t, err)
		for _, a := range page {
			got = append(got, a.Address)
		}
		if len(page) < 7 {
			break
		}
		after = page[len(page)-1].Address
	}
	require.Equal(t, want, got)

	states, err := db.AddressStates(ctx, "w1", []string{rows[10].Address, rows[11].Address, "0x0000000000000000000000000000000000000bad"})
	require.NoError(t, err)
	require.Len(t, states, 2)

	of, err := db.AddressesOf(ctx, []string{"w1", "w2"}, 5)
	require.NoError(t, err)
	require.Len(t, of["w1"], 5)
	require.Equal(t, []string{"0xAB"}, of["w2"])

	var changed []accountdb.Address
	require.NoError(t, db.AddressChangesSince(ctx, v1, func(a accountdb.Address) error {
		changed = append(changed, a)
		return nil
	}))
	require.Len(t, changed, 1)
	require.True(t, changed[0].Removed)
	require.Equal(t, v2, changed[0].Version)

	total := 0
	require.NoError(t, db.AllAddresses(ctx, func(accountdb.Address) error { total++; return nil }))
	require.Equal(t, 301, total)
}

func TestSecrets(t *testing.T) {
	db, _, _ := accountdbtest.Open(t)
	ctx := t.Context()
	_, err := db.Secret(ctx, "acc-1")
	require.ErrorIs(t, err, accountdb.ErrNotFound)
	require.NoError(t, db.PutSecret(ctx, accountdb.Secret{AccountID: "acc-1", Secret: "a", Version: 1}))
	require.NoError(t, db.PutSecret(ctx, accountdb.Secret{AccountID: "acc-1", Secret: "b", Version: 2}))
	s, err := db.Secret(ctx, "acc-1")
	require.NoError(t, err)
	require.Equal(t, "b", s.Secret)
	all, err := db.AllSecrets(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
}

func TestClockIsMonotonicAboveFloor(t *testing.T) {
	c := accountdb.NewClock(nil)
	a := c.Next(0)
	b := c.Next(0)
	require.Greater(t, b, a)
	require.Equal(t, uint64(1<<62)+1, c.Next(1<<62))
	require.Greater(t, c.Next(0), uint64(1<<62)+1)
}

func TestDeliveriesPaging(t *testing.T) {
	db, _, _ := accountdbtest.Open(t)
	ctx := t.Context()
	now := uint64(time.Now().UnixMilli())
	var rows []accountdb.Delivery
	// 5 recent attempts, 2 a week old (found by widening the range), and
	// another webhook's rows (never listed).
	for i, at := range []uint64{now - 1000, now - 2000, now - 2000, now - 3000, now - 4000, now - 7*24*3600*1000, now - 8*24*3600*1000} {
		rows = append(rows, accountdb.Delivery{
			WebhookID: "w1", MessageID: fmt.Sprintf("m%d", i), Attempt: uint8(1 + i%2), AccountID: "a", ChainID: 43112,
			TxHash: "0x01", Status: 200, Result: accountdb.ResultSuccess, LatencyMs: 3, AttemptedAt: at,
		})
	}
	rows = append(rows, accountdb.Delivery{WebhookID: "w2", MessageID: "x", Attempt: 1, AttemptedAt: now})
	require.NoError(t, db.PutDeliveries(ctx, rows))

	var got []string
	cur := accountdb.FirstDeliveryPage
	for page := 0; ; page++ {
		ds, err := db.Deliveries(ctx, "w1", cur, 3)
		require.NoError(t, err)
		for _, d := range ds {
			got = append(got, d.MessageID)
		}
		if len(ds) < 3 {
			break
		}
		last := ds[len(ds)-1]
		cur = accountdb.DeliveryCursor{AttemptedAt: last.AttemptedAt, MessageID: last.MessageID, Attempt: last.Attempt}
		require.Less(t, page, 5)
	}
	// Newest first; equal times by message id descending.
	require.Equal(t, []string{"m0", "m2", "m1", "m3", "m4", "m5", "m6"}, got)
}

// TestDropDeliveriesBefore: months of the delivery log that ended before
// the cutoff go, whole; the month the cutoff falls in and newer ones stay.
func TestDropDeliveriesBefore(t *testing.T) {
	db, _, conn := accountdbtest.Open(t)
	ctx := t.Context()
	at := func(y int, m time.Month, d int) uint64 {
		return uint64(time.Date(y, m, d, 12, 0, 0, 0, time.UTC).UnixMilli())
	}
	var rows []accountdb.Delivery
	for i, ts := range []uint64{at(2024, 1, 3), at(2024, 1, 31), at(2024, 2, 10), at(2024, 3, 1), at(2024, 3, 30)} {
		rows = append(rows, accountdb.Delivery{WebhookID: "w", MessageID: fmt.Sprintf("m%d", i), Attempt: 1, AttemptedAt: ts})
	}
	require.NoError(t, db.PutDeliveries(ctx, rows))
	count := func() (n uint64) {
		require.NoError(t, conn.QueryRow(ctx, "SELECT count() FROM deliveries").Scan(&n))
		return n
	}
	require.Equal(t, uint64(5), count())
	// Cut off in the middle of March: January and February have ended.
	dropped, err := db.DropDeliveriesBefore(ctx, time.Date(2024, 3, 15, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Equal(t, []string{"202401", "202402"}, dropped)
	require.Equal(t, uint64(2), count())
	// Again: nothing more to drop.
	dropped, err = db.DropDeliveriesBefore(ctx, time.Date(2024, 3, 15, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Empty(t, dropped)
	// March ends at the start of April.
	dropped, err = db.DropDeliveriesBefore(ctx, time.Date(2024, 4, 1, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Equal(t, []string{"202403"}, dropped)
	require.Equal(t, uint64(0), count())
}

func TestStrikesCountSinceDeactivation(t *testing.T) {
	db, _, _ := accountdbtest.Open(t)
	ctx := t.Context()
	clock := accountdb.NewClock(nil)
	put := func(kind, msg string, at uint64) {
		require.NoError(t, db.PutStrikes(ctx, []accountdb.Strike{{WebhookID: "w", Kind: kind, MessageID: msg, At: at, Version: clock.Next(0)}}))
	}
	put(accountdb.StrikeDoubleFailure, "m1", 10)
	put(accountdb.StrikeDoubleFailure, "m2", 11)
	put(accountdb.StrikeDoubleFailure, "m2", 12) // a redelivered message counts once
	put(accountdb.StrikeDoubleFailure, "o1", 12)
	n, err := db.CountStrikes(ctx, "w", accountdb.StrikeDoubleFailure)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	put(accountdb.StrikeDeactivated, "m2", 20)
	n, err = db.CountStrikes(ctx, "w", accountdb.StrikeDoubleFailure)
	require.NoError(t, err)
	require.Equal(t, 0, n)
	put(accountdb.StrikeDoubleFailure, "m3", 21)
	n, err = db.CountStrikes(ctx, "w", accountdb.StrikeDoubleFailure)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = db.CountStrikes(ctx, "other", accountdb.StrikeDoubleFailure)
	require.NoError(t, err)
	require.Equal(t, 0, n)
}
