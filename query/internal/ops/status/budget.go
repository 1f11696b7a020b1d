package status

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Budget is one processor instance's write budget (processor package
// budget), read from its metrics: the operator's read and head latency
// targets, the share of time backfill inserts may take, and the counters
// from which two snapshots give the probe's and the head blocks' mean
// latencies and the share of time backfill batches waited.
type Budget struct {
	// Instance is the processor's /metrics URL as given.
	Instance string
	Target   time.Duration // 0: the read signal is off
	// HeadTarget is the head latency target (0: off, or an older processor).
	HeadTarget time.Duration
	Share      float64
	// ProbeSum and ProbeCount are the probe histogram's, HeadSum and
	// HeadCount the head blocks'; PausedSeconds the time backfill batches
	// waited, since the processor started.
	ProbeSum      float64
	ProbeCount    uint64
	HeadSum       float64
	HeadCount     uint64
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
	if m := first("moraine_processor_write_budget_head_target_seconds"); m != nil {
		b.HeadTarget = time.Duration(m.GetGauge().GetValue() * float64(time.Second))
	}
	if m := first("moraine_processor_write_budget_head_seconds"); m != nil {
		b.HeadSum, b.HeadCount = m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
	}
	return b
}

// renderBudgets writes the write budget table: per processor instance its
// targets, share and state and, with an earlier snapshot, the probe's and
// the head blocks' mean latencies and the share of time backfill batches
// waited in between.
func renderBudgets(w io.Writer, prev *Snapshot, cur Snapshot) {
	if len(cur.Budgets) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "PROCESSOR\tREAD TARGET\tREAD PROBE\tHEAD TARGET\tHEAD\tBACKFILL SHARE\tBACKFILL PAUSED\tSTATE\n")
	for _, b := range cur.Budgets {
		if b.Err != "" {
			fmt.Fprintf(w, "%s\t? (%s)\t\t\t\t\t\t\n", b.Instance, b.Err)
			continue
		}
		probe, head, paused := "-", "-", "-"
		if prev != nil {
			for _, p := range prev.Budgets {
				if p.Instance != b.Instance || p.Err != "" || b.ProbeCount < p.ProbeCount {
					continue
				}
				probe = meanBetween(p.ProbeSum, b.ProbeSum, p.ProbeCount, b.ProbeCount, probe)
				head = meanBetween(p.HeadSum, b.HeadSum, p.HeadCount, b.HeadCount, head)
				if secs := cur.At.Sub(prev.At).Seconds(); secs > 0 {
					paused = fmt.Sprintf("%.0f%%", 100*(b.PausedSeconds-p.PausedSeconds)/secs)
				}
			}
		}
		target, headTarget, state := "off", "off", "no budget: backfill at full speed"
		var signals []string
		if b.Target > 0 {
			target = b.Target.String()
			signals = append(signals, "reads")
		}
		if b.HeadTarget > 0 {
			headTarget = b.HeadTarget.String()
			signals = append(signals, "head blocks")
		}
		if len(signals) > 0 {
			state = "backfill at full speed"
			if b.Share < 1 {
				state = "backfill gives way to " + strings.Join(signals, " and ") + " (over a target)"
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%.0f%%\t%s\t%s\n", b.Instance, target, probe, headTarget, head, 100*b.Share, paused, state)
	}
}

// meanBetween is a histogram's mean latency between two snapshots (sums in
// seconds), or none when nothing was observed in between.
func meanBetween(sum0, sum1 float64, n0, n1 uint64, none string) string {
	if n1 <= n0 {
		return none
	}
	return time.Duration((sum1 - sum0) / float64(n1-n0) * float64(time.Second)).Round(100 * time.Microsecond).String()
}
