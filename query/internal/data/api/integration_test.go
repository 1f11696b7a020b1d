package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/data/storetest"
	"github.com/moraine-data/moraine/query/internal/server/pagetoken"
)

// TestPagingWhileAppending runs the router on the real store and ClickHouse:
// blocks are appended (and the head moves) between pages, and one block
// below the cursor is replaced by a reorg; paging must still return every
// block below the first page's head exactly once, in order.
func TestPagingWhileAppending(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cc, err := chains.Parse([]byte(chainFile))
	require.NoError(t, err)
	scfg := store.DefaultConfig()
	scfg.HeadCacheTTL = 0
	st, err := store.New(scfg, store.Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(),
		ChainIDs: []uint64{cChain, fuji, devnet}})
	require.NoError(t, err)
	st.SetConn(conn)
	tokens, err := pagetoken.NewCodec(bytes.Repeat([]byte("k"), 32), time.Hour, nil)
	require.NoError(t, err)
	router, _, err := newRouter(Deps{Logger: testenv.Logger(t), Chains: cc,
		Store: st, History: st, Contracts: newFakeContracts(), Tokens: tokens, Config: DefaultConfig()}, prometheus.NewRegistry())
	require.NoError(t, err)
	get := func(path string, into any) {
		t.Helper()
		w := httptest.NewRecorder()
		router.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		require.Equal(t, http.StatusOK, w.Code, "%s: %s", path, w.Body)
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), into))
	}

	// C-Chain: blocks 1..200, dense. Fuji: every 10th block 10..1000,
	// timestamps interleaving with the C-Chain's.
	cBlocks := storetest.Chain(cChain, 1, 200, 1, "a")
	fBlocks := storetest.Chain(fuji, 10, 1000, 10, "a")
	for i := range fBlocks {
		fBlocks[i].Timestamp = 1_700_000_000 + uint64(i)*4 + 1
	}
	require.NoError(t, storetest.InsertBlocks(ctx, conn, cBlocks))
	require.NoError(t, storetest.InsertBlocks(ctx, conn, fBlocks))
	require.NoError(t, storetest.SetHead(ctx, conn, cBlocks[199], 1))
	require.NoError(t, storetest.SetHead(ctx, conn, fBlocks[99], 1))

	// One chain.
	var seen []uint64
	path := "/v1/chains/43114/blocks?pageSize=25"
	for page := 0; ; page++ {
		var p listBlocksResponse
		get(path, &p)
		for _, b := range p.Blocks {
			var n uint64
			fmt.Sscan(b.BlockNumber, &n)
			seen = append(seen, n)
		}
		if page == 0 {
			// New blocks arrive and the head moves on.
			more := storetest.Chain(cChain, 201, 260, 1, "a")
			require.NoError(t, storetest.InsertBlocks(ctx, conn, more))
			require.NoError(t, storetest.SetHead(ctx, conn, more[len(more)-1], 2))
		}
		if page == 1 {
			// A reorg replaces block 120 (below the cursor).
			r := storetest.Chain(cChain, 120, 120, 1, "reorg")
			r[0].Version = 2
			require.NoError(t, storetest.InsertBlocks(ctx, conn, r))
		}
		if p.NextPageToken == "" {
			break
		}
		path = "/v1/chains/43114/blocks?pageSize=25&pageToken=" + p.NextPageToken
	}
	require.Len(t, seen, 200)
	for i, n := range seen {
		require.Equal(t, uint64(200-i), n)
	}
	var first listBlocksResponse
	get("/v1/chains/43114/blocks?pageSize=1", &first)
	require.Equal(t, "260", first.Blocks[0].BlockNumber)

	// All chains, with the Fuji chain sparse (gaps of 10) and blocks
	// appended to both between pages.
	type key struct {
		chain string
		n     uint64
	}
	got := map[key]bool{}
	last := map[string]uint64{"43114": 261, "43113": 1001}
	var lastTS uint64 = 1 << 62
	path = "/v1/blocks?pageSize=33"
	for page := 0; ; page++ {
		var p listBlocksResponse
		get(path, &p)
		for _, b := range p.Blocks {
			var n uint64
			fmt.Sscan(b.BlockNumber, &n)
			k := key{b.ChainID, n}
			require.False(t, got[k], "repeated %v", k)
			got[k] = true
			require.Less(t, n, last[b.ChainID])
			last[b.ChainID] = n
			require.LessOrEqual(t, b.BlockTimestamp, lastTS)
			lastTS = b.BlockTimestamp
		}
		if page == 0 {
			more := storetest.Chain(cChain, 261, 300, 1, "a")
			require.NoError(t, storetest.InsertBlocks(ctx, conn, more))
			require.NoError(t, storetest.SetHead(ctx, conn, more[len(more)-1], 3))
		}
		if p.NextPageToken == "" {
			break
		}
		path = "/v1/blocks?pageSize=33&pageToken=" + p.NextPageToken
	}
	require.Len(t, got, 260+100)
}
