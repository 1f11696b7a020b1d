package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/data/storetest"
	"github.com/moraine-data/moraine/query/internal/ops/admin"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// TestSDKProduct runs sdktest/product.mjs: the official SDK's usage-metrics
// methods against the whole query service, over a request log written
// here (the recording path to it is package usage's and the processor's
// usagesink's tests, and e2e's), and its health checks, with a second
// instance whose health check fails.
func TestSDKProduct(t *testing.T) {
	chCfg, conn := testenv.ClickHouse(t)
	dir := sdkDir(t)
	_, url := startApp(t, func(c *Config) { c.ClickHouse = chCfg })
	// A second instance whose Kafka is unreachable: its health check fails.
	// Not ready either (/readyz waits for the reindexNft producer at
	// start-up): it is up once its live check answers.
	down := launchApp(t, func(c *Config) {
		c.ClickHouse = chCfg
		c.Webhooks.Kafka = kafkautil.Config{Brokers: "127.0.0.1:1"}
	})
	downURL := "http://" + down.APIAddr()
	require.Eventually(t, func() bool {
		resp, err := http.Get(downURL + "/v1/live-check")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "the second instance never answered its live check")
	db, err := accountdb.Open(conn, accountdb.DefaultConfig(), nil)
	require.NoError(t, err)
	adm := &admin.Admin{DB: db, Clock: accountdb.NewClock(nil)}
	ctx := context.Background()
	newKey := func(name string) (string, string, string) {
		acc, err := adm.CreateAccount(ctx, name, plan.Enterprise)
		require.NoError(t, err)
		nk, err := adm.CreateKey(ctx, acc.ID)
		require.NoError(t, err)
		return acc.ID, nk.ID, nk.Key
	}
	account, keyID, key := newKey("sdk-usage")
	_, opID, opKey := newKey("sdk-operator")
	require.NoError(t, adm.SetOperator(ctx, opID, true))

	// Yesterday: 7 requests of the account (2 of them 404s), 1 of another.
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
	b, err := conn.PrepareBatch(ctx, `INSERT INTO api_requests (account_id, at, request_id, key_id, key_alias, route, operation,
    method, chain_id, status, duration_us, compute_units, client_ip, user_agent, host, region)`)
	require.NoError(t, err)
	for i := range 8 {
		acc, status := account, uint16(200)
		if i%3 == 2 {
			status = 404
		}
		if i == 7 {
			acc = "another"
		}
		require.NoError(t, b.Append(acc, uint64(day.Add(time.Duration(i)*time.Hour).UnixMilli()), fmt.Sprintf("%016d", i), keyID,
			"mk_x", "/v1/chains/:chainId/blocks", "getLatestBlocks", "GET", "43114", status, uint64(1000+500*i), uint32(10),
			"203.0.113.1", "node", "localhost", ""))
	}
	require.NoError(t, b.Send())
	// History to export: an address's transactions on the C-Chain over two
	// days (timestamps 1_700_000_000 + 2n: 2023-11-14 and 15), some with
	// another address too, one on another address only.
	require.NoError(t, storetest.InsertBlocks(ctx, conn, storetest.Chain(43114, 1, 4000, 1, "export")))
	require.NoError(t, storetest.SetHead(ctx, conn, storetest.Chain(43114, 4000, 4000, 1, "export")[0], 1))
	who, other := storetest.Address(0xe1), storetest.Address(0xe2)
	var rows []storetest.IndexRow
	var txs []string
	for _, n := range []uint64{100, 200, 3199, 3300, 3999} {
		b := storetest.Chain(43114, n, n, 1, "export")[0]
		h := storetest.HashOf(43114, n, "export-tx")
		row := storetest.IndexRow{ChainID: 43114, Address: who, List: schema.ListTransactions, Block: n, BlockHash: b.Hash, TxHash: h,
			Roles: schema.RoleSender, From: who, To: other, Value: "7", Gas: 21000, GasPrice: "25000000000", Status: 1, GasUsed: 21000,
			TxType: 2, BlockTime: &b.Timestamp, Version: 1}
		rows = append(rows, row)
		txs = append(txs, h.Hex())
	}
	rows = append(rows, storetest.IndexRow{ChainID: 43114, Address: other, List: schema.ListTransactions, Block: 150,
		BlockHash: storetest.HashOf(43114, 150, "export"), TxHash: storetest.HashOf(43114, 150, "other"), Version: 1})
	require.NoError(t, storetest.InsertIndex(ctx, conn, rows))
	fx, err := json.Marshal(map[string]any{"account": account, "keyId": keyID, "day": day.Unix(), "logs": 7, "notFound": 2,
		"perDay": [][2]int64{{day.Unix(), 7}},
		"export": map[string]any{"address": checksum(who), "firstDate": "2023-11-14", "lastDate": "2023-11-15", "txs": txs}})
	require.NoError(t, err)

	nctx, ncancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer ncancel()
	cmd := exec.CommandContext(nctx, "node", "product.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MORAINE_SDKTEST_URL="+url, "MORAINE_SDKTEST_KEY="+key,
		"MORAINE_SDKTEST_OPERATOR_KEY="+opKey, "MORAINE_SDKTEST_FIXTURE="+string(fx), "MORAINE_SDKTEST_DOWN_URL="+downURL)
	out, err := cmd.CombinedOutput()
	t.Logf("node product.mjs:\n%s", out)
	require.NoError(t, err, "the SDK product contract failed")
	require.Contains(t, string(out), ", 0 failures")
}
