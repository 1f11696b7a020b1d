package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/accountdb/accountdbtest"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/pkg/watch/watchtest"
	"github.com/moraine-data/moraine/query/internal/webhooks/reconcile"
	"github.com/moraine-data/moraine/query/internal/webhooks/webhookapi/webhookapitest"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

const (
	hookA = "6f1c7a52-7e8e-4a39-9d59-2f0f4c8b1a01"
	hookB = "6f1c7a52-7e8e-4a39-9d59-2f0f4c8b1a02"
	acct  = "0b7cc0d5-4a5e-4b8f-8d5f-4a4e0d9b8a11"
)

func addr(i int) string { return fmt.Sprintf("0x%040x", 0xabc000+i) }

func TestReconcileRepairsTheTopic(t *testing.T) {
	db, _, _ := accountdbtest.Open(t)
	k := testenv.Kafka(t)
	ctx := t.Context()
	clock := accountdb.NewClock(nil)
	reg := prometheus.NewRegistry()
	w, err := reconcile.New(webhookapitest.TestWatchConfig(), reconcile.Deps{Logger: testenv.Logger(t), Registerer: reg, Kafka: k, Store: db, Locks: watch.NewLocks()})
	require.NoError(t, err)
	t.Cleanup(w.Close)

	// ClickHouse: an account with a secret, a webhook with two addresses
	// (one removed), and an orphan address (its webhook row never written).
	require.NoError(t, db.PutAccount(ctx, accountdb.Account{ID: acct, Name: "a", Plan: "free", Version: clock.Next(0)}))
	require.NoError(t, db.PutSecret(ctx, accountdb.Secret{AccountID: acct, Secret: "s", Version: clock.Next(0)}))
	old := accountdb.Webhook{AccountID: acct, ID: hookA, URL: "https://x", ChainID: "43112", EventType: "address_activity",
		Status: "active", Version: clock.Next(0), EventSignatures: []string{}}
	cur := old
	cur.Status, cur.Version = "inactive", clock.Next(old.Version)
	require.NoError(t, db.PutWebhook(ctx, cur))
	v := clock.Next(0)
	require.NoError(t, db.PutAddresses(ctx, []accountdb.Address{
		{WebhookID: hookA, Address: addr(1), Given: addr(1), Version: v},
		{WebhookID: hookA, Address: addr(2), Given: addr(2), Version: v},
		{WebhookID: hookB, Address: addr(3), Given: addr(3), Version: v},
	}))
	require.NoError(t, db.PutAddresses(ctx, []accountdb.Address{{WebhookID: hookA, Address: addr(2), Given: addr(2), Removed: true, Version: clock.Next(v)}}))

	// The topic: the webhook's older version (a stale record), the removed
	// address still live, and a phantom webhook ClickHouse never had.
	staleRec, err := watch.WebhookRecord(old)
	require.NoError(t, err)
	liveRemoved, err := watch.AddressRecord(accountdb.Address{WebhookID: hookA, Address: addr(2), Version: v}, "43112")
	require.NoError(t, err)
	phantom, err := watch.WebhookRecord(accountdb.Webhook{ID: hookB, AccountID: acct, ChainID: "43112", Status: "active", Version: 5})
	require.NoError(t, err)
	cl, err := kgo.NewClient(watch.ProducerOpts(k, testenv.Logger(t), "test", webhookapitest.TestWatchConfig().Config)...)
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx, staleRec, liveRemoved, phantom).FirstErr())
	require.NotEmpty(t, watchtest.Disagreement(t, db, k))

	// Rows younger than the grace period are left to their writer.
	time.Sleep(webhookapitest.TestWatchConfig().Grace + 100*time.Millisecond)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { return w.Ready(ctx) == nil }, 20*time.Second, 20*time.Millisecond)
	watchtest.WaitAgree(t, db, k, 5*time.Second)

	st := watchtest.TopicState(t, k)
	require.Equal(t, record.WebhookStatus_WEBHOOK_STATUS_INACTIVE, st[hookA].Value.GetWebhook().GetStatus(), "stale record replaced")
	require.Nil(t, st[codec.WatchAddressKey(hookA, addr(2))].Value, "removed address tombstoned")
	require.Nil(t, st[codec.WatchWebhookKey(hookB)].Value, "phantom tombstoned")
	require.NotContains(t, st, codec.WatchAddressKey(hookB, addr(3)), "orphan address never published")
	require.Equal(t, "s", st[codec.WatchAccountKey(acct)].Value.GetAccount().GetSharedSecret())
	require.Equal(t, 1.0, counter(t, reg, "moraine_query_watch_republished_total", "phantom"))

	// A change written behind the API's back (moraine-admin) reaches the
	// topic through the incremental pass.
	acc, err := db.Account(ctx, acct)
	require.NoError(t, err)
	acc.Plan, acc.Version = "pro", clock.Next(acc.Version)
	require.NoError(t, db.PutAccount(ctx, acc))
	require.Eventually(t, func() bool {
		return watchtest.TopicState(t, k)[codec.WatchAccountKey(acct)].Value.GetAccount().GetPlan() == "pro"
	}, 5*time.Second, 50*time.Millisecond)
}

// counter reads one series (by its only label's value) of a counter vector.
func counter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s{%s}", name, label)
	return 0
}
