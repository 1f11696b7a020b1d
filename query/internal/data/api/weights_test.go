package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/query/internal/access/ratelimit"
)

// The rate limiter prices a request by its path (ratelimit.Weight); every
// route must cost there what it declares here.
func TestRouteWeightsMatchRateLimiter(t *testing.T) {
	var got Weight
	e := newEnv(t, func(c *gin.Context) {
		got = RouteWeight(c)
		c.AbortWithStatus(http.StatusNoContent)
	})
	sample := strings.NewReplacer(":chainId", "43114", ":blockId", "1", ":address", "0x0000000000000000000000000000000000000001",
		":txHash", "0x"+strings.Repeat("ab", 32))
	n := 0
	for _, r := range e.router.Routes() {
		if !strings.HasPrefix(r.Path, "/v1/") || r.Method == http.MethodHead {
			continue
		}
		path := sample.Replace(strings.ReplaceAll(r.Path, `\`, ""))
		got = -1
		w := httptest.NewRecorder()
		e.router.ServeHTTP(w, httptest.NewRequest(r.Method, path, nil))
		require.Equal(t, http.StatusNoContent, w.Code, path)
		require.Equal(t, int64(got), ratelimit.Weight(r.Method, path), "%s %s", r.Method, r.Path)
		n++
	}
	require.Equal(t, 23, n)
}
