package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/accountdb/accountdbtest"
	"github.com/moraine-data/moraine/pkg/testenv"
)

func TestCommands(t *testing.T) {
	_, ch, _ := accountdbtest.Open(t)
	ctx := context.Background()
	cli := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		args = append(args, "--clickhouse.addr", ch.Addr, "--clickhouse.database", ch.Database)
		if args[0] == "plan" || args[0] == "help" {
			args = args[:len(args)-4]
		}
		code := run(ctx, args, &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, acc, stderr := cli("account", "create", "--name", "acme", "--plan", "growth")
	require.Equal(t, 0, code, stderr)
	acc = strings.TrimSpace(acc)
	require.Len(t, acc, 36)
	code, out, _ := cli("account", "list")
	require.Equal(t, 0, code)
	require.Contains(t, out, acc)
	require.Contains(t, out, "growth")
	// The active webhooks, what the plan limits: one active and one
	// inactive webhook count as 1.
	db, _ := accountdbtest.Connect(t, ch)
	for i, status := range []string{accountdb.StatusActive, accountdb.StatusInactive} {
		require.NoError(t, db.PutWebhook(ctx, accountdb.Webhook{AccountID: acc, ID: fmt.Sprintf("w%d", i), Status: status, Version: 1}))
	}
	code, out, _ = cli("account", "list")
	require.Equal(t, 0, code)
	require.Contains(t, out, "ACTIVE WEBHOOKS")
	require.Regexp(t, acc+`\s+acme\s+growth\s+1\s`, out)

	code, key, stderr := cli("key", "create", "--account", acc)
	require.Equal(t, 0, code, stderr)
	key = strings.TrimSpace(key)
	require.Regexp(t, `^mk_[0-9a-f]{64}$`, key)
	require.Contains(t, stderr, "only time the key is shown")
	code, out, _ = cli("key", "list", "--account", acc)
	require.Equal(t, 0, code)
	require.Contains(t, out, key[:11])
	require.NotContains(t, out, key, "the key itself is never listed")
	keyID := strings.Fields(strings.Split(out, "\n")[1])[0]
	code, _, stderr = cli("key", "revoke", "--key-id", keyID)
	require.Equal(t, 0, code, stderr)
	code, out, _ = cli("key", "list", "--account", acc)
	require.Equal(t, 0, code)
	require.NotContains(t, strings.Split(out, "\n")[1], " -")

	code, _, stderr = cli("account", "set-plan", "--account", acc, "--plan", "pro")
	require.Equal(t, 0, code, stderr)

	// Operator keys: created as such, or set and unset later.
	code, _, stderr = cli("key", "create", "--account", acc, "--operator")
	require.Equal(t, 0, code, stderr)
	code, out, _ = cli("key", "list", "--account", acc)
	require.Equal(t, 0, code)
	require.Regexp(t, `OPERATOR\n.*\sno\n.*\syes\n`, out)
	code, _, stderr = cli("key", "set-operator", "--key-id", keyID)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "operator yes")
	op, err := db.IsOperator(ctx, keyID)
	require.NoError(t, err)
	require.True(t, op)
	code, _, _ = cli("key", "set-operator", "--key-id", keyID, "--operator=false")
	require.Equal(t, 0, code)
	op, err = db.IsOperator(ctx, keyID)
	require.NoError(t, err)
	require.False(t, op)
	code, _, _ = cli("key", "set-operator", "--key-id", "unknown")
	require.Equal(t, 1, code)

	// Usage, as an operator reads it: two requests of the account today.
	_, conn := accountdbtest.Connect(t, ch)
	b, err := conn.PrepareBatch(ctx, "INSERT INTO api_requests (account_id, at, request_id, route, status, compute_units)")
	require.NoError(t, err)
	for i, status := range []uint16{200, 404} {
		require.NoError(t, b.Append(acc, uint64(time.Now().UnixMilli()), fmt.Sprintf("%016d", i), "/v1/chains", status, uint32(1)))
	}
	require.NoError(t, b.Send())
	code, out, stderr = cli("usage", "--group-by", "responseCode")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `TIME\s+GROUP\s+REQUESTS.*\n.*\s200\s+1\s+100\.0\s.*\n.*\s404\s+1\s+0\.0\s+\S+\s+1\s+1\s+1\n`, out)
	code, out, _ = cli("usage", "--org", "someone-else")
	require.Equal(t, 0, code)
	require.Equal(t, 1, strings.Count(out, "\n"), "the header only")
	code, _, stderr = cli("usage", "--interval", "yearly")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "none of minute")

	path := filepath.Join(t.TempDir(), "dev-api-key")
	code, k1, stderr := cli("dev-key", "--out", path)
	require.Equal(t, 0, code, stderr)
	code, k2, _ := cli("dev-key", "--out", path)
	require.Equal(t, 0, code)
	require.Equal(t, k1, k2)

	code, out, _ = cli("plan", "list")
	require.Equal(t, 0, code)
	require.Contains(t, out, "8000")
	require.Contains(t, out, "2000000")

	for _, bad := range [][]string{
		{"account", "create", "--plan", "free"},
		{"account", "create", "--name", "x", "--plan", "gold"},
		{"key", "create"},
		{"nope"},
	} {
		code, _, _ := cli(bad...)
		require.Equal(t, 2, code, "%v", bad)
	}
	code, _, _ = cli("key", "revoke", "--key-id", "unknown")
	require.Equal(t, 1, code)
}

// A usage error is found before any connection is made: ClickHouse is not
// reachable at the address given, and the answer is still the usage error.
func TestUsageErrorsBeforeConnecting(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"key", "create"}, "--account is required"},
		{[]string{"account", "set-plan", "--account", "a"}, "--plan is required"},
		{[]string{"account", "create", "--name", "x", "--plan", "gold"}, "plan must be one of"},
		{[]string{"dev-key", "--plan", "gold"}, "plan must be one of"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append(c.args, "--clickhouse.addr", "127.0.0.1:1"), &out, &errOut)
		require.Equal(t, 2, code, "%v: %s", c.args, errOut.String())
		require.Contains(t, errOut.String(), c.want, "%v", c.args)
	}
}

// TestStatusCommand runs `status` once, without sampling, against a fresh
// deployment: every chain of the file is listed, nothing indexed yet.
func TestStatusCommand(t *testing.T) {
	_, ch, _ := accountdbtest.Open(t)
	kc := testenv.Kafka(t)
	chainsFile := filepath.Join(t.TempDir(), "chains.json")
	require.NoError(t, os.WriteFile(chainsFile, []byte(`{"chains":[{"evmChainId":"4242","name":"Test chain","network":"devnet",
		"rpcUrls":["http://127.0.0.1:1"],"networkToken":{"name":"T","symbol":"T","decimals":18}}]}`), 0o644))
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"status", "--sample", "0", "--chains.file", chainsFile,
		"--kafka.brokers", kc.Brokers, "--kafka.topic-prefix", kc.TopicPrefix,
		"--clickhouse.addr", ch.Addr, "--clickhouse.database", ch.Database}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), "CHAIN  NAME")
	require.Regexp(t, `(?m)^4242\s+Test chain\s+\? \(node unreachable\)\s+\? \(nothing ingested yet\)\s+-`, out.String())
	require.Contains(t, out.String(), "CONSUMER GROUP")
}
