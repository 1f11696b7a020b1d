package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/delivery/internal/app"
	"github.com/moraine-data/moraine/delivery/internal/deliverytest"
	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/schemas/record"
)

const envChild = "MORAINE_DELIVERY_CHILD_CONFIG"

// TestDeliveryChild is the delivery process of TestPendingRetrySurvivesSIGKILL:
// this test binary re-executed, running the service until it is killed.
func TestDeliveryChild(t *testing.T) {
	raw := os.Getenv(envChild)
	if raw == "" {
		t.Skip("child process of TestPendingRetrySurvivesSIGKILL")
	}
	var cfg app.Config
	require.NoError(t, json.Unmarshal([]byte(raw), &cfg))
	logger, err := obs.NewLogger(obs.LogConfig{Level: "info", Format: "text"}, os.Stderr, "delivery-child")
	require.NoError(t, err)
	a, err := app.New(cfg, app.Deps{Logger: logger, Registry: prometheus.NewRegistry()})
	require.NoError(t, err)
	require.NoError(t, a.Run(context.Background()))
}

// startChild runs the delivery service in a child process.
func startChild(t *testing.T, cfg app.Config, logPath string) *exec.Cmd {
	t.Helper()
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^TestDeliveryChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"="+string(raw))
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	return cmd
}

// TestPendingRetrySurvivesSIGKILL: messages wait on a retry level for
// their third attempt when delivery is killed with SIGKILL (no shutdown,
// no flush); a new process makes the third attempts when they come due,
// with the same messageId.
func TestPendingRetrySurvivesSIGKILL(t *testing.T) {
	env := deliverytest.New(t)
	rc := deliverytest.NewReceiver(t)
	rc.Respond(func(*http.Request, []byte) int { return http.StatusBadGateway })
	acc := env.Account("pro", deliverytest.Secret)
	hook := env.Webhook(acc, rc.URL)
	cfg := env.Config()
	wait := 3 * time.Second
	require.NoError(t, cfg.Delivery.Schedule.Set("200ms,3s,1h,1h,1h,1h,1h,1h,1h"))
	logPath := filepath.Join(t.TempDir(), "child.log")
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("child log:\n%s", b)
		}
	}()

	first := startChild(t, cfg, logPath)
	deliverytest.WaitReady(t, cfg.Ops.ListenAddress, 60*time.Second)
	msgs := []string{}
	for i := range 3 {
		a := deliverytest.Activity(acc, hook, i)
		msgs = append(msgs, a.MessageId)
		env.Produce(a)
	}
	deliverytest.Eventually(t, 30*time.Second, "attempts 1 and 2 of every message", func() bool {
		by := rc.ByMessage()
		for _, m := range msgs {
			if len(by[m]) < 2 {
				return false
			}
		}
		return true
	})
	require.NoError(t, first.Process.Kill()) // SIGKILL: nothing flushed, nothing committed on the way out
	_, _ = first.Process.Wait()
	killedAt := time.Now()
	secondAttempt := map[string]time.Time{}
	for m, reqs := range rc.ByMessage() {
		secondAttempt[m] = reqs[len(reqs)-1].At
	}

	startChild(t, cfg, logPath)
	deliverytest.WaitReady(t, cfg.Ops.ListenAddress, 60*time.Second)
	deliverytest.Eventually(t, 30*time.Second, "third attempts after the restart", func() bool {
		by := rc.ByMessage()
		for _, m := range msgs {
			last := by[m][len(by[m])-1]
			if !last.At.After(killedAt) || last.At.Before(secondAttempt[m].Add(wait-50*time.Millisecond)) {
				return false
			}
		}
		return true
	})
	// The delivery log of the new process names them attempt 3.
	deliverytest.Eventually(t, 10*time.Second, "attempt-3 rows", func() bool {
		n := map[string]bool{}
		for _, r := range env.Deliveries(hook) {
			if r.Attempt == 3 && r.Result == accountdb.ResultHTTPError {
				n[r.MessageID] = true
			}
		}
		return len(n) == len(msgs)
	})
	for _, m := range msgs {
		for _, r := range rc.ByMessage()[m] {
			require.Equal(t, m, r.Header.Get("webhook-id"))
		}
	}
}

// TestNoLossUnderSIGKILL is the delivery side of the no-loss ledger:
// messages flow while delivery is killed with SIGKILL twice mid-traffic
// (some first attempts failing, so retries are pending too); after the
// last restart every message of the ledger has been answered 2xx at least
// once, and every copy of a message carries its messageId.
func TestNoLossUnderSIGKILL(t *testing.T) {
	env := deliverytest.New(t)
	rc := deliverytest.NewReceiver(t)
	rc.Respond(func(r *http.Request, _ []byte) int {
		time.Sleep(2 * time.Millisecond)
		id := r.Header.Get("webhook-id")
		if id[len(id)-1]%3 == 0 && len(rc.ByMessage()[id]) == 0 {
			return http.StatusInternalServerError // a first attempt fails
		}
		return http.StatusOK
	})
	acc := env.Account("pro", deliverytest.Secret)
	hooks := []string{env.Webhook(acc, rc.URL+"/a"), env.Webhook(acc, rc.URL+"/b"), env.Webhook(acc, rc.URL+"/c")}
	cfg := env.Config()
	require.NoError(t, cfg.Delivery.Schedule.Set("300ms,300ms,300ms,300ms,300ms,300ms,300ms,300ms,300ms"))
	logPath := filepath.Join(t.TempDir(), "child.log")
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("child log:\n%s", b)
		}
	}()

	ledger := map[string][]byte{}
	produced := make(chan struct{})
	var acts []*record.Activity
	for i := range 300 {
		a := deliverytest.Activity(acc, hooks[i%3], i)
		ledger[a.MessageId] = a.Payload
		acts = append(acts, a)
	}
	child := startChild(t, cfg, logPath)
	deliverytest.WaitReady(t, cfg.Ops.ListenAddress, 60*time.Second)
	go func() {
		defer close(produced)
		for i := 0; i < len(acts); i += 10 {
			env.Produce(acts[i : i+10]...)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	for kill := range 2 {
		// Kill while this process is delivering.
		before := len(rc.Requests())
		deliverytest.Eventually(t, 30*time.Second, "traffic", func() bool { return len(rc.Requests()) >= before+30 })
		require.NoError(t, child.Process.Kill())
		_, _ = child.Process.Wait()
		t.Logf("kill %d: %d requests so far", kill+1, len(rc.Requests()))
		child = startChild(t, cfg, logPath)
	}
	<-produced
	deliverytest.Eventually(t, 60*time.Second, "every message of the ledger answered 2xx", func() bool {
		ok := map[string]bool{}
		for _, r := range rc.Requests() {
			if r.Code == http.StatusOK {
				ok[r.Header.Get("webhook-id")] = true
			}
		}
		return len(ok) == len(ledger)
	})
	dups := 0
	for id, reqs := range rc.ByMessage() {
		body, known := ledger[id]
		require.True(t, known, "a message nobody produced: %s", id)
		for _, r := range reqs {
			require.Equal(t, body, r.Body, "every copy of %s is the same message", id)
		}
		dups += len(reqs) - 1
	}
	t.Logf("%d messages, %d requests (%d repeats: retries and redeliveries)", len(ledger), len(rc.Requests()), dups)
}
