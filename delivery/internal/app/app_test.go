package app_test

import (
	"encoding/base64"
	"net/http"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/delivery/internal/deliverytest"
	"github.com/moraine-data/moraine/delivery/internal/sign"
	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/watch/watchtest"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// TestReadyAndGracefulStop starts the service on the real stack, waits for
// /readyz to answer 200 and checks that cancelling stops it cleanly.
func TestReadyAndGracefulStop(t *testing.T) {
	env := deliverytest.New(t)
	svc := deliverytest.Start(t, env.Config())
	start := time.Now()
	svc.Stop(t)
	require.Less(t, time.Since(start), 10*time.Second)
}

// TestDeliversSignedMessages: every message arrives once, as the exact
// payload bytes, with both signatures verifiable with the account's secret
// (hex key), the Standard Webhooks headers, and a success row per attempt
// in the delivery log. An account without a secret gets unsigned messages.
func TestDeliversSignedMessages(t *testing.T) {
	env := deliverytest.New(t)
	rc := deliverytest.NewReceiver(t)
	acc := env.Account("free", deliverytest.Secret)
	hook := env.Webhook(acc, rc.URL+"?token=abc")
	bare := env.Account("free", "")
	bareHook := env.Webhook(bare, rc.URL+"/bare")
	svc := deliverytest.Start(t, env.Config())

	var acts []*record.Activity
	for i := range 20 {
		acts = append(acts, deliverytest.Activity(acc, hook, i))
	}
	acts = append(acts, deliverytest.Activity(bare, bareHook, 100))
	env.Produce(acts...)
	deliverytest.Eventually(t, 30*time.Second, "21 deliveries", func() bool { return len(rc.ByMessage()) == 21 })

	key, err := sign.Key(deliverytest.Secret, sign.Hex)
	require.NoError(t, err)
	byMsg := rc.ByMessage()
	for _, a := range acts {
		reqs := byMsg[a.MessageId]
		require.Len(t, reqs, 1, "message %s", a.MessageId)
		r := reqs[0]
		require.Equal(t, a.Payload, r.Body)
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		require.Equal(t, a.MessageId, r.Header.Get(sign.HeaderWebhookID))
		ts, err := strconv.ParseInt(r.Header.Get(sign.HeaderWebhookTimestamp), 10, 64)
		require.NoError(t, err)
		require.InDelta(t, time.Now().Unix(), ts, 60)
		if a.WebhookId == bareHook {
			require.Empty(t, r.Header.Get(sign.HeaderSignature))
			require.Empty(t, r.Header.Get(sign.HeaderWebhookSignature))
			continue
		}
		require.True(t, sign.Verify(key, r.Body, r.Header.Get(sign.HeaderSignature)))
		want := sign.Sign(key, a.MessageId, ts, r.Body)
		require.Equal(t, want.WebhookSignature, r.Header.Get(sign.HeaderWebhookSignature))
		sig, err := base64.StdEncoding.DecodeString(r.Header.Get(sign.HeaderSignature))
		require.NoError(t, err)
		require.Len(t, sig, 32)
	}
	// The receiver records a request before it answers, and the sender
	// counts the attempt once the answer is back: wait for the counter.
	deliverytest.Eventually(t, 10*time.Second, "21 successes counted", func() bool {
		return metric(t, svc, "moraine_delivery_attempts_total", "success") == 21
	})
	require.Equal(t, 1.0, metric(t, svc, "moraine_delivery_unsigned_total", ""))
	deliverytest.Eventually(t, 10*time.Second, "log rows", func() bool { return len(env.Deliveries(hook)) == 20 })
	for _, r := range env.Deliveries(hook) {
		require.Equal(t, accountdb.ResultSuccess, r.Result)
		require.Equal(t, uint16(200), r.Status)
		require.Equal(t, uint8(1), r.Attempt)
		require.Equal(t, acc, r.AccountID)
		require.Equal(t, uint64(43112), r.ChainID)
	}
}

// TestRetryScheduleAndPaidDeactivation: an endpoint that always fails gets
// exactly the schedule's ten attempts, each at least its wait after the
// previous one; the failed last attempt deactivates the (paid) webhook in
// ClickHouse and on the address-watch topic, and it receives nothing more.
func TestRetryScheduleAndPaidDeactivation(t *testing.T) {
	env := deliverytest.New(t)
	rc := deliverytest.NewReceiver(t)
	rc.Respond(func(*http.Request, []byte) int { return http.StatusServiceUnavailable })
	acc := env.Account("pro", deliverytest.Secret)
	hook := env.Webhook(acc, rc.URL)
	cfg := env.Config()
	require.NoError(t, cfg.Delivery.Schedule.Set("100ms,150ms,200ms,250ms,300ms,350ms,400ms,450ms,500ms"))
	deliverytest.Start(t, cfg)

	a := deliverytest.Activity(acc, hook, 1)
	env.Produce(a)
	deliverytest.Eventually(t, 60*time.Second, "10 attempts", func() bool { return len(rc.Requests()) >= 10 })
	deliverytest.Eventually(t, 30*time.Second, "deactivation", func() bool { return env.Status(acc, hook) == accountdb.StatusInactive })
	time.Sleep(time.Second)
	reqs := rc.Requests()
	require.Len(t, reqs, 10, "ten attempts, then none")
	for i := 1; i < len(reqs); i++ {
		gap := reqs[i].At.Sub(reqs[i-1].At)
		want := cfg.Delivery.Schedule[i-1]
		require.GreaterOrEqual(t, gap, want-5*time.Millisecond, "wait before attempt %d", i+1)
		require.Less(t, gap, want+3*time.Second, "wait before attempt %d", i+1)
		require.Equal(t, a.MessageId, reqs[i].Header.Get(sign.HeaderWebhookID))
	}
	st := watchtest.TopicState(t, env.Kafka)
	require.Equal(t, record.WebhookStatus_WEBHOOK_STATUS_INACTIVE, st[codec.WatchWebhookKey(hook)].Value.GetWebhook().GetStatus())

	deliverytest.Eventually(t, 10*time.Second, "10 log rows", func() bool { return len(env.Deliveries(hook)) >= 10 })
	rows := env.Deliveries(hook)
	require.Len(t, rows, 10)
	for i, r := range rows {
		require.Equal(t, uint8(i+1), r.Attempt)
		require.Equal(t, accountdb.ResultHTTPError, r.Result)
		require.Equal(t, uint16(503), r.Status)
		if i < 9 {
			require.NotZero(t, r.NextAttemptAt, "attempt %d schedules the next", i+1)
		} else {
			require.Zero(t, r.NextAttemptAt)
		}
	}

	// Inactive: a new message is not sent.
	env.Produce(deliverytest.Activity(acc, hook, 2))
	deliverytest.Eventually(t, 10*time.Second, "inactive row", func() bool {
		rows := env.Deliveries(hook)
		return rows[len(rows)-1].Result == accountdb.ResultInactive
	})
	require.Len(t, rc.Requests(), 10)
}

// TestFreePlanDeactivationAndReactivation: on the free plan, five messages
// that fail attempts 1 and 2 enter the retry queue and the sixth
// deactivates the webhook; its pending retries are then dropped and
// recorded; reactivating it (PATCH status active) resumes delivery.
func TestFreePlanDeactivationAndReactivation(t *testing.T) {
	env := deliverytest.New(t)
	rc := deliverytest.NewReceiver(t)
	rc.Respond(func(*http.Request, []byte) int { return http.StatusInternalServerError })
	acc := env.Account("free", deliverytest.Secret)
	hook := env.Webhook(acc, rc.URL)
	cfg := env.Config()
	require.NoError(t, cfg.Delivery.Schedule.Set("100ms,2s,1h,1h,1h,1h,1h,1h,1h"))
	svc := deliverytest.Start(t, cfg)

	for i := range 6 {
		env.Produce(deliverytest.Activity(acc, hook, i))
	}
	deliverytest.Eventually(t, 30*time.Second, "deactivation", func() bool { return env.Status(acc, hook) == accountdb.StatusInactive })
	require.Len(t, rc.Requests(), 12, "six messages, two attempts each")
	deliverytest.Eventually(t, 5*time.Second, "deactivation counted", func() bool {
		return metric(t, svc, "moraine_delivery_webhooks_deactivated_total", "free_double_failures") == 1
	})

	// The five queued messages' third attempts come due while the webhook
	// is inactive: dropped and recorded, not sent.
	deliverytest.Eventually(t, 20*time.Second, "five dropped retries", func() bool {
		n := 0
		for _, r := range env.Deliveries(hook) {
			if r.Result == accountdb.ResultInactive && r.Attempt == 3 {
				n++
			}
		}
		return n == 5
	})
	require.Len(t, rc.Requests(), 12)

	// Reactivation: the failure count starts again, new messages arrive.
	rc.Respond(nil)
	env.SetStatus(acc, hook, accountdb.StatusActive)
	time.Sleep(500 * time.Millisecond) // the table reads the change
	m := deliverytest.Activity(acc, hook, 50)
	env.Produce(m)
	deliverytest.Eventually(t, 20*time.Second, "delivery after reactivation", func() bool { return len(rc.ByMessage()[m.MessageId]) == 1 })
	require.Equal(t, accountdb.StatusActive, env.Status(acc, hook))
}

// TestIsolationFromASlowEndpoint: an endpoint that hangs past the attempt
// timeout does not delay another endpoint's messages on the same
// partition.
func TestIsolationFromASlowEndpoint(t *testing.T) {
	env := deliverytest.New(t)
	slow := deliverytest.NewReceiver(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	slow.Respond(func(r *http.Request, _ []byte) int {
		select {
		case <-r.Context().Done():
		case <-release:
		}
		return http.StatusOK
	})
	fast := deliverytest.NewReceiver(t)
	acc := env.Account("pro", deliverytest.Secret)
	slowHook := env.Webhook(acc, slow.URL)
	fastHook := env.Webhook(acc, fast.URL)
	cfg := env.Config()
	cfg.Delivery.AttemptTimeout = 2 * time.Second
	cfg.Delivery.MaxPerHost = 4
	cfg.Delivery.MaxHostQueue = 8
	cfg.Delivery.HostQueueTimeout = 500 * time.Millisecond
	cfg.Delivery.PartitionWindow = 32
	require.NoError(t, cfg.Delivery.Schedule.Set("1h"))
	svc := deliverytest.Start(t, cfg)

	sent := map[string]time.Time{}
	for i := range 40 {
		s := deliverytest.Activity(acc, slowHook, i)
		f := deliverytest.Activity(acc, fastHook, 1000+i)
		sent[f.MessageId] = time.Now()
		env.Produce(s, f)
		time.Sleep(10 * time.Millisecond)
	}
	deliverytest.Eventually(t, 30*time.Second, "40 fast deliveries", func() bool { return len(fast.ByMessage()) == 40 })
	var lat []time.Duration
	for id, reqs := range fast.ByMessage() {
		lat = append(lat, reqs[0].At.Sub(sent[id]))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("fast endpoint latency: p50 %s, max %s", lat[len(lat)/2], lat[len(lat)-1])
	require.Less(t, lat[len(lat)-1], time.Second, "the healthy endpoint waited behind the hanging one")
	// The slow endpoint's messages time out or are parked, and the
	// partition's commit moves past them.
	deliverytest.Eventually(t, 30*time.Second, "slow messages handled", func() bool {
		return metric(t, svc, "moraine_delivery_attempts_total", "timeout")+metric(t, svc, "moraine_delivery_deferred_total", "") >= 40
	})
	require.Positive(t, metric(t, svc, "moraine_delivery_deferred_total", ""))
}

// metric reads a counter or gauge: the series whose only label has value
// label, or the unlabelled one when label is "".
func metric(t *testing.T, svc *deliverytest.Service, name, label string) float64 {
	t.Helper()
	mfs, err := svc.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if (label == "" && len(m.GetLabel()) == 0) || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label) {
				if m.GetCounter() != nil {
					return m.GetCounter().GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no series %s{%s}", name, label)
	return 0
}
