package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
)

// stackUp is a pipeline on the real stack: the services for one chain,
// isolated by topic prefix and database.
type stackUp struct {
	api   string
	conn  driver.Conn
	chain uint64
	kafka kafkautil.Config
	ch    chclient.Config
	// pids of the pipeline's processes, and their metrics endpoints.
	pids    map[string]int
	metrics map[string]string
	procs   map[string]*proc
	// flags each process was started with, for restarts.
	flags map[string][]string
	t     testing.TB
	// ingestStarted is when the ingest process was started.
	ingestStarted time.Time
}

// pipelineOpts shape startServices.
type pipelineOpts struct {
	// ingestArgs and processorArgs are extra flags of ingest and the
	// processor.
	ingestArgs, processorArgs []string
	// noWaitIngest returns as soon as ingest is started instead of when it
	// has caught up (the benchmark times the catching up).
	noWaitIngest bool
	// queryArgs are extra query flags (later flags win over the defaults
	// set here).
	queryArgs []string
	// delivery also starts the delivery service, with these extra flags.
	delivery     bool
	deliveryArgs []string
	// beforeIngest runs once query (and delivery) are ready and before
	// ingest starts: the place to create accounts and webhooks.
	beforeIngest func(s *stackUp)
	// headIngest, when set, is the JSON of chains that a second ingest
	// instance ("ingest-head") follows instead of the first, as an operator
	// runs a backfill in an instance of its own; the other services still
	// know every chain.
	headIngest string
}

// runPipeline serves a recording with the replay source (backfill mode)
// and starts the services on it.
func runPipeline(t testing.TB, d dataset, first uint64, o pipelineOpts) *stackUp {
	rpcAddr := freeAddr(t)
	replay := start(t, "replay", "--replay.file", testenv.SharedData(t, d.recording),
		"--chain.id", strconv.FormatUint(d.chainID, 10), "--replay.mode", "backfill", "--rpc.listen-address", rpcAddr)
	eventually(t, 30*time.Second, "replay source", func() bool {
		_, err := rpcCall("http://"+rpcAddr, "eth_blockNumber")
		return err == nil
	})
	chain := fmt.Sprintf(`{"evmChainId":"%d","name":"%s replay","network":"mainnet","rpcUrls":["http://%s"],
		"networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},"traces":true,"webhooks":true,"replay":true,"startBlock":%d}`,
		d.chainID, d.name, rpcAddr, first)
	s := startServices(t, chain, o)
	s.procs["replay"], s.pids["replay"] = replay, replay.cmd.Process.Pid
	return s
}

// startServices runs processor, query (and delivery), then ingest on the
// real stack for one chain (a JSON object of the chains file).
func startServices(t testing.TB, chainJSON string, o pipelineOpts) *stackUp {
	kcfg := testenv.Kafka(t)
	ccfg, conn := testenv.ClickHouse(t)
	chainsFile := filepath.Join(t.TempDir(), "chains.json")
	if err := os.WriteFile(chainsFile, []byte(`{"chains":[`+chainJSON+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var chainID uint64
	if _, err := fmt.Sscanf(chainJSON[strings.Index(chainJSON, `"evmChainId":"`)+len(`"evmChainId":"`):], "%d", &chainID); err != nil {
		t.Fatalf("chain id: %v", err)
	}
	common := []string{"--kafka.brokers", kcfg.Brokers, "--kafka.topic-prefix", kcfg.TopicPrefix}
	// The stack's ClickHouse is on this host: no wire compression, as
	// `stack.sh env` sets for make run.
	chArgs := []string{"--clickhouse.addr", ccfg.Addr, "--clickhouse.database", ccfg.Database, "--clickhouse.compression", "none"}
	args := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	s := &stackUp{conn: conn, chain: chainID, kafka: kcfg, ch: ccfg,
		pids: map[string]int{}, metrics: map[string]string{}, procs: map[string]*proc{}, flags: map[string][]string{}, t: t}
	run := func(name string, wait bool, flags ...string) {
		admin := freeAddr(t)
		s.flags[name] = append(flags, "--ops.listen-address", admin)
		binary, _, _ := strings.Cut(name, "-") // ingest-head is an ingest
		p := start(t, binary, s.flags[name]...)
		s.procs[name], s.pids[name], s.metrics[name] = p, p.cmd.Process.Pid, "http://"+admin+"/metrics"
		if wait {
			waitReady(t, p, "http://"+admin+"/readyz", 120*time.Second)
		}
	}

	run("processor", true, args(common, chArgs, []string{"--chains.file", chainsFile},
		strings.Fields(os.Getenv("MORAINE_E2E_PROCESSOR_ARGS")), o.processorArgs)...)
	apiAddr := freeAddr(t)
	s.api = "http://" + apiAddr
	run("query", true, args(common, chArgs, []string{"--chains.file", chainsFile, "--http.listen-address", apiAddr,
		"--api.page-token-secret", strings.Repeat("e2e-secret-", 4),
		// Thousands of reads in a few seconds would exceed the keyless budget;
		// rate limits have their own tests in query.
		"--ratelimit.enabled=false", "--log.level", "warn",
		// The tests' webhook receivers listen on loopback.
		"--delivery.allow-private-targets"}, strings.Fields(os.Getenv("MORAINE_E2E_QUERY_ARGS")), o.queryArgs)...)
	if o.delivery {
		run("delivery", true, args(common, chArgs, []string{"--chains.file", chainsFile, "--delivery.allow-private-targets"}, o.deliveryArgs)...)
	}
	if o.beforeIngest != nil {
		o.beforeIngest(s)
	}
	s.ingestStarted = time.Now()
	ingestChains := chainsFile
	if o.headIngest != "" {
		ingestChains = filepath.Join(t.TempDir(), "chains-ingest.json")
		headChains := filepath.Join(t.TempDir(), "chains-ingest-head.json")
		rest := strings.Replace(chainJSON, o.headIngest, "", 1)
		rest = strings.Trim(strings.TrimSpace(rest), ",")
		if err := os.WriteFile(ingestChains, []byte(`{"chains":[`+rest+`]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(headChains, []byte(`{"chains":[`+o.headIngest+`]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		// A lease group of its own: instances of one group share out its
		// chains, and each of these knows only its own.
		run("ingest-head", false, args(common, []string{"--chains.file", headChains, "--ingest.lease-group", "moraine-ingest-head"}, o.ingestArgs)...)
	}
	run("ingest", !o.noWaitIngest, args(common, []string{"--chains.file", ingestChains}, o.ingestArgs)...)
	return s
}

// crash kills a service with SIGKILL and starts it again with the same
// flags, waiting until it is ready.
func (s *stackUp) crash(name string) {
	s.t.Helper()
	s.procs[name].kill()
	p := start(s.t, name, s.flags[name]...)
	s.procs[name], s.pids[name] = p, p.cmd.Process.Pid
	waitReady(s.t, p, strings.TrimSuffix(s.metrics[name], "/metrics")+"/readyz", 120*time.Second)
}
