package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/data/storetest"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

func TestSeed(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// Two chunks, sparse like a replay.
	require.NoError(t, Seed(ctx, conn, SeedConfig{ChainID: 7, First: 100, Blocks: 3000, Step: 100, Chunk: 2000}, testenv.Logger(t)))
	reg := prometheus.NewRegistry()
	s, err := store.New(store.DefaultConfig(), store.Deps{Logger: testenv.Logger(t), Registerer: reg, ChainIDs: []uint64{7}})
	require.NoError(t, err)
	s.SetConn(conn)
	heads, err := s.Heads(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(100+2999*100), heads[7].Number)
	bs, err := s.Blocks(ctx, 7, heads[7].Number, 3)
	require.NoError(t, err)
	require.Equal(t, []uint64{300000, 299900, 299800}, []uint64{bs[0].Number, bs[1].Number, bs[2].Number})
	require.Equal(t, bs[1].Hash, bs[0].ParentHash)
	n, err := s.BlockNumberByHash(ctx, 7, bs[2].Hash)
	require.NoError(t, err)
	require.Equal(t, uint64(299800), n)
}

// SeedHistory's rows are what the store reads: canonical (their blocks are
// Seed's), routers with about their share of the transactions, a pool with a
// handful each, transfer calls with their logs and ERC-20 rows.
func TestSeedHistory(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	require.NoError(t, Seed(ctx, conn, SeedConfig{ChainID: 7, Blocks: 2000}, testenv.Logger(t)))
	cfg := HistoryConfig{ChainID: 7, Txs: 10_000, TxPerBlock: 5, Addresses: 500, Tokens: 3, Chunk: 4000}
	require.NoError(t, SeedHistory(ctx, conn, cfg, testenv.Logger(t)))
	reg := prometheus.NewRegistry()
	s, err := store.New(store.DefaultConfig(), store.Deps{Logger: testenv.Logger(t), Registerer: reg, ChainIDs: []uint64{7}})
	require.NoError(t, err)
	s.SetConn(conn)
	list := func(id uint64, list uint8) []store.IndexRow {
		a, err := store.ParseAddress(AddressID(id))
		require.NoError(t, err)
		p, err := s.AddressList(ctx, store.ListRequest{ChainID: 7, Address: a, List: list, Hi: 1999, Limit: 100_000})
		require.NoError(t, err)
		return p.Rows
	}
	router := list(0, schema.ListTransactions)
	require.InDelta(t, 0.8*0.10*10_000, len(router), 150, "the busiest router receives a tenth of the value transfers")
	require.Equal(t, schema.RoleRecipient, router[0].Roles)
	quiet := list(100, schema.ListTransactions)
	require.NotEmpty(t, quiet)
	require.Less(t, len(quiet), 100)
	var erc20, tokenRows uint64
	require.NoError(t, conn.QueryRow(ctx, "SELECT countIf(substring(list_key, 29, 1) = unhex('02')), countIf(substring(list_key, 29, 1) = unhex('05')) FROM address_lists WHERE substring(list_key, 1, 8) = unhex('0000000000000007')").Scan(&erc20, &tokenRows))
	require.InDelta(t, 2*0.2*0.98*10_000, erc20, 250, "each transfer is in its two parties' ERC-20 lists")
	require.InDelta(t, 2*tokenRows, erc20, 20, "and in its token's (a self-transfer is one row)")
	var withTransfers uint64
	for id := uint64(3); withTransfers == 0 && id < 503; id++ {
		withTransfers = uint64(len(list(id, schema.ListERC20)))
	}
	require.NotZero(t, withTransfers)

	// Details decode: every transaction's, and the transfer calls'
	// transfers.
	transfers := 0
	for i := uint64(4000); i < 4300; i++ {
		h, err := store.ParseHash(TxHashID(i))
		require.NoError(t, err)
		ref, full, err := s.Transaction(ctx, 7, h)
		require.NoError(t, err)
		require.Equal(t, i/5, ref.Block.Number)
		require.Equal(t, uint32(i%5), ref.Index)
		require.Equal(t, h, full.Hash)
		require.Equal(t, uint64(100000), full.Gas)
		require.Equal(t, "30000000000", full.MaxFeePerGas)
		if len(full.Input) > 0 {
			require.Len(t, full.Input, 68)
			require.Len(t, full.Transfers, int(full.Status))
			if full.Status == 1 {
				require.Equal(t, full.To, full.Transfers[0].Token)
				require.Equal(t, uint32(i%5), full.Transfers[0].LogIndex)
				transfers++
			}
		}
	}
	require.NotZero(t, transfers)
	for _, r := range list(100, schema.ListTransactions) {
		require.Equal(t, uint64(100000), r.Gas)
		require.Equal(t, r.Roles&schema.RoleTransferParty != 0, len(r.Transfers) == 1)
	}

	// The seeded details carry their block's timestamp: a page of blocks
	// deeper than the reorg window (1,024 below the head, 1999) renders
	// without reading a block.
	blockReads := func() float64 { return storetest.Queries(t, reg, "blocks_lookup") }
	checked := map[uint8]int{}
	for id := uint64(0); id < 503; id++ {
		a, err := store.ParseAddress(AddressID(id))
		require.NoError(t, err)
		for _, l := range []uint8{schema.ListTransactions, schema.ListERC20} {
			before := blockReads()
			p, err := s.AddressList(ctx, store.ListRequest{ChainID: 7, Address: a, List: l, Hi: 900, Limit: 50})
			require.NoError(t, err)
			require.Equal(t, before, blockReads(), "address %d, list %d", id, l)
			for _, r := range p.Rows {
				require.Equal(t, 1_700_000_000+2*r.Block.Number, r.Block.Timestamp)
			}
			checked[l] += len(p.Rows)
		}
	}
	require.NotZero(t, checked[schema.ListTransactions])
	require.NotZero(t, checked[schema.ListERC20])
	// And so does a settled transaction by hash, with its block's base fee.
	for i := uint64(1000); i < 1100; i++ {
		h, err := store.ParseHash(TxHashID(i))
		require.NoError(t, err)
		before := blockReads()
		ref, _, err := s.Transaction(ctx, 7, h)
		require.NoError(t, err)
		require.Equal(t, before, blockReads(), "transaction %d", i)
		require.Equal(t, 1_700_000_000+2*ref.Block.Number, ref.Block.Timestamp)
		require.Equal(t, "25000000000", ref.Block.BaseFee)
	}
}

func TestLoad(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/bad") {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	res, err := Load(t.Context(), LoadConfig{BaseURL: srv.URL, Paths: []string{"/ok/{rand:5:7}", "/bad", "/ok/{addr:1:1}/{txhash:2:2}"},
		Rate: 300, Duration: 500 * time.Millisecond})
	require.NoError(t, err)
	require.InDelta(t, 150, res.Total.Count, 20)
	require.Equal(t, res.PerPath[1].Count, res.PerPath[1].Errors)
	require.Zero(t, res.PerPath[0].Errors)
	require.Positive(t, res.Total.P99)
	for p := range seen {
		require.Contains(t, []string{"/ok/5", "/ok/6", "/ok/7", "/bad", "/ok/" + AddressID(1) + "/" + TxHashID(2)}, p)
	}
	require.Contains(t, res.String(), "p99=")

	_, err = Load(t.Context(), LoadConfig{BaseURL: "http://192.0.2.1:8080", Paths: []string{"/"}, Rate: 1, Duration: time.Second})
	require.ErrorContains(t, err, "not a loopback")
}

var (
	benchOnce sync.Once
	benchConn driver.Conn
)

// BenchmarkStore reads a 1,000,000-block chain (seeded once per run; `go
// test -bench . ./internal/ops/bench`): the first page uncached, a deep page and
// a random block by number. The 10M-block numbers come from cmd/querybench.
func BenchmarkStore(b *testing.B) {
	benchOnce.Do(func() {
		_, benchConn = testenv.ClickHouse(b)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := Seed(ctx, benchConn, SeedConfig{ChainID: 1, Blocks: 1_000_000}, testenv.Logger(b)); err != nil {
			b.Fatal(err)
		}
	})
	cfg := store.DefaultConfig()
	cfg.HeadCacheTTL = 0
	s, err := store.New(cfg, store.Deps{Logger: testenv.Logger(b), Registerer: prometheus.NewRegistry(), ChainIDs: []uint64{1}})
	if err != nil {
		b.Fatal(err)
	}
	s.SetConn(benchConn)
	ctx := context.Background()
	b.Run("first-page-11", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Blocks(ctx, 1, 999_999, 11); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("page-101-deep", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Blocks(ctx, 1, 12_345, 101); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("by-number", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.BlockByNumber(ctx, 1, rand.Uint64N(1_000_000)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestLoadHead: "{rand:LO:head}" draws up to the chain's newest block, which
// the load keeps asking for; per-interval lines are written while it runs.
func TestLoadHead(t *testing.T) {
	var mu sync.Mutex
	head := 50
	var maxSeen int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/v1/chains/7/blocks" {
			fmt.Fprintf(w, `{"blocks":[{"blockNumber":"%d"}]}`, head)
			head += 50
			return
		}
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/b/"))
		if err != nil || n < 10 {
			w.WriteHeader(http.StatusBadRequest)
		}
		maxSeen = max(maxSeen, n)
	}))
	defer srv.Close()
	var report syncBuffer
	res, err := Load(t.Context(), LoadConfig{BaseURL: srv.URL, Paths: []string{"/b/{rand:10:head}"}, Rate: 200, Duration: 1500 * time.Millisecond,
		HeadChain: "7", Report: 500 * time.Millisecond, ReportTo: &report})
	require.NoError(t, err)
	require.Zero(t, res.Total.Errors)
	mu.Lock()
	require.Greater(t, maxSeen, 50, "the head moved while the load ran")
	require.LessOrEqual(t, maxSeen, head)
	mu.Unlock()
	require.GreaterOrEqual(t, strings.Count(report.String(), "interval "), 2, report.String())
	_, err = Load(t.Context(), LoadConfig{BaseURL: srv.URL, Paths: []string{"/b/{rand:10:head}"}, Rate: 1, Duration: time.Second})
	require.Error(t, err, "head without a head chain")
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSeedUsage: the seeded request log has its rows, skew and rollups,
// and its keys read it through the usage routes' SQL on both ClickHouses.
func TestSeedUsage(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	end := time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC)
	keys, err := SeedUsage(t.Context(), conn, UsageConfig{Requests: 200_000, Accounts: 100, Days: 30, End: end, Chunk: 70_000}, testenv.Logger(t))
	require.NoError(t, err)
	require.Regexp(t, `^mk_`, keys.Heavy)
	require.Regexp(t, `^mk_`, keys.Operator)
	var n, accounts, heavy uint64
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(), uniqExact(account_id), countIf(account_id = 'bench-acc-0000') FROM api_requests").Scan(&n, &accounts, &heavy))
	require.Equal(t, uint64(200_000), n)
	require.Greater(t, accounts, uint64(80))
	require.InDelta(t, 0.2, float64(heavy)/float64(n), 0.05, "a fifth from the heaviest account")
	var rolled uint64
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT countMerge(requests) FROM api_usage_days").Scan(&rolled))
	require.Equal(t, n, rolled)
	var first, last uint64
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT min(at), max(at) FROM api_requests").Scan(&first, &last))
	require.InDelta(t, float64(end.AddDate(0, 0, -30).UnixMilli()), float64(first), 1000)
	require.Less(t, last, uint64(end.UnixMilli()))
	// The statement on current ClickHouse too.
	testenv.OnCurrentClickHouse(t, append(migrationStatements(t), strings.Replace(strings.Replace(strings.Replace(strings.Replace(
		strings.Replace(usageRows, "?", "1772409600000", 1), "?", "1000", 1), "?", "100", 1), "?", "0", 1), "?", "1000", 1),
		strings.Replace(usageAccounts, "?", "10", 1)))
}

func migrationStatements(t *testing.T) []string {
	t.Helper()
	ms, err := schema.Migrations()
	require.NoError(t, err)
	var out []string
	for _, m := range ms {
		out = append(out, m.Statements...)
	}
	return out
}
