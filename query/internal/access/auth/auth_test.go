package auth

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/accountdb"
)

type fakeStore struct {
	keys     map[string]accountdb.Key
	accounts map[string]accountdb.Account
	calls    atomic.Int32
	err      error
}

func (f *fakeStore) KeyByHash(_ context.Context, hash string) (accountdb.Key, error) {
	f.calls.Add(1)
	if f.err != nil {
		return accountdb.Key{}, f.err
	}
	k, ok := f.keys[hash]
	if !ok {
		return accountdb.Key{}, accountdb.ErrNotFound
	}
	return k, nil
}

func (f *fakeStore) Account(_ context.Context, id string) (accountdb.Account, error) {
	a, ok := f.accounts[id]
	if !ok {
		return accountdb.Account{}, accountdb.ErrNotFound
	}
	return a, nil
}

func TestGenerateKey(t *testing.T) {
	k, err := GenerateKey()
	require.NoError(t, err)
	require.True(t, WellFormed(k.Key))
	require.Len(t, k.Key, 67)
	require.Equal(t, HashKey(k.Key), k.Hash)
	require.Equal(t, k.Hash[:16], k.ID)
	require.Equal(t, k.Key[:11], k.Prefix)
	k2, _ := GenerateKey()
	require.NotEqual(t, k.Key, k2.Key)
	require.False(t, WellFormed("mk_XYZ"))
	require.False(t, WellFormed(k.Key+"0"))
}

func TestMiddleware(t *testing.T) {
	gin.SetMode(gin.TestMode)
	good, _ := GenerateKey()
	revoked, _ := GenerateKey()
	orphan, _ := GenerateKey()
	unknown, _ := GenerateKey()
	st := &fakeStore{
		keys: map[string]accountdb.Key{
			good.Hash:    {Hash: good.Hash, ID: good.ID, AccountID: "acc"},
			revoked.Hash: {Hash: revoked.Hash, ID: revoked.ID, AccountID: "acc", RevokedAt: 1},
			orphan.Hash:  {Hash: orphan.Hash, ID: orphan.ID, AccountID: "gone"},
		},
		accounts: map[string]accountdb.Account{"acc": {ID: "acc", Plan: "pro"}},
	}
	now := time.Unix(1_700_000_000, 0)
	a, err := New(DefaultConfig(), Deps{Logger: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(), Store: st, Now: func() time.Time { return now }})
	require.NoError(t, err)

	r := gin.New()
	reply := func(c *gin.Context) {
		k, p := Subject(c)
		c.JSON(200, gin.H{"subject": k, "plan": p})
	}
	r.GET("/v1/chains", a.Identify(), RejectInvalid(), reply)
	r.GET("/v1/webhooks", a.Identify(), RequireKey(), RejectInvalid(), reply)

	type resp struct {
		code int
		body map[string]any
	}
	do := func(path string, hdr map[string]string) resp {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr = "192.0.2.7:1234"
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		var b map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &b))
		return resp{w.Code, b}
	}
	unauthorized := map[string]any{"message": "Unauthorized", "statusCode": 401.0, "error": "Unauthorized"}

	for _, tc := range []struct {
		name     string
		path     string
		hdr      map[string]string
		wantCode int
		wantBody map[string]any
	}{
		{"keyless read", "/v1/chains", nil, 200, map[string]any{"subject": "ip:192.0.2.7", "plan": "unauthenticated"}},
		{"keyless webhooks", "/v1/webhooks", nil, 401, unauthorized},
		{"glacier header", "/v1/webhooks", map[string]string{HeaderGlacierAPIKey: good.Key}, 200, map[string]any{"subject": "account:acc", "plan": "pro"}},
		{"data header", "/v1/chains", map[string]string{HeaderDataAPIKey: good.Key}, 200, map[string]any{"subject": "account:acc", "plan": "pro"}},
		{"both equal", "/v1/webhooks", map[string]string{HeaderDataAPIKey: good.Key, HeaderGlacierAPIKey: good.Key}, 200, map[string]any{"subject": "account:acc", "plan": "pro"}},
		{"both differ", "/v1/webhooks", map[string]string{HeaderDataAPIKey: good.Key, HeaderGlacierAPIKey: unknown.Key}, 401, unauthorized},
		{"unknown key on a read", "/v1/chains", map[string]string{HeaderGlacierAPIKey: unknown.Key}, 401, unauthorized},
		{"malformed key", "/v1/webhooks", map[string]string{HeaderGlacierAPIKey: "hello"}, 401, unauthorized},
		{"revoked key", "/v1/webhooks", map[string]string{HeaderGlacierAPIKey: revoked.Key}, 401, unauthorized},
		{"account gone", "/v1/webhooks", map[string]string{HeaderGlacierAPIKey: orphan.Key}, 401, unauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := do(tc.path, tc.hdr)
			require.Equal(t, tc.wantCode, got.code)
			require.Equal(t, tc.wantBody, got.body)
		})
	}

	t.Run("cache hides a revocation until it expires", func(t *testing.T) {
		calls := st.calls.Load()
		require.Equal(t, 200, do("/v1/webhooks", map[string]string{HeaderGlacierAPIKey: good.Key}).code)
		require.Equal(t, calls, st.calls.Load(), "served from the cache")
		k := st.keys[good.Hash]
		k.RevokedAt = 1
		st.keys[good.Hash] = k
		require.Equal(t, 200, do("/v1/webhooks", map[string]string{HeaderGlacierAPIKey: good.Key}).code)
		now = now.Add(DefaultConfig().CacheTTL)
		require.Equal(t, 401, do("/v1/webhooks", map[string]string{HeaderGlacierAPIKey: good.Key}).code)
	})

	t.Run("lookup failure is 503 and not cached", func(t *testing.T) {
		st.err = accountdb.ErrUnavailable
		fresh, _ := GenerateKey()
		require.Equal(t, 503, do("/v1/webhooks", map[string]string{HeaderGlacierAPIKey: fresh.Key}).code)
		st.err = nil
		require.Equal(t, 401, do("/v1/webhooks", map[string]string{HeaderGlacierAPIKey: fresh.Key}).code)
	})
}
