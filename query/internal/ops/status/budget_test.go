package status

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The write budget table: read from each processor's metrics, with the
// probe's and the head blocks' mean latencies and the share of time paused between two snapshots;
// a processor that does not answer, or has no budget, says so.
func TestWriteBudgetTable(t *testing.T) {
	var scrapes atomic.Int32
	throttled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/metrics", r.URL.Path)
		n := scrapes.Add(1)
		// Between the two scrapes: 20 probes of 80 ms in all, 10 head
		// blocks of 120 ms, 3 s paused.
		fmt.Fprintf(w, `# TYPE moraine_processor_write_budget_target_seconds gauge
moraine_processor_write_budget_target_seconds 0.05
# TYPE moraine_processor_write_budget_share gauge
moraine_processor_write_budget_share 0.25
# TYPE moraine_processor_write_budget_paused_seconds_total counter
moraine_processor_write_budget_paused_seconds_total %d
# TYPE moraine_processor_write_budget_probe_seconds histogram
moraine_processor_write_budget_probe_seconds_bucket{le="+Inf"} %d
moraine_processor_write_budget_probe_seconds_sum %g
moraine_processor_write_budget_probe_seconds_count %d
# TYPE moraine_processor_write_budget_head_target_seconds gauge
moraine_processor_write_budget_head_target_seconds 0.3
# TYPE moraine_processor_write_budget_head_seconds histogram
moraine_processor_write_budget_head_seconds_bucket{le="+Inf"} %d
moraine_processor_write_budget_head_seconds_sum %g
moraine_processor_write_budget_head_seconds_count %d
`, 10+3*(n-1), 100+20*(n-1), 2+1.6*float64(n-1), 100+20*(n-1), 5+10*(n-1), 0.5+1.2*float64(n-1), 5+10*(n-1))
	}))
	defer throttled.Close()
	off := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# TYPE moraine_processor_write_budget_target_seconds gauge\nmoraine_processor_write_budget_target_seconds 0\n"+
			"# TYPE moraine_processor_write_budget_share gauge\nmoraine_processor_write_budget_share 1\n")
	}))
	defer off.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# TYPE go_goroutines gauge\ngo_goroutines 7\n")
	}))
	defer other.Close()

	src := Source{ProcessorMetrics: []string{throttled.URL + "/metrics", off.URL + "/metrics", other.URL + "/metrics", "http://127.0.0.1:1/metrics"}}
	t0 := time.Unix(1_700_000_000, 0)
	take := func(at time.Time) Snapshot {
		s := Snapshot{At: at}
		for _, p := range src.ProcessorMetrics {
			s.Budgets = append(s.Budgets, processorBudget(t.Context(), http.DefaultClient, p))
		}
		return s
	}
	prev := take(t0)
	cur := take(t0.Add(10 * time.Second))
	require.Equal(t, 50*time.Millisecond, cur.Budgets[0].Target)
	require.Equal(t, 0.25, cur.Budgets[0].Share)

	var out bytes.Buffer
	require.NoError(t, Render(&out, &prev, cur))
	text := out.String()
	lines := strings.Split(text, "\n")
	row := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return strings.Join(strings.Fields(l), " ")
			}
		}
		t.Fatalf("no row %q in:\n%s", prefix, text)
		return ""
	}
	require.Contains(t, text, "PROCESSOR")
	require.Equal(t, throttled.URL+"/metrics 50ms 80ms 300ms 120ms 25% 30% backfill gives way to reads and head blocks (over a target)", row(throttled.URL))
	require.Equal(t, off.URL+"/metrics off - off - 100% 0% no budget: backfill at full speed", row(off.URL))
	require.Contains(t, row(other.URL), "no write budget metrics")
	require.Contains(t, row("http://127.0.0.1:1/metrics"), "? (unreachable)")
}
