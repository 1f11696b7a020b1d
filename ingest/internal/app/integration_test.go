package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/ingest/internal/chaintest"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// These tests run the whole service against the real Kafka broker of the
// local stack (testenv.Kafka fails them when it is missing) and a fake node
// serving the recorded C-Chain blocks 1..100.

func testLogger(t *testing.T) *slog.Logger { return testenv.Logger(t) }

var (
	loadOnce sync.Once
	cchain   []chaintest.Block
)

func recording(t *testing.T) []chaintest.Block {
	loadOnce.Do(func() { cchain = chaintest.Load(t, "avalanche/cchain_1_100/blocks_1_100.jsonl.zst") })
	require.Len(t, cchain, 100)
	return cchain
}

// service runs the App (New, Run) in the background.
type service struct {
	app    *App
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

func writeChains(t *testing.T, node *chaintest.Node) string {
	path := filepath.Join(t.TempDir(), "chains.json")
	body := fmt.Sprintf(`{"chains": [{"evmChainId": "43114", "name": "Avalanche C-Chain", "network": "mainnet",
	  "rpcUrls": [%q], "wsUrl": %q, "networkToken": {"name": "Avalanche", "symbol": "AVAX", "decimals": 18},
	  "traces": true, "webhooks": true, "startBlock": 1}]}`, node.URL(), node.WSURL())
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

func startService(t *testing.T, kcfg kafkautil.Config, chainsFile string, mods ...func(*Config)) *service {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ChainsFile = chainsFile
	cfg.Kafka = kcfg
	cfg.Ops.ListenAddress = "127.0.0.1:0"
	cfg.PollInterval = 20 * time.Millisecond
	cfg.ShutdownTimeout = 10 * time.Second
	for _, m := range mods {
		m(&cfg)
	}
	reg := obs.NewRegistry("ingest")
	a, err := New(cfg, Deps{Logger: testLogger(t), Registry: reg})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	s := &service{app: a, reg: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- a.Run(ctx) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

func (s *service) stop(t *testing.T) {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("ingest did not stop")
	}
}

// metric reads one series of the service's registry.
func (s *service) metric(t *testing.T, name, chain string) float64 {
	mfs, err := s.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "chain" && l.GetValue() == chain {
					if m.Counter != nil {
						return m.Counter.GetValue()
					}
					return m.Gauge.GetValue()
				}
			}
		}
	}
	return -1
}

func (s *service) waitProduced(t *testing.T, n uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		return s.metric(t, "moraine_ingest_last_produced_block", "43114") >= float64(n)
	}, 60*time.Second, 10*time.Millisecond, "block %d not produced", n)
}

func get(t *testing.T, url string) (int, string) {
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func numbers(bs []*record.Block) []uint64 {
	out := make([]uint64, len(bs))
	for i, b := range bs {
		out[i] = b.Number
	}
	return out
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for n := from; n <= to; n++ {
		out = append(out, n)
	}
	return out
}

func TestIngestAndRestartIntegration(t *testing.T) {
	kcfg := testenv.Kafka(t)
	blocksTopic := kcfg.Topic(topics.Blocks)
	node := chaintest.NewNode(t, recording(t))
	// A slow node, so that the first run is stopped in the middle of the
	// backfill.
	node.SetDelay(15 * time.Millisecond)
	chainsFile := writeChains(t, node)

	s := startService(t, kcfg, chainsFile, func(c *Config) { c.BatchBlocks = 2; c.Concurrency = 1 })
	s.waitProduced(t, 30)
	s.stop(t)
	first := chaintest.ReadEvents(t, kcfg, blocksTopic, "43114")
	require.Less(t, len(first), 100, "stopped midway")
	chain, _ := chaintest.Validate(t, first, 0, true)
	require.Equal(t, seq(1, uint64(len(first))), numbers(chain))

	node.SetDelay(0)
	s = startService(t, kcfg, chainsFile)
	s.waitProduced(t, 100)
	require.Eventually(t, func() bool { return s.app.Ready(t.Context()) == nil }, 10*time.Second, 10*time.Millisecond)
	code, body := get(t, "http://"+s.app.OpsAddr()+"/readyz")
	require.Equal(t, http.StatusOK, code, body)
	code, body = get(t, "http://"+s.app.OpsAddr()+"/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, m := range []string{"moraine_ingest_blocks_produced_total", "moraine_ingest_head_block", "moraine_rpc_requests_total",
		"moraine_rpc_request_duration_seconds", "moraine_ingest_stage_duration_seconds", "moraine_ingest_reorgs_total"} {
		require.Contains(t, body, m)
	}
	s.stop(t)

	all := chaintest.ReadEvents(t, kcfg, blocksTopic, "43114")
	require.Len(t, all, 100, "no block produced twice")
	chain, reorgs := chaintest.Validate(t, all, 0, true)
	require.Empty(t, reorgs)
	require.Equal(t, seq(1, 100), numbers(chain))
	require.Equal(t, uint64(81), chain[99].CumulativeTransactions)
	for i, b := range chain {
		require.Equal(t, strings.TrimPrefix(recording(t)[i].Hash, "0x"), fmt.Sprintf("%x", b.Hash))
	}
}

func TestReorgIntegration(t *testing.T) {
	kcfg := testenv.Kafka(t)
	blocksTopic := kcfg.Topic(topics.Blocks)
	blocks := recording(t)
	// Fork at a block with transactions so that the new branch's counts
	// differ; its first block is empty.
	fork := uint64(0)
	for _, b := range blocks {
		if b.Number >= 40 && b.TxCount > 0 {
			fork = b.Number
			break
		}
	}
	require.NotZero(t, fork)
	head := fork + 2
	node := chaintest.NewNode(t, blocks)
	node.SetHead(head)
	s := startService(t, kcfg, writeChains(t, node))
	s.waitProduced(t, head)

	byNum := map[uint64]chaintest.Block{}
	for _, b := range blocks {
		byNum[b.Number] = b
	}
	parent := byNum[fork-1].Hash
	var branch []chaintest.Block
	for n := fork; n <= head+1; n++ { // depth 3: fork..head replaced, plus a new head
		b := chaintest.Fork(t, byNum[n], chaintest.ForkHash(byNum[n].Hash, 7), parent, n == fork)
		branch = append(branch, b)
		parent = b.Hash
	}
	node.Put(branch...)
	node.SetHead(head + 1)
	s.waitProduced(t, head+1)
	require.Eventually(t, func() bool { return s.metric(t, "moraine_ingest_reorgs_total", "43114") == 1 }, 30*time.Second, 10*time.Millisecond)
	s.stop(t)

	chain, reorgs := chaintest.Validate(t, chaintest.ReadEvents(t, kcfg, blocksTopic, "43114"), 0, true)
	require.Len(t, reorgs, 1)
	require.Equal(t, fork, reorgs[0].ForkNumber)
	require.Len(t, reorgs[0].Orphaned, 3)
	for i, o := range reorgs[0].Orphaned {
		require.Equal(t, fork+uint64(i), o.Number)
		require.Equal(t, strings.TrimPrefix(byNum[o.Number].Hash, "0x"), fmt.Sprintf("%x", o.Hash))
	}
	require.Equal(t, seq(1, head+1), numbers(chain))
	for i, b := range branch {
		require.Equal(t, strings.TrimPrefix(b.Hash, "0x"), fmt.Sprintf("%x", chain[int(fork)-1+i].Hash))
	}
	require.Empty(t, chain[fork-1].Transactions)
	// The new branch's counts start from the ancestor's.
	require.Equal(t, chain[fork-2].CumulativeTransactions, chain[fork-1].CumulativeTransactions)
}

// TestStandbyTakesOverIntegration runs two ingest instances for the same
// chain on the real broker: exactly one writes it; when that one stops, the
// standby takes the chain over and resumes from the checkpoint, and the
// blocks topic holds one contiguous chain with every block once.
func TestStandbyTakesOverIntegration(t *testing.T) {
	kcfg := testenv.Kafka(t)
	blocksTopic := kcfg.Topic(topics.Blocks)
	node := chaintest.NewNode(t, recording(t))
	node.SetHead(50)
	chainsFile := writeChains(t, node)
	a := startService(t, kcfg, chainsFile)
	b := startService(t, kcfg, chainsFile)
	writer := func(s *service) bool { return s.metric(t, "moraine_ingest_chain_writer", "43114") == 1 }
	var active, standby *service
	require.Eventually(t, func() bool {
		switch {
		case writer(a) && !writer(b):
			active, standby = a, b
		case writer(b) && !writer(a):
			active, standby = b, a
		default:
			return false
		}
		return true
	}, 30*time.Second, 10*time.Millisecond, "exactly one instance writes the chain")
	active.waitProduced(t, 50)
	// Both are ready: the standby has nothing to catch up.
	require.Eventually(t, func() bool { return a.app.Ready(t.Context()) == nil && b.app.Ready(t.Context()) == nil },
		10*time.Second, 10*time.Millisecond)

	stopped := time.Now()
	active.stop(t)
	node.SetHead(100)
	standby.waitProduced(t, 51)
	t.Logf("the standby produced the next block %s after the active instance stopped", time.Since(stopped).Round(time.Millisecond))
	standby.waitProduced(t, 100)
	require.True(t, writer(standby))
	standby.stop(t)

	all := chaintest.ReadEvents(t, kcfg, blocksTopic, "43114")
	require.Len(t, all, 100, "no block produced twice")
	chain, _ := chaintest.Validate(t, all, 0, true)
	require.Equal(t, seq(1, 100), numbers(chain))
	require.Equal(t, uint64(81), chain[99].CumulativeTransactions)
}
