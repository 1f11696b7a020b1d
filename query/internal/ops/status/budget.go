package status

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Budget is one processor instance's write budget (processor package
// budget), read from its metrics: the operator's read latency target, the
// share of time backfill inserts may take, and the counters from which two
// snapshots give the probe's mean latency and the share of time backfill
// batches waited.
type Budget struct {
	// Instance is the processor's /metrics URL as given.
	Instance string
	Target   time.Duration // 0: the budget is off
	Share    float64
	// ProbeSum and ProbeCount are the probe histogram's; PausedSeconds the
	// time backfill batches waited, since the processor started.
	ProbeSum      float64
	ProbeCount    uint64
	PausedSeconds float64
	Err           string
}

// processorBudget scrapes one processor's /metrics URL.
func processorBudget(ctx context.Context, hc *http.Client, url string) Budget {
	b := Budget{Instance: url}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		b.Err = err.Error()
		return b
	}
	resp, err := hc.Do(req)
	if err != nil {
		b.Err = "unreachable"
		return b
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		b.Err = resp.Status
		return b
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		b.Err = err.Error()
		return b
	}
	first := func(name string) *dto.Metric {
		if f, ok := fams[name]; ok && len(f.GetMetric()) > 0 {
			return f.GetMetric()[0]
		}
		return nil
	}
	m := first("moraine_processor_write_budget_target_seconds")
	if m == nil {
		b.Err = "no write budget metrics (a processor without the sink, or an older one)"
		return b
	}
	b.Target = time.Duration(m.GetGauge().GetValue() * float64(time.Second))
	if m := first("moraine_processor_write_budget_share"); m != nil {
		b.Share = m.GetGauge().GetValue()
	}
	if m := first("moraine_processor_write_budget_paused_seconds_total"); m != nil {
		b.PausedSeconds = m.GetCounter().GetValue()
	}
	if m := first("moraine_processor_write_budget_probe_seconds"); m != nil {
		b.ProbeSum, b.ProbeCount = m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
	}
	return b
}

// renderBudgets writes the write budget table: per processor instance its
// target, share and state and, with an earlier snapshot, the probe's mean
// latency and the share of time backfill batches waited in between.
func renderBudgets(w io.Writer, prev *Snapshot, cur Snapshot) {
	if len(cur.Budgets) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "PROCESSOR\tREAD TARGET\tBACKFILL SHARE\tREAD PROBE\tBACKFILL PAUSED\tSTATE\n")
	for _, b := range cur.Budgets {
		if b.Err != "" {
			fmt.Fprintf(w, "%s\t? (%s)\t\t\t\t\n", b.Instance, b.Err)
			continue
		}
		probe, paused := "-", "-"
		if prev != nil {
			for _, p := range prev.Budgets {
				if p.Instance != b.Instance || p.Err != "" || b.ProbeCount < p.ProbeCount {
					continue
				}
				if n := b.ProbeCount - p.ProbeCount; n > 0 {
					probe = (time.Duration((b.ProbeSum - p.ProbeSum) / float64(n) * float64(time.Second))).Round(100 * time.Microsecond).String()
				}
				if secs := cur.At.Sub(prev.At).Seconds(); secs > 0 {
					paused = fmt.Sprintf("%.0f%%", 100*(b.PausedSeconds-p.PausedSeconds)/secs)
				}
			}
		}
		target, state := "off", "no budget: backfill at full speed"
		if b.Target > 0 {
			target = b.Target.String()
			state = "backfill at full speed"
			if b.Share < 1 {
				state = "backfill gives way to reads (probe over the target)"
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%.0f%%\t%s\t%s\t%s\n", b.Instance, target, 100*b.Share, probe, paused, state)
	}
}
