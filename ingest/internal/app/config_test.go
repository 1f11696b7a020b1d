package app

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/process"
)

func TestFlagsAndEnvironment(t *testing.T) {
	cfg := DefaultConfig()
	require.Equal(t, "127.0.0.1:9101", cfg.Ops.ListenAddress)
	require.Equal(t, 10, cfg.BatchBlocks)
	require.Equal(t, 4, cfg.Concurrency)
	require.Equal(t, uint64(2), cfg.ReadyLag)
	require.NoError(t, cfg.Validate())

	t.Setenv("MORAINE_INGEST_CONCURRENCY", "7")
	t.Setenv("MORAINE_RPC_BATCH_BLOCKS", "3")
	t.Setenv("MORAINE_KAFKA_BROKERS", "kafka-0:9092,kafka-1:9092")
	cfg = DefaultConfig()
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	require.NoError(t, process.ParseWithEnv(fs, []string{"--rpc.batch-blocks=5", "--ingest.chains=43114, 43112", "--rpc.timeout=3s"}, "MORAINE"))
	require.Equal(t, 7, cfg.Concurrency, "from the environment")
	require.Equal(t, 5, cfg.BatchBlocks, "the command line wins over the environment")
	require.Equal(t, 3*time.Second, cfg.RPCTimeout)
	require.Equal(t, []string{"kafka-0:9092", "kafka-1:9092"}, cfg.Kafka.SeedBrokers())
	require.Equal(t, "43114, 43112", cfg.Chains)
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no chain file", func(c *Config) { c.ChainsFile = "" }, "--chains.file"},
		{"no brokers", func(c *Config) { c.Kafka.Brokers = " , " }, "--kafka.brokers"},
		{"batch too small", func(c *Config) { c.BatchBlocks = 0 }, "--rpc.batch-blocks"},
		{"no concurrency", func(c *Config) { c.Concurrency = 0 }, "--ingest.concurrency"},
		{"window too small", func(c *Config) { c.Window = 64 }, "--ingest.reorg-window"},
		{"zero poll interval", func(c *Config) { c.PollInterval = 0 }, "--ingest.poll-interval"},
		{"zero shutdown timeout", func(c *Config) { c.ShutdownTimeout = 0 }, "--shutdown.timeout"},
		// Below two rounds of fetches (4 x 10 blocks): the backfill would
		// stall after every span.
		{"lead too small", func(c *Config) { c.MaxLead = 79 }, "--ingest.max-lead 79 must be 0 (no bound) or at least 80"},
		{"lead without a group", func(c *Config) { c.MaxLead, c.LeadGroup = 1000, "" }, "--ingest.lead-group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mod(&cfg)
			require.ErrorContains(t, cfg.Validate(), tc.want)
		})
	}
}

const twoChains = `{"chains": [
 {"evmChainId": "43114", "name": "C-Chain", "network": "mainnet", "rpcUrls": ["http://127.0.0.1:1"],
  "networkToken": {"name": "Avalanche", "symbol": "AVAX", "decimals": 18}, "traces": true, "startBlock": 1},
 {"evmChainId": "43419", "name": "Gunzilla", "network": "mainnet", "rpcUrls": ["http://127.0.0.1:2"],
  "networkToken": {"name": "Gunz", "symbol": "GUN", "decimals": 18}, "traces": true, "replay": true}
]}`

func TestSelectChains(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chains.json")
	require.NoError(t, os.WriteFile(path, []byte(twoChains), 0o600))
	for _, tc := range []struct {
		name    string
		chains  string
		want    []string
		wantErr string
	}{
		{"default is every chain", "", []string{"43114", "43419"}, ""},
		{"a subset", "43419", []string{"43419"}, ""},
		{"spaces and duplicates", " 43419 ,43114,43419", []string{"43419", "43114"}, ""},
		{"unknown chain", "1", nil, "chain 1 is not in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ChainsFile, cfg.Chains = path, tc.chains
			a, err := New(cfg, Deps{Logger: testLogger(t), Registry: obs.NewRegistry("ingest")})
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, c := range a.chains {
				got = append(got, c.EVMChainID)
			}
			require.Equal(t, tc.want, got)
		})
	}
}
