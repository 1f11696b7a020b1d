package app

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/ops/admin"
	"github.com/moraine-data/moraine/query/internal/webhooks/webhookapi/webhookapitest"
)

// TestSDKWebhooks runs sdktest/webhooks.mjs: the official SDK calls every
// webhook, address and shared-secret method against the whole query
// service (block routes, auth, rate limits, webhook routes, the
// address-watch publisher and reconciler) with real keys, and checks its
// typed errors. Then every change must be on the address-watch topic.
func TestSDKWebhooks(t *testing.T) {
	chCfg, conn := testenv.ClickHouse(t)
	k := testenv.Kafka(t)
	dir := sdkDir(t)
	tmp := t.TempDir()
	chainsFile := filepath.Join(tmp, "chains.json")
	require.NoError(t, os.WriteFile(chainsFile, []byte(webhookapitest.Chains), 0o600))
	plansFile := filepath.Join(tmp, "plans.json")
	require.NoError(t, os.WriteFile(plansFile, []byte(`{"plans":{"growth":{"cuPerMinute":30}}}`), 0o600))
	_, url := startApp(t, func(c *Config) {
		c.ClickHouse = chCfg
		c.ChainsFile = chainsFile
		c.Webhooks.Kafka = k
		c.Plans.File = plansFile
		c.Webhooks.Watch = webhookapitest.TestWatchConfig()
	})
	db, err := accountdb.Open(conn, accountdb.DefaultConfig(), nil)
	require.NoError(t, err)
	adm := &admin.Admin{DB: db, Clock: accountdb.NewClock(nil)}
	ctx := context.Background()
	key := func(p string) string {
		acc, err := adm.CreateAccount(ctx, "sdk-"+p, p)
		require.NoError(t, err)
		nk, err := adm.CreateKey(ctx, acc.ID)
		require.NoError(t, err)
		return nk.Key
	}
	freeKey := key(plan.Free)

	// Block and chain reads carry the rate-limit headers with and without
	// a key, and a bad key is refused there too.
	for _, tc := range []struct {
		key, policy string
		code        int
	}{
		{"", "6000;w=60, 1200000;w=86400", 200},
		{freeKey, "8000;w=60, 2000000;w=86400", 200},
		{"mk_0000000000000000000000000000000000000000000000000000000000000000", "6000;w=60, 1200000;w=86400", 401},
	} {
		req, _ := http.NewRequest("GET", url+"/v1/chains", nil)
		if tc.key != "" {
			req.Header.Set("x-glacier-api-key", tc.key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, tc.code, resp.StatusCode)
		require.Equal(t, tc.policy, resp.Header.Get("ratelimit-policy"))
		require.NotEmpty(t, resp.Header.Get("ratelimit-remaining"))
	}

	nctx, ncancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer ncancel()
	cmd := exec.CommandContext(nctx, "node", "webhooks.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MORAINE_SDKTEST_URL="+url, "MORAINE_SDKTEST_KEY="+freeKey,
		"MORAINE_SDKTEST_OTHER_KEY="+key(plan.Free), "MORAINE_SDKTEST_LIMITED_KEY="+key(plan.Growth),
		"MORAINE_SDKTEST_CHAIN=43112", "MORAINE_SDKTEST_NO_TRACES=4337")
	out, err := cmd.CombinedOutput()
	t.Logf("node webhooks.mjs:\n%s", out)
	require.NoError(t, err, "the SDK webhook contract failed")
	require.Contains(t, string(out), ", 0 failures")
	webhookapitest.WaitAgree(t, db, k, 15*time.Second)
}
