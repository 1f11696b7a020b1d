package app_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/delivery/internal/deliverytest"
	"github.com/moraine-data/moraine/delivery/internal/pipeline"
	"github.com/moraine-data/moraine/delivery/internal/sign"
	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// TestReplayedMessages: messages of the replay topic arrive with their
// sequence, the moraine-replay header and a valid moraine-signature, and
// are logged under their replay; they take the replays' own attempt slots,
// so a live message to the same endpoint host is not held behind a slow
// replay; a replayed message that fails every attempt is given up and
// counts toward no deactivation.
func TestReplayedMessages(t *testing.T) {
	env := deliverytest.New(t)
	rc := deliverytest.NewReceiver(t)
	var slowReplays atomic.Bool
	slowReplays.Store(true)
	rc.Respond(func(r *http.Request, _ []byte) int {
		switch {
		case strings.HasSuffix(r.URL.Path, "/failing"):
			return http.StatusInternalServerError
		case r.Header.Get(sign.HeaderReplay) != "" && slowReplays.Load():
			time.Sleep(3 * time.Second)
		}
		return http.StatusOK
	})
	acc := env.Account("free", deliverytest.Secret)
	hook := env.Webhook(acc, rc.URL)
	failing := env.Webhook(acc, rc.URL+"/failing")
	cfg := env.Config()
	// One attempt slot for each kind, per host: a live message that had
	// to share the replays' would wait for a slow replay.
	cfg.Delivery.MaxPerHost, cfg.Delivery.ReplayMaxPerHost, cfg.Delivery.ReplayMaxInFlight = 1, 1, 1
	cfg.Delivery.ReplaySchedule = pipeline.Schedule{100 * time.Millisecond, 100 * time.Millisecond}
	svc := deliverytest.Start(t, cfg)

	const replayID = "5b0f7a6e-3c2d-4e1f-8a9b-0c1d2e3f4a5b"
	var replayed []*record.Activity
	for i := range 3 {
		a := deliverytest.Activity(acc, hook, 1000+i)
		a.Sequence, a.ReplayId, a.Retransmission, a.BlockFetchedAtUnixMs = uint64(7+i), replayID, true, 0
		replayed = append(replayed, a)
	}
	env.ProduceTo(topics.Replay, replayed...)
	deliverytest.Eventually(t, 30*time.Second, "the first replayed message in flight", func() bool {
		return metric(t, svc, "moraine_delivery_replay_in_flight", "") == 1
	})
	live := deliverytest.Activity(acc, hook, 1)
	live.Sequence = 20
	sent := time.Now()
	env.Produce(live)
	deliverytest.Eventually(t, 30*time.Second, "the live message", func() bool { return len(rc.ByMessage()[live.MessageId]) == 1 })
	if d := rc.ByMessage()[live.MessageId][0].At.Sub(sent); d > 2*time.Second {
		t.Errorf("the live message arrived %v after it was produced, behind the replay", d)
	}
	require.Less(t, len(rc.ByMessage()[replayed[2].MessageId]), 1, "the replayed messages are still on their way (one at a time, 3 s each)")
	slowReplays.Store(false)
	deliverytest.Eventually(t, 30*time.Second, "the replayed messages", func() bool {
		for _, a := range replayed {
			if len(rc.ByMessage()[a.MessageId]) == 0 {
				return false
			}
		}
		return true
	})
	key, err := sign.Key(deliverytest.Secret, sign.Hex)
	require.NoError(t, err)
	for _, a := range replayed {
		r := rc.ByMessage()[a.MessageId][0]
		require.Equal(t, a.Payload, r.Body)
		require.Equal(t, replayID, r.Header.Get(sign.HeaderReplay))
		require.Equal(t, strconv.FormatUint(a.Sequence, 10), r.Header.Get(sign.HeaderSequence))
		require.Equal(t, sign.KindActivity, r.Header.Get(sign.HeaderMessageKind))
		ts, err := strconv.ParseInt(r.Header.Get(sign.HeaderWebhookTimestamp), 10, 64)
		require.NoError(t, err)
		want := sign.WithStream(sign.Sign(key, a.MessageId, ts, a.Payload), key,
			sign.Stream{Sequence: a.Sequence, Kind: sign.KindActivity, ReplayID: replayID}, a.Payload)
		require.Equal(t, want.StreamSignature, r.Header.Get(sign.HeaderStreamSignature))
	}
	require.Empty(t, rc.ByMessage()[live.MessageId][0].Header.Get(sign.HeaderReplay))

	// A replayed message that keeps failing: 3 attempts, given up, no strike.
	bad := deliverytest.Activity(acc, failing, 2000)
	bad.Sequence, bad.ReplayId = 1, replayID
	env.ProduceTo(topics.Replay, bad)
	deliverytest.Eventually(t, 30*time.Second, "the failing replayed message given up", func() bool {
		return metric(t, svc, "moraine_delivery_replay_messages_given_up_total", "") == 1
	})
	require.Len(t, rc.ByMessage()[bad.MessageId], 3)
	require.Equal(t, 3.0, metric(t, svc, "moraine_delivery_replay_attempts_total", accountdb.ResultHTTPError))
	n, err := env.DB.CountStrikes(context.Background(), failing, accountdb.StrikeDoubleFailure)
	require.NoError(t, err)
	require.Zero(t, n, "replay failures count toward no deactivation")
	require.Equal(t, accountdb.StatusActive, env.Status(acc, failing))

	// The log keeps the replay's attempts under its id.
	deliverytest.Eventually(t, 10*time.Second, "the replay's log rows", func() bool {
		c, err := env.DB.ReplayDeliveryCounts(context.Background(), hook, replayID, 0)
		f, err2 := env.DB.ReplayDeliveryCounts(context.Background(), failing, replayID, 0)
		return err == nil && err2 == nil && c.Delivered == 3 && f.Failed == 1 && f.Delivered == 0
	})
}
