package webhookapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/webhooks/reconcile"
	"github.com/moraine-data/moraine/query/internal/webhooks/webhookapi"
	"github.com/moraine-data/moraine/query/internal/webhooks/webhookapi/webhookapitest"
)

// The crash test runs every change in a child process (this test binary,
// TestCrashHelper) that exits abruptly (os.Exit: no deferred code, no
// flush of Kafka buffers) at one step of the change, then "restarts": a
// fresh reconciler runs against the same ClickHouse database and topic.
// After every crash the topic must agree with ClickHouse exactly (nothing
// ClickHouse holds is missing or stale on the topic, nothing is on the
// topic that ClickHouse does not hold), an acknowledged change must be
// present, and a create the client retries must not make a second webhook.

const (
	envHelper  = "MORAINE_CRASH_HELPER"
	envCHAddr  = "MORAINE_CRASH_CH_ADDR"
	envCHDB    = "MORAINE_CRASH_CH_DB"
	envPrefix  = "MORAINE_CRASH_TOPIC_PREFIX"
	envOp      = "MORAINE_CRASH_OP"
	envStep    = "MORAINE_CRASH_STEP"
	envKey     = "MORAINE_CRASH_KEY"
	envWebhook = "MORAINE_CRASH_WEBHOOK"
	crashCode  = 77
)

// request is the HTTP call of each change.
func request(op webhookapi.Op, id string) (method, path string, body any) {
	switch op {
	case webhookapi.OpCreate:
		return "POST", "/v1/webhooks", createBody(addr1, addr2)
	case webhookapi.OpUpdate:
		return "PATCH", "/v1/webhooks/" + id, map[string]any{"name": "renamed", "includeLogs": true}
	case webhookapi.OpDeactivate:
		return "DELETE", "/v1/webhooks/" + id, nil
	case webhookapi.OpAddAddresses:
		return "PATCH", "/v1/webhooks/" + id + "/addresses", map[string]any{"addresses": []string{addrN(1), addrN(2)}}
	case webhookapi.OpRemoveAddresses:
		return "DELETE", "/v1/webhooks/" + id + "/addresses", map[string]any{"addresses": []string{addr1}}
	case webhookapi.OpRotateSecret:
		return "POST", "/v1/webhooks:generateOrRotateSharedSecret", nil
	}
	panic("unknown op " + op)
}

// TestCrashHelper is the child process; it does nothing in a normal run.
func TestCrashHelper(t *testing.T) {
	if os.Getenv(envHelper) != "1" {
		t.Skip("child process of TestCrashAtEveryStep")
	}
	op, step := webhookapi.Op(os.Getenv(envOp)), webhookapi.Step(os.Getenv(envStep))
	ch := chclient.Config{Addr: os.Getenv(envCHAddr), Database: os.Getenv(envCHDB), User: "default", ReadTimeout: 30 * time.Second}
	k := kafkautil.Config{Brokers: os.Getenv("MORAINE_KAFKA_BROKERS"), TopicPrefix: os.Getenv(envPrefix)}
	env := webhookapitest.Start(t, webhookapitest.Options{
		CH: &ch, Kafka: &k, NoReconciler: true,
		Hooks: webhookapi.Hooks{Step: func(o webhookapi.Op, s webhookapi.Step) {
			if o == op && s == step {
				os.Exit(crashCode)
			}
		}},
	})
	method, path, body := request(op, os.Getenv(envWebhook))
	r := env.Do(t, method, path, os.Getenv(envKey), body)
	fmt.Printf("ACK %d %s\n", r.Code, r.Body)
	os.Exit(0)
}

type crashCase struct {
	op   webhookapi.Op
	step webhookapi.Step // "": no crash
}

func TestCrashAtEveryStep(t *testing.T) {
	var cases []crashCase
	for _, op := range []webhookapi.Op{webhookapi.OpCreate, webhookapi.OpUpdate, webhookapi.OpDeactivate,
		webhookapi.OpAddAddresses, webhookapi.OpRemoveAddresses, webhookapi.OpRotateSecret} {
		steps := []webhookapi.Step{webhookapi.StepBeforeWrite, webhookapi.StepWritten, webhookapi.StepPublished, ""}
		if op == webhookapi.OpCreate {
			steps = append([]webhookapi.Step{webhookapi.StepAddressesWritten}, steps...)
		}
		for _, s := range steps {
			cases = append(cases, crashCase{op, s})
		}
	}
	// The parent's own API instance prepares each case; it runs no
	// reconciler, so only the restarted one below repairs anything.
	env := webhookapitest.Start(t, webhookapitest.Options{NoReconciler: true})
	for _, tc := range cases {
		name := string(tc.op) + "/" + string(tc.step)
		if tc.step == "" {
			name = string(tc.op) + "/no-crash"
		}
		t.Run(name, func(t *testing.T) { runCrashCase(t, env, tc) })
	}
}

func runCrashCase(t *testing.T, env *webhookapitest.Env, tc crashCase) {
	_, key := env.NewAccount(t, plan.Free)
	id := ""
	if tc.op != webhookapi.OpCreate {
		r := env.Do(t, "POST", "/v1/webhooks", key, createBody(addr1, addr2))
		require.Equal(t, http.StatusCreated, r.Code)
		id = r.JSON(t)["id"].(string)
	}
	if tc.op == webhookapi.OpRotateSecret {
		require.Equal(t, http.StatusCreated, env.Do(t, "POST", "/v1/webhooks:generateOrRotateSharedSecret", key, nil).Code)
	}
	before := ""
	if id != "" {
		before = string(env.Do(t, "GET", "/v1/webhooks/"+id, key, nil).Body)
	}
	secretBefore := env.Do(t, "GET", "/v1/webhooks:getSharedSecret", key, nil).JSON(t)["secret"]

	// Run the change in a child process that dies at tc.step.
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), envHelper+"=1", envCHAddr+"="+env.CH.Addr, envCHDB+"="+env.CH.Database,
		envPrefix+"="+env.Kafka.TopicPrefix, envOp+"="+string(tc.op), envStep+"="+string(tc.step),
		envKey+"="+key, envWebhook+"="+id)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ack struct {
		code int
		body map[string]any
	}
	if tc.step != "" {
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee) && ee.ExitCode() == crashCode, "child did not crash at %s: %v\n%s", tc.step, err, out.String())
	} else {
		require.NoError(t, err, "%s", out.String())
		line := ""
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(l, "ACK ") {
				line = l
			}
		}
		require.NotEmpty(t, line, "%s", out.String())
		parts := strings.SplitN(line, " ", 3)
		_, err := fmt.Sscan(parts[1], &ack.code)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal([]byte(parts[2]), &ack.body))
		require.Less(t, ack.code, 300, line)
	}

	// Restart: a fresh reconciler on the same database and topic.
	w, err := reconcile.New(webhookapitest.TestWatchConfig(), reconcile.Deps{
		Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(), Kafka: env.Kafka, Store: env.DB, Locks: watch.NewLocks(),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	webhookapitest.WaitAgree(t, env.DB, env.Kafka, 15*time.Second)

	// What the client sees after the restart.
	switch tc.op {
	case webhookapi.OpCreate:
		list := env.Do(t, "GET", "/v1/webhooks", key, nil).JSON(t)["webhooks"].([]any)
		// The client got no answer (or an answer): it retries the same
		// create, which must leave exactly one webhook.
		r := env.Do(t, "POST", "/v1/webhooks", key, createBody(addr1, addr2))
		require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
		after := env.Do(t, "GET", "/v1/webhooks", key, nil).JSON(t)["webhooks"].([]any)
		require.Len(t, after, 1)
		if len(list) == 1 {
			require.Equal(t, list[0].(map[string]any)["id"], r.JSON(t)["id"], "retry made a second webhook")
		}
		if ack.code != 0 {
			require.Equal(t, ack.body["id"], r.JSON(t)["id"])
		}
		require.ElementsMatch(t, []any{addr1, addr2}, r.JSON(t)["metadata"].(map[string]any)["addresses"])
		webhookapitest.WaitAgree(t, env.DB, env.Kafka, 15*time.Second)
	case webhookapi.OpRotateSecret:
		got := env.Do(t, "GET", "/v1/webhooks:getSharedSecret", key, nil).JSON(t)["secret"]
		if ack.code != 0 {
			require.Equal(t, ack.body["secret"], got, "acknowledged secret lost")
		}
		if tc.step == webhookapi.StepBeforeWrite {
			require.Equal(t, secretBefore, got, "a change that was never written appeared")
		}
	default:
		now := string(env.Do(t, "GET", "/v1/webhooks/"+id, key, nil).Body)
		if ack.code != 0 {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(now), &m))
			require.Equal(t, ack.body, m, "acknowledged change lost")
		}
		if tc.step == webhookapi.StepBeforeWrite {
			require.JSONEq(t, before, now, "a change that was never written appeared")
		}
	}
}
