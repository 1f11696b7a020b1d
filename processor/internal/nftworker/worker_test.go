package nftworker

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/processor/internal/nftfetch"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// fakeNode answers eth_blockNumber and tokenURI(id) calls from a table of
// token id -> URI ("revert" reverts).
type fakeNode struct {
	head uint64
	uris map[int64]string
}

func (n *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var reqs []struct {
		ID     int               `json:"id"`
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&reqs); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var out []map[string]any
	for _, q := range reqs {
		if q.Method == "eth_blockNumber" {
			out = append(out, map[string]any{"jsonrpc": "2.0", "id": q.ID, "result": fmt.Sprintf("0x%x", n.head)})
			continue
		}
		var args struct{ Data string }
		_ = json.Unmarshal(q.Params[0], &args)
		id, _ := new(big.Int).SetString(args.Data[10:], 16)
		uri, ok := n.uris[id.Int64()]
		if !ok || uri == "revert" {
			out = append(out, map[string]any{"jsonrpc": "2.0", "id": q.ID, "error": map[string]any{"code": 3, "message": "execution reverted: ERC721: invalid token ID"}})
			continue
		}
		out = append(out, map[string]any{"jsonrpc": "2.0", "id": q.ID, "result": abiString(uri)})
	}
	_ = json.NewEncoder(w).Encode(out)
}

func abiString(s string) string {
	word := func(n int) string { return fmt.Sprintf("%064x", n) }
	padded := make([]byte, (len(s)+31)/32*32)
	copy(padded, s)
	return "0x" + word(32) + word(len(s)) + hex.EncodeToString(padded)
}

// metadataHost serves good.json, throttled.json (429) and flaky.json (503
// on the first request), counting the requests of each path.
type metadataHost struct {
	mu   sync.Mutex
	hits map[string]int
}

func (m *metadataHost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	m.hits[r.URL.Path]++
	n := m.hits[r.URL.Path]
	m.mu.Unlock()
	switch r.URL.Path {
	case "/good.json":
		_, _ = w.Write([]byte(`{"name":"good","attributes":[{"value":1}]}`))
	case "/throttled.json":
		http.Error(w, "slow down", http.StatusTooManyRequests)
	case "/flaky.json":
		if n == 1 {
			http.Error(w, "later", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"name":"flaky"}`))
	default:
		http.NotFound(w, r)
	}
}

func (m *metadataHost) total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, v := range m.hits {
		n += v
	}
	return n
}

func produce(t *testing.T, k kafkautil.Config, reqs ...*record.NftMetadataRequest) {
	t.Helper()
	cl, err := kgo.NewClient(append(k.BaseOpts(testenv.Logger(t), "test-producer"), kgo.DefaultProduceTopic(k.Topic(topics.NftMetadata)))...)
	require.NoError(t, err)
	defer cl.Close()
	for _, r := range reqs {
		val, err := codec.EncodeNftMetadataRequest(r)
		require.NoError(t, err)
		require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Key: codec.NftMetadataKey(r.ChainId, r.Contract, r.TokenId), Value: val}).FirstErr())
	}
}

func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestWorkerIntegration runs the worker on the real Kafka and ClickHouse
// with a fake node and metadata host: statuses, retries on their levels
// (throttled until the last attempt, a 503 then a document, a node that
// never answers: UNINDEXED then UNKNOWN), redelivered requests that fetch
// nothing, reindex requests and their hourly limit, and a restart of the
// worker that fetches nothing again.
func TestWorkerIntegration(t *testing.T) {
	k := testenv.Kafka(t)
	ch, conn := testenv.ClickHouse(t)
	host := &metadataHost{hits: map[string]int{}}
	hostSrv := httptest.NewServer(host)
	defer hostSrv.Close()
	node := &fakeNode{head: 1000, uris: map[int64]string{
		1: hostSrv.URL + "/good.json", 2: hostSrv.URL + "/throttled.json", 3: hostSrv.URL + "/flaky.json", 4: "revert",
		5: `data:application/json,{"name":"inline"}`, 6: "ar://nope",
	}}
	nodeSrv := httptest.NewServer(node)
	defer nodeSrv.Close()

	var contract evm.Address
	contract[19] = 0xaa
	cfg := DefaultTestConfig()
	run := func(ctx context.Context) (*Worker, chan error) {
		w, err := New(cfg, Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(), Kafka: k, ClickHouse: ch,
			Chains: &chains.Config{Chains: []chains.Chain{{EVMChainID: "43112", RPCURLs: []string{nodeSrv.URL}},
				{EVMChainID: "99", RPCURLs: []string{"http://" + closedPort(t)}}}}, Health: obs.NewHealth()})
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		return w, done
	}
	ctx, cancel := context.WithCancel(t.Context())
	_, done := run(ctx)

	now := time.Now()
	discovered := func(chain uint64, id int64) *record.NftMetadataRequest {
		return &record.NftMetadataRequest{ChainId: chain, Contract: contract[:], TokenId: fmt.Sprint(id), Standard: 721, SeenBlock: 10,
			Reason: record.NftMetadataRequest_REASON_DISCOVERED, RequestedAtUnixMs: now.UnixMilli(), Attempt: 1}
	}
	var all []*record.NftMetadataRequest
	for id := int64(1); id <= 6; id++ {
		all = append(all, discovered(43112, id))
	}
	all = append(all, discovered(99, 1))
	produce(t, k, all...)

	store := nftmeta.NewStore(10 * time.Second)
	store.SetConn(conn)
	ref := func(chain uint64, id int64) nftmeta.Ref {
		return nftmeta.Ref{ChainID: chain, Contract: contract, TokenID: fmt.Sprint(id)}
	}
	refs := []nftmeta.Ref{ref(43112, 1), ref(43112, 2), ref(43112, 3), ref(43112, 4), ref(43112, 5), ref(43112, 6), ref(99, 1)}
	want := map[nftmeta.Ref]struct {
		status  string
		attempt uint8
	}{
		ref(43112, 1): {nftmeta.StatusIndexed, 1},
		ref(43112, 2): {nftmeta.StatusThrottledTokenURI, 5},
		ref(43112, 3): {nftmeta.StatusIndexed, 2},
		ref(43112, 4): {nftmeta.StatusMissingToken, 1},
		ref(43112, 5): {nftmeta.StatusIndexed, 1},
		ref(43112, 6): {nftmeta.StatusInvalidTokenURIScheme, 1},
		ref(99, 1):    {nftmeta.StatusUnknown, 5},
	}
	var sawUnindexed atomic.Bool
	final := func() map[nftmeta.Ref]nftmeta.Row {
		var rows map[nftmeta.Ref]nftmeta.Row
		require.Eventually(t, func() bool {
			var err error
			rows, err = store.Rows(t.Context(), refs)
			require.NoError(t, err)
			if r, ok := rows[ref(99, 1)]; ok && r.IndexStatus == nftmeta.StatusUnindexed && !r.NextAttempt.IsZero() {
				sawUnindexed.Store(true)
			}
			for r, w := range want {
				if rows[r].IndexStatus != w.status || rows[r].Attempt != w.attempt || !rows[r].NextAttempt.IsZero() {
					return false
				}
			}
			return true
		}, 60*time.Second, 50*time.Millisecond, "final statuses")
		return rows
	}
	rows := final()
	require.True(t, sawUnindexed.Load(), "a token whose node does not answer is UNINDEXED while it is retried")
	require.Equal(t, "good", rows[ref(43112, 1)].Name)
	require.Equal(t, `[{"value":1}]`, rows[ref(43112, 1)].Attributes)
	require.Equal(t, hostSrv.URL+"/good.json", rows[ref(43112, 1)].TokenURI)
	require.Equal(t, "flaky", rows[ref(43112, 3)].Name)
	require.Contains(t, rows[ref(99, 1)].Error, "node")
	require.Equal(t, 5, host.hits["/throttled.json"], "one request per attempt")
	require.Equal(t, 2, host.hits["/flaky.json"])

	// Redelivered and repeated requests fetch nothing and rewrite nothing.
	hits := host.total()
	produce(t, k, all...)
	time.Sleep(2 * time.Second)
	again, err := store.Rows(t.Context(), refs)
	require.NoError(t, err)
	for r := range want {
		require.Equal(t, rows[r].Version, again[r].Version, "row of %v rewritten", r)
	}
	require.Equal(t, hits, host.total())

	// A reindex fetches again; another within the hour of it does not.
	reindexAt := time.Now()
	reindex := discovered(43112, 1)
	reindex.Reason, reindex.Standard, reindex.SeenBlock, reindex.RequestedAtUnixMs = record.NftMetadataRequest_REASON_REINDEX, 0, 0, reindexAt.UnixMilli()
	produce(t, k, reindex)
	require.Eventually(t, func() bool {
		r, err := store.Rows(t.Context(), refs[:1])
		require.NoError(t, err)
		return r[refs[0]].Version != rows[refs[0]].Version
	}, 30*time.Second, 50*time.Millisecond)
	r1, _ := store.Rows(t.Context(), refs[:1])
	require.Equal(t, nftmeta.StatusIndexed, r1[refs[0]].IndexStatus)
	require.Equal(t, reindexAt.UnixMilli(), r1[refs[0]].Reindexed.UnixMilli())
	require.Equal(t, hits+1, host.total())
	soon := discovered(43112, 1)
	soon.Reason, soon.RequestedAtUnixMs = record.NftMetadataRequest_REASON_REINDEX, reindexAt.Add(10*time.Minute).UnixMilli()
	produce(t, k, soon)

	// Restart: the new instance reads what the last one left and fetches
	// nothing it did.
	time.Sleep(2 * time.Second)
	cancel()
	require.NoError(t, <-done)
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	_, done2 := run(ctx2)
	produce(t, k, all...)
	time.Sleep(3 * time.Second)
	after, err := store.Rows(t.Context(), refs)
	require.NoError(t, err)
	for r := range want {
		wantVersion := rows[r].Version
		if r == refs[0] {
			wantVersion = r1[refs[0]].Version
		}
		require.Equal(t, wantVersion, after[r].Version, "row of %v rewritten", r)
	}
	require.Equal(t, hits+1, host.total())
	cancel2()
	require.NoError(t, <-done2)
}

// DefaultTestConfig is the worker's configuration in tests: a compressed
// retry schedule, private targets allowed (the fakes listen on loopback).
func DefaultTestConfig() Config {
	return Config{Enabled: true, Group: "nft-metadata", DiscoveryGroup: "nft-discovery", DiscoveryStartOffset: "start",
		DiscoveryCache: 1000, MaxPollRecords: 100,
		RetrySchedule: []time.Duration{200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond},
		RPCTimeout:    2 * time.Second, SessionTimeout: 6 * time.Second, ShutdownTimeout: 5 * time.Second,
		Fetch: nftfetch.Config{MaxBytes: 1 << 20, Timeout: 2 * time.Second, PerHost: 4, MaxInFlight: 16, HostQueueTimeout: time.Second,
			MaxRedirects: 3, IPFSGateway: "http://127.0.0.1:1/ipfs/", AllowPrivateTargets: true}}
}

// TestWorkersShareTheWorkIntegration: two workers in one group split the
// requests by partition and fetch each NFT once.
func TestWorkersShareTheWorkIntegration(t *testing.T) {
	k := testenv.Kafka(t)
	ch, conn := testenv.ClickHouse(t)
	host := &metadataHost{hits: map[string]int{}}
	hostSrv := httptest.NewServer(host)
	defer hostSrv.Close()
	const n = 60
	node := &fakeNode{head: 1000, uris: map[int64]string{}}
	for id := int64(1); id <= n; id++ {
		node.uris[id] = hostSrv.URL + "/good.json?" + fmt.Sprint(id)
	}
	nodeSrv := httptest.NewServer(node)
	defer nodeSrv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var done []chan error
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	for _, reg := range regs {
		cfg := DefaultTestConfig()
		cfg.MaxPollRecords = 5 // many batches, so both instances get work
		w, err := New(cfg, Deps{Logger: testenv.Logger(t), Registerer: reg, Kafka: k, ClickHouse: ch,
			Chains: &chains.Config{Chains: []chains.Chain{{EVMChainID: "43112", RPCURLs: []string{nodeSrv.URL}}}}, Health: obs.NewHealth()})
		require.NoError(t, err)
		d := make(chan error, 1)
		go func() { d <- w.Run(ctx) }()
		done = append(done, d)
	}
	// Both members have joined once each owns some partitions; wait for a
	// stable group before producing, so no batch is taken over mid-way.
	time.Sleep(8 * time.Second)
	var contract evm.Address
	contract[19] = 0xbb
	var reqs []*record.NftMetadataRequest
	for id := int64(1); id <= n; id++ {
		reqs = append(reqs, &record.NftMetadataRequest{ChainId: 43112, Contract: contract[:], TokenId: fmt.Sprint(id), Standard: 721,
			SeenBlock: 1, Reason: record.NftMetadataRequest_REASON_DISCOVERED, RequestedAtUnixMs: time.Now().UnixMilli(), Attempt: 1})
	}
	produce(t, k, reqs...)
	require.Eventually(t, func() bool { return host.total() >= n }, 60*time.Second, 50*time.Millisecond)
	time.Sleep(2 * time.Second)
	require.Equal(t, n, host.hits["/good.json"], "each NFT fetched once")
	var counts []float64
	for _, reg := range regs {
		counts = append(counts, counterValue(t, reg, "moraine_processor_nft_metadata_requests_total", "fetched"))
	}
	require.Equal(t, float64(n), counts[0]+counts[1])
	require.NotZero(t, counts[0], "both instances worked: %v", counts)
	require.NotZero(t, counts[1], "both instances worked: %v", counts)
	store := nftmeta.NewStore(10 * time.Second)
	store.SetConn(conn)
	var refs []nftmeta.Ref
	for id := 1; id <= n; id++ {
		refs = append(refs, nftmeta.Ref{ChainID: 43112, Contract: contract, TokenID: fmt.Sprint(id)})
	}
	rows, err := store.Rows(t.Context(), refs)
	require.NoError(t, err)
	require.Len(t, rows, n)
	cancel()
	for _, d := range done {
		require.NoError(t, <-d)
	}
}

// counterValue reads one labelled series of a counter family.
func counterValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{%s}", name, label)
	return 0
}
