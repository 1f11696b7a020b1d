package export

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/chains"
)

var testChains = func() *chains.Config {
	c, err := chains.Parse([]byte(`{"chains": [
 {"evmChainId": "43114", "blockchainId": "2q9e4r6Mu3U68nU1fYjgbR6JvwrRx36CohpAX5UQxse55x1Q5", "name": "C", "network": "mainnet",
  "rpcUrls": ["http://127.0.0.1:1"], "networkToken": {"name": "Avalanche", "symbol": "AVAX", "decimals": 18}},
 {"evmChainId": "43113", "name": "Fuji", "network": "fuji", "rpcUrls": ["http://127.0.0.1:1"],
  "networkToken": {"name": "Avalanche", "symbol": "AVAX", "decimals": 18}}]}`))
	if err != nil {
		panic(err)
	}
	return c
}()

func TestParseRequest(t *testing.T) {
	lim := limits{maxDays: 31, maxAddresses: 2, today: time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)}
	a1, a2 := "0x9702230A8Ea53601f5cD2dc00fDBc13d4dF4A8c7", "0xB97EF9Ef8734C71904D8002F8b6Bc66Dd9c48a6E"
	ok := `{"type": "TRANSACTION_EXPORT_EVM", "firstDate": "2026-03-01", "lastDate": "2026-03-02",
	  "options": {"addresses": ["` + a1 + `", "` + strings.ToLower(a1) + `", "` + a2 + `"],
	  "includeChains": ["43114", "2q9e4r6Mu3U68nU1fYjgbR6JvwrRx36CohpAX5UQxse55x1Q5", "43113"]}}`
	s, errs := parseRequest([]byte(ok), testChains, lim)
	require.Nil(t, errs)
	require.Equal(t, spec{Addresses: []string{strings.ToLower(a1), strings.ToLower(a2)}, Chains: []string{"43114", "43113"},
		First: "2026-03-01", Last: "2026-03-02"}, s)
	// The deprecated names.
	s, errs = parseRequest([]byte(`{"type": "TRANSACTION_EXPORT_EVM", "startDate": "2026-03-01", "endDate": "2026-03-01",
	  "options": {"addresses": ["`+a1+`"], "includeChains": ["43114"]}}`), testChains, lim)
	require.Nil(t, errs)
	require.Equal(t, "2026-03-01", s.Last)

	for _, tc := range []struct {
		body string
		want []string
	}{
		{`[]`, []string{"Request body must be a JSON object"}},
		{`{"type": "TRANSACTION_EXPORT_PRIMARY_NETWORK", "firstDate": "2026-03-01", "lastDate": "2026-03-01", "options": {"addresses": ["` + a1 + `"], "includeChains": ["43114"]}}`,
			[]string{"type TRANSACTION_EXPORT_PRIMARY_NETWORK is not supported: moraine exports EVM transactions (type TRANSACTION_EXPORT_EVM)"}},
		{`{"firstDate": "2026-03-01", "lastDate": "2026-03-01", "options": {"addresses": ["` + a1 + `"], "includeChains": ["43114"]}}`,
			[]string{"type must be one of the following values: TRANSACTION_EXPORT_EVM"}},
		{`{"type": "TRANSACTION_EXPORT_EVM", "options": {"addresses": ["` + a1 + `"], "includeChains": ["43114"]}}`,
			[]string{"firstDate is required (YYYY-MM-DD, UTC)", "lastDate is required (YYYY-MM-DD, UTC)"}},
		{`{"type": "TRANSACTION_EXPORT_EVM", "firstDate": "2026-3-1", "lastDate": 5, "options": {"addresses": ["` + a1 + `"], "includeChains": ["43114"]}}`,
			[]string{"firstDate must be a date written YYYY-MM-DD", "lastDate must be a date written YYYY-MM-DD"}},
		{`{"type": "TRANSACTION_EXPORT_EVM", "firstDate": "2026-03-05", "lastDate": "2026-03-04", "options": {"addresses": ["` + a1 + `"], "includeChains": ["43114"]}}`,
			[]string{"lastDate 2026-03-04 is before firstDate 2026-03-05"}},
		{`{"type": "TRANSACTION_EXPORT_EVM", "firstDate": "2026-03-05", "lastDate": "2026-03-11", "options": {"addresses": ["` + a1 + `"], "includeChains": ["43114"]}}`,
			[]string{"lastDate 2026-03-11 is in the future (today is 2026-03-10, UTC)"}},
		{`{"type": "TRANSACTION_EXPORT_EVM", "firstDate": "2026-01-01", "lastDate": "2026-03-01", "options": {"addresses": ["` + a1 + `"], "includeChains": ["43114"]}}`,
			[]string{"the range from firstDate to lastDate is 60 days; at most 31 are exported at once"}},
		{`{"type": "TRANSACTION_EXPORT_EVM", "firstDate": "2026-03-01", "startDate": "2026-03-02", "lastDate": "2026-03-02", "options": {"addresses": ["` + a1 + `"], "includeChains": ["43114"]}}`,
			[]string{"firstDate and startDate (its deprecated name) differ: give one of them"}},
		{`{"type": "TRANSACTION_EXPORT_EVM", "firstDate": "2026-03-01", "lastDate": "2026-03-01"}`,
			[]string{"options must be an object with addresses and includeChains"}},
		{`{"type": "TRANSACTION_EXPORT_EVM", "firstDate": "2026-03-01", "lastDate": "2026-03-01", "options": {"addresses": ["0x12", "` + a1 + `", "0x01", "0x0000000000000000000000000000000000000003", "0x0000000000000000000000000000000000000004"], "includeChains": ["1", "43114"]}}`,
			[]string{`options.addresses: "0x12" is not an address (0x and 40 hex digits)`, `options.addresses: "0x01" is not an address (0x and 40 hex digits)`,
				"options.addresses must contain no more than 2 addresses", `options.includeChains: chain "1" is not configured (GET /v1/chains lists them)`}},
		{`{"type": "TRANSACTION_EXPORT_EVM", "firstDate": "2026-03-01", "lastDate": "2026-03-01", "options": {"addresses": [], "includeChains": "43114"}}`,
			[]string{"options.addresses must contain at least 1 address", "options.includeChains must be an array of chain ids"}},
	} {
		_, errs := parseRequest([]byte(tc.body), testChains, lim)
		require.Equal(t, tc.want, errs, tc.body)
	}
}
