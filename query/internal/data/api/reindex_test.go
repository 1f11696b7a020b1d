package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/data/nftreindex"
)

// fakeReindexer records the refs it accepts; err, when set, answers instead.
type fakeReindexer struct {
	mu   sync.Mutex
	refs []nftmeta.Ref
	err  error
}

func (f *fakeReindexer) Reindex(_ context.Context, ref nftmeta.Ref) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.refs = append(f.refs, ref)
	return nil
}

func TestReindexNft(t *testing.T) {
	e := newEnv(t)
	cc, err := chains.Parse([]byte(chainFile))
	require.NoError(t, err)
	fake := &fakeReindexer{}
	e.router, e.routes, err = newRouter(Deps{Logger: testenv.Logger(t), Chains: cc, Store: e.store, History: e.history, Contracts: e.contracts,
		Tokens: e.tokens, Config: DefaultConfig(), Reindex: fake}, prometheus.NewRegistry())
	require.NoError(t, err)
	post := func(path string) (int, http.Header, errBody) {
		t.Helper()
		w := httptest.NewRecorder()
		e.router.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, nil))
		var b errBody
		if w.Code != http.StatusCreated {
			require.Equal(t, "application/json; charset=utf-8", w.Header().Get("Content-Type"))
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &b), "%s", w.Body)
			require.Equal(t, w.Code, b.StatusCode)
		} else {
			require.Empty(t, w.Body.Bytes())
		}
		return w.Code, w.Header(), b
	}
	const path = "/v1/chains/43114/nfts/collections/0x71C7656EC7ab88b098defB751B7401B5f6d8976F/tokens/0145:reindex"
	code, _, _ := post(path)
	require.Equal(t, http.StatusCreated, code)
	// By blockchain id too; the token id in its canonical form.
	code, _, _ = post("/v1/chains/" + cChainBC + "/nfts/collections/0x71c7656ec7ab88b098defb751b7401b5f6d8976f/tokens/0:reindex")
	require.Equal(t, http.StatusCreated, code)
	require.Len(t, fake.refs, 2)
	require.Equal(t, uint64(43114), fake.refs[0].ChainID)
	require.Equal(t, "145", fake.refs[0].TokenID)
	require.Equal(t, "0x71c7656ec7ab88b098defb751b7401b5f6d8976f", fake.refs[0].Contract.Hex())
	require.Equal(t, "0", fake.refs[1].TokenID)

	for _, tc := range []struct {
		path   string
		status int
		msg    any
	}{
		{"/v1/chains/43114/nfts/collections/0x71C7/tokens/1:reindex", 400, []any{msgAddress}},
		{"/v1/chains/43114/nfts/collections/0x71C7656EC7ab88b098defB751B7401B5f6d8976F/tokens/-1:reindex", 400, []any{msgTokenID}},
		{"/v1/chains/43114/nfts/collections/0x71C7656EC7ab88b098defB751B7401B5f6d8976F/tokens/0x10:reindex", 400, []any{msgTokenID}},
		{"/v1/chains/43114/nfts/collections/0x71C7656EC7ab88b098defB751B7401B5f6d8976F/tokens/" +
			"115792089237316195423570985008687907853269984665640564039457584007913129639936:reindex", 400, []any{msgTokenID}},
		{"/v1/chains/x!/nfts/collections/nope/tokens/z:reindex", 400,
			[]any{"chainId must be a decimal EVM chain id or a base58 blockchain id", msgAddress, msgTokenID}},
		{"/v1/chains/999/nfts/collections/0x71C7656EC7ab88b098defB751B7401B5f6d8976F/tokens/1:reindex", 404, "Chain 999 not found"},
	} {
		code, _, b := post(tc.path)
		require.Equal(t, tc.status, code, tc.path)
		require.Equal(t, tc.msg, b.Message, tc.path)
	}
	require.Len(t, fake.refs, 2, "invalid requests reach no reindexer")

	last := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	fake.err = &nftreindex.TooSoonError{Last: last, Next: last.Add(time.Hour)}
	code, hdr, b := post(path)
	require.Equal(t, http.StatusTooManyRequests, code)
	require.Equal(t, "Too Many Requests", b.Error)
	require.Contains(t, b.Message, "once per hour")
	retry, err := strconv.Atoi(hdr.Get("Retry-After"))
	require.NoError(t, err)
	require.InDelta(t, 50*60, retry, 5)

	fake.err = errors.Join(nftreindex.ErrUnavailable, errors.New("kafka down"))
	code, _, b = post(path)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "NFT reindexing is temporarily unavailable", b.Message)
}
