package app

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/sha3"

	"github.com/moraine-data/moraine/pkg/guard/guardtest"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/data/storetest"
)

const (
	cChainBC = "2q9e4r6Mu3U68nU1fYjgbR6JvwrRx36CohpAX5UQxse55x1Q5"
	fujiBC   = "yH8D7ThNJkxmtkuv2jgBa4P1Rn3Qpr4pPr7QYNfcdoS6k6HWp"
)

const testChains = `{"chains": [
 {"evmChainId": "43114", "blockchainId": "` + cChainBC + `", "name": "Avalanche (C-Chain)", "network": "mainnet",
  "rpcUrls": ["http://127.0.0.1:1"], "publicRpcUrl": "https://api.avax.network/ext/bc/C/rpc",
  "networkToken": {"name": "Avalanche", "symbol": "AVAX", "decimals": 18}, "webhooks": true},
 {"evmChainId": "43113", "blockchainId": "` + fujiBC + `", "name": "Avalanche Fuji", "network": "fuji",
  "rpcUrls": ["http://127.0.0.1:1"], "networkToken": {"name": "Avalanche", "symbol": "AVAX", "decimals": 18}},
 {"evmChainId": "43112", "name": "Dev", "network": "devnet", "rpcUrls": ["http://127.0.0.1:1"],
  "networkToken": {"name": "Avalanche", "symbol": "AVAX", "decimals": 18}}
]}`

// checksum is EIP-55, written out again here so the test does not trust
// the code under test.
func checksum(a []byte) string {
	l := hex.EncodeToString(a)
	h := sha3.NewLegacyKeccak256()
	h.Write([]byte(l))
	sum := hex.EncodeToString(h.Sum(nil))
	var b strings.Builder
	b.WriteString("0x")
	for i, c := range l {
		if c >= 'a' && sum[i] >= '8' {
			b.WriteString(strings.ToUpper(string(c)))
		} else {
			b.WriteRune(c)
		}
	}
	return b.String()
}

type fxBlock struct {
	Number string `json:"number"`
	Hash   string `json:"hash"`
}

type fxTx struct {
	Hash       string `json:"hash"`
	From       string `json:"from"`
	To         string `json:"to"`
	CallType   string `json:"callType"`
	MethodHash string `json:"methodHash"`
	Status     string `json:"status"`
}

type fxChain struct {
	ChainID      string    `json:"chainId"`
	BlockchainID string    `json:"blockchainId,omitempty"`
	Name         string    `json:"name"`
	Blocks       []fxBlock `json:"blocks"` // newest first
	Granite      *struct {
		Number         string `json:"number"`
		TimestampMs    uint64 `json:"timestampMs"`
		MinDelayExcess uint64 `json:"minDelayExcess"`
	} `json:"granite,omitempty"`
	TxBlock *struct {
		Number string `json:"number"`
		Txs    []fxTx `json:"txs"`
	} `json:"txBlock,omitempty"`
	BigBlock *struct {
		Number  string `json:"number"`
		Hash    string `json:"hash"`
		TxCount int    `json:"txCount"`
	} `json:"bigBlock,omitempty"`
}

// seedSDKFixture writes the rows the SDK test reads and returns what they are.
func seedSDKFixture(t *testing.T, ctx context.Context, conn driver.Conn) []fxChain {
	t.Helper()
	c := fxChain{ChainID: "43114", BlockchainID: cChainBC, Name: "Avalanche (C-Chain)"}
	f := fxChain{ChainID: "43113", BlockchainID: fujiBC, Name: "Avalanche Fuji"}
	d := fxChain{ChainID: "43112", Name: "Dev", Blocks: []fxBlock{}}

	cb := storetest.Chain(43114, 1, 25, 1, "sdk")
	ms, q := uint64(1_700_000_050_250), uint64(7_477_290)
	cb[24].TimestampMs, cb[24].MinDelayExcess = &ms, &q
	c.Granite = &struct {
		Number         string `json:"number"`
		TimestampMs    uint64 `json:"timestampMs"`
		MinDelayExcess uint64 `json:"minDelayExcess"`
	}{"25", ms, q}
	cb[23].TxCount, cb[22].TxCount = 3, 120
	fb := storetest.Chain(43113, 10, 200, 10, "sdk")
	require.NoError(t, storetest.InsertBlocks(ctx, conn, cb))
	require.NoError(t, storetest.InsertBlocks(ctx, conn, fb))
	require.NoError(t, storetest.SetHead(ctx, conn, cb[24], 1))
	require.NoError(t, storetest.SetHead(ctx, conn, fb[len(fb)-1], 1))
	for i := len(cb) - 1; i >= 0; i-- {
		c.Blocks = append(c.Blocks, fxBlock{fmt.Sprint(cb[i].Number), cb[i].Hash.Hex()})
	}
	for i := len(fb) - 1; i >= 0; i-- {
		f.Blocks = append(f.Blocks, fxBlock{fmt.Sprint(fb[i].Number), fb[i].Hash.Hex()})
	}

	// Block 24: a native transfer, a failed contract call, a creation.
	b24 := cb[23]
	from, to, created := storetest.Address(1), storetest.Address(2), storetest.Address(3)
	base := storetest.Tx{ChainID: 43114, BlockNumber: 24, BlockHash: b24.Hash, BlockTimestamp: b24.Timestamp,
		From: from, Gas: 100000, GasPrice: "25000000000", Status: 1, GasUsed: 21000, Version: 1, Type: 2}
	t0, t1, t2 := base, base, base
	t0.Index, t0.Hash, t0.To, t0.Value = 0, storetest.HashOf(43114, 2400, "tx"), to, "1000000000000000000"
	t1.Index, t1.Hash, t1.To, t1.Value, t1.Input, t1.Status = 1, storetest.HashOf(43114, 2401, "tx"), to, "0",
		[]byte{0xa9, 0x05, 0x9c, 0xbb, 0, 0, 0}, 0
	t2.Index, t2.Hash, t2.ContractAddress, t2.Value, t2.Input = 2, storetest.HashOf(43114, 2402, "tx"), created, "0",
		[]byte{0x60, 0x80, 0x60, 0x40, 0x52}
	require.NoError(t, storetest.InsertTxs(ctx, conn, []storetest.Tx{t0, t1, t2}))
	c.TxBlock = &struct {
		Number string `json:"number"`
		Txs    []fxTx `json:"txs"`
	}{"24", []fxTx{
		{t0.Hash.Hex(), checksum(from), checksum(to), "NATIVE_TRANSFER", "", "1"},
		{t1.Hash.Hex(), checksum(from), checksum(to), "CONTRACT_CALL", "0xa9059cbb", "0"},
		{t2.Hash.Hex(), checksum(from), checksum(created), "CONTRACT_CREATION", "", "1"},
	}}

	// Block 23: 120 native transfers.
	b23 := cb[22]
	var big []storetest.Tx
	for i := range 120 {
		tx := base
		tx.BlockNumber, tx.BlockHash, tx.BlockTimestamp = 23, b23.Hash, b23.Timestamp
		tx.Index, tx.Hash, tx.To, tx.Value, tx.Nonce = uint32(i), storetest.HashOf(43114, uint64(23000+i), "tx"), to, "1", uint64(i)
		big = append(big, tx)
	}
	require.NoError(t, storetest.InsertTxs(ctx, conn, big))
	c.BigBlock = &struct {
		Number  string `json:"number"`
		Hash    string `json:"hash"`
		TxCount int    `json:"txCount"`
	}{"23", b23.Hash.Hex(), 120}
	return []fxChain{c, f, d}
}

// startApp runs the service in-process on free ports against the test
// database and waits until it is ready.
func startApp(t *testing.T, chCfg func(*Config)) (*App, string) {
	t.Helper()
	a := launchApp(t, chCfg)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + a.OpsAddr() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "query service never became ready")
	return a, "http://" + a.APIAddr()
}

// launchApp runs the service in-process on free ports against the test
// database, without waiting.
func launchApp(t *testing.T, chCfg func(*Config)) *App {
	t.Helper()
	dir := t.TempDir()
	chainsFile := filepath.Join(dir, "chains.json")
	require.NoError(t, os.WriteFile(chainsFile, []byte(testChains), 0o600))
	cfg := DefaultConfig()
	cfg.HTTPListenAddress = "127.0.0.1:0"
	cfg.Ops.ListenAddress = "127.0.0.1:0"
	cfg.ChainsFile = chainsFile
	cfg.PageToken.SecretFile = filepath.Join(dir, "page-token.key")
	cfg.ShutdownTimeout = 2 * time.Second
	// Own topics: the address-watch reconciler must not touch a shared one.
	cfg.Webhooks.Kafka = testenv.Kafka(t)
	chCfg(&cfg)
	a, err := New(cfg, Deps{Logger: testenv.Logger(t), Registry: prometheus.NewRegistry(), Resolver: guardtest.Resolver{}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	wait := start(t, ctx, a)
	t.Cleanup(func() {
		cancel()
		require.NoError(t, wait())
	})
	return a
}

// sdkDir returns query/sdktest with its node_modules installed (npm ci from
// the committed package-lock.json when missing).
func sdkDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../sdktest")
	require.NoError(t, err)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node is not installed: the SDK contract test needs Node.js >= 20 and npm")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@avalanche-sdk", "chainkit", "package.json")); err != nil {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm ci in %s:\n%s", dir, out)
	}
	return dir
}

// TestSDKContract calls every chain and block method of the official SDK
// against the running service (see sdktest/contract.mjs).
func TestSDKContract(t *testing.T) {
	chCfg, conn := testenv.ClickHouse(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	fixture := seedSDKFixture(t, ctx, conn)
	dir := sdkDir(t)
	a, url := startApp(t, func(c *Config) { c.ClickHouse = chCfg })

	fx, err := json.Marshal(map[string]any{"chains": fixture})
	require.NoError(t, err)
	nctx, ncancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer ncancel()
	cmd := exec.CommandContext(nctx, "node", "contract.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MORAINE_SDKTEST_URL="+url, "MORAINE_SDKTEST_FIXTURE="+string(fx))
	out, err := cmd.CombinedOutput()
	t.Logf("node contract.mjs:\n%s", out)
	require.NoError(t, err, "the SDK contract failed")
	require.Contains(t, string(out), ", 0 failures")

	// The ops server exposes the request metrics of the SDK's calls.
	resp, err := http.Get("http://" + a.OpsAddr() + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), `moraine_query_http_requests_total{code="200",method="GET",route="/v1/chains/:chainId/blocks"}`)
	require.Contains(t, string(body), `moraine_query_clickhouse_query_duration_seconds_count{query="blocks_range"}`)
}
