package rpc

import (
	"errors"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// TestInitCreatesErrorSeries: every result of every initialised method is
// a series at 0 before the first call, so an error ratio over them has a
// numerator from start-up (issue 16: MoraineIngestRPCErrors could never
// fire on the first errors).
func TestInitCreatesErrorSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.Init("43114", "a", "eth_getBlockByNumber", "debug_traceBlockByNumber")
	require.Equal(t, 2*len(results), testutil.CollectAndCount(reg, "moraine_rpc_requests_total"))
	for _, r := range results {
		require.Equal(t, 0.0, testutil.ToFloat64(m.requests.WithLabelValues("43114", "a", "debug_traceBlockByNumber", r)), r)
	}
	// Every label resultLabel gives is among them.
	for _, err := range []error{nil, &Error{Code: -32000}, &Error{Code: 429}, &statusError{code: http.StatusTooManyRequests},
		&statusError{code: 502}, errBadResponse, errTimeout, errors.New("connection reset")} {
		require.Contains(t, results, resultLabel(err, nil), "%v", err)
	}
}
