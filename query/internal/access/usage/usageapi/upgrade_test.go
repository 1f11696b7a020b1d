package usageapi

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/testenv"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// TestPerKeyMediansAcrossMigration15: requests rolled up per key before
// migration 15 (durations in the sparse column) and after it (in the dense
// one) make one median. Key p's median needs the requests from before,
// key q's those from after.
func TestPerKeyMediansAcrossMigration15(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	ctx := t.Context()
	ms, err := schema.Migrations()
	require.NoError(t, err)
	// The per-key rollups as migration 14 left them.
	for _, s := range []string{
		"DROP TABLE api_usage_key_hours_dense_mv", "DROP TABLE api_usage_key_days_dense_mv",
		"ALTER TABLE api_usage_key_hours DROP COLUMN duration_counts", "ALTER TABLE api_usage_key_days DROP COLUMN duration_counts",
	} {
		require.NoError(t, conn.Exec(ctx, s), s)
	}
	for _, s := range ms[12].Statements {
		if n := schema.ObjectName(s); n == "api_usage_key_hours_mv" || n == "api_usage_key_days_mv" {
			require.NoError(t, conn.Exec(ctx, s))
		}
	}
	at := d0.Add(10 * time.Hour)
	r := func(key string, ms float64) req {
		return req{"acc", key, "/v1/chains", "", at, 200, ms, 1}
	}
	insert(t, conn, []req{r("p", 1), r("p", 1), r("q", 1), r("q", 8), r("q", 8)})
	_, err = schema.Apply(ctx, conn, schema.Options{})
	require.NoError(t, err)
	insert(t, conn, []req{r("p", 1), r("p", 8), r("p", 8), r("q", 1), r("q", 1)})

	for _, interval := range []string{"hourly", "monthly"} {
		got, err := ReadMetrics(ctx, conn, 10*time.Second, "", true, d0, d0.AddDate(0, 0, 1), interval, "apiKeyId")
		require.NoError(t, err)
		require.Len(t, got, 2, interval)
		for _, b := range got {
			require.Equal(t, uint64(5), b.Requests, "%s %s", interval, b.Group)
			require.InDelta(t, 1, b.MedianMs, 0.2, "%s key %s: the median of 1, 1, 1, 8, 8 ms", interval, b.Group)
		}
	}
}
