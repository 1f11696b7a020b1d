package budget

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func newBudget(t *testing.T, cfg Config) (*Budget, *prometheus.Registry) {
	t.Helper()
	require.NoError(t, cfg.Validate())
	reg := prometheus.NewRegistry()
	return New(cfg, reg, slog.New(slog.NewTextHandler(io.Discard, nil))), reg
}

var (
	on     = Config{ReadLatencyTarget: 50 * time.Millisecond, MinShare: 0.1, BackfillLag: time.Minute}
	headOn = Config{HeadLatencyTarget: 200 * time.Millisecond, MinShare: 0.1, BackfillLag: time.Minute}
)

func TestValidateRefusesSettingsThatStarve(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" when valid
	}{
		{name: "off", cfg: Config{}},
		{name: "off ignores the rest", cfg: Config{MinShare: 5}},
		{name: "on", cfg: on},
		// An idle ClickHouse's own latency: throttled with nothing to serve.
		{name: "target too low", cfg: Config{ReadLatencyTarget: time.Millisecond, MinShare: 0.1, BackfillLag: time.Minute}, want: "read-latency-target"},
		// The head would count as backfill.
		{name: "lag too short", cfg: Config{ReadLatencyTarget: 50 * time.Millisecond, MinShare: 0.1, BackfillLag: 5 * time.Second}, want: "backfill-lag"},
		{name: "no floor", cfg: Config{ReadLatencyTarget: 50 * time.Millisecond, MinShare: 0, BackfillLag: time.Minute}, want: "backfill-min-share"},
		// Never giving way is the budget off, said confusingly.
		{name: "share 1", cfg: Config{ReadLatencyTarget: 50 * time.Millisecond, MinShare: 1, BackfillLag: time.Minute}, want: "backfill-min-share"},
		{name: "head only", cfg: headOn},
		// What a head block takes at rest: throttled with nothing to deliver.
		{name: "head target too low", cfg: Config{HeadLatencyTarget: 10 * time.Millisecond, MinShare: 0.1, BackfillLag: time.Minute}, want: "head-latency-target"},
		{name: "head target negative", cfg: Config{HeadLatencyTarget: -time.Second, MinShare: 0.1, BackfillLag: time.Minute}, want: "negative"},
		{name: "head only, no floor", cfg: Config{HeadLatencyTarget: 200 * time.Millisecond, BackfillLag: time.Minute}, want: "backfill-min-share"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestShareFollowsTheProbe(t *testing.T) {
	b, reg := newBudget(t, on)
	require.Equal(t, time.Duration(0), b.Pause(time.Second), "unthrottled at start")

	// Slow reads: the share falls geometrically to the floor.
	for range 3 {
		b.Observe(200 * time.Millisecond)
	}
	require.InDelta(t, 0.343, b.Share(), 1e-9)
	for range 20 {
		b.Observe(200 * time.Millisecond)
	}
	require.Equal(t, 0.1, b.Share())
	require.Equal(t, 0.1, testutil.ToFloat64(b.m.share))
	// At share 0.1 a batch that took 100 ms waits 900 ms; a long one waits
	// at most maxPause.
	require.Equal(t, 900*time.Millisecond, b.Pause(100*time.Millisecond).Round(time.Millisecond))
	require.Equal(t, maxPause, b.Pause(time.Minute))

	// Fast again: the slowest of the last probeWindow probes still counts,
	// so nothing changes for three more probes...
	for range probeWindow - 1 {
		b.Observe(time.Millisecond)
		require.Equal(t, 0.1, b.Share())
	}
	// ...then it grows back linearly, to 1.
	b.Observe(time.Millisecond)
	require.InDelta(t, 0.12, b.Share(), 1e-9)
	for range 100 {
		b.Observe(time.Millisecond)
	}
	require.Equal(t, 1.0, b.Share())
	require.Equal(t, time.Duration(0), b.Pause(time.Second))

	// Between half the target and the target: held where it is.
	for range probeWindow {
		b.Observe(40 * time.Millisecond)
	}
	require.Equal(t, 1.0, b.Share())
	require.Equal(t, 0.05, testutil.ToFloat64(b.m.target))
	n, err := testutil.GatherAndCount(reg, "moraine_processor_write_budget_probe_seconds")
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func TestOffNeverPauses(t *testing.T) {
	b, _ := newBudget(t, Config{})
	b.Observe(time.Hour)
	require.Equal(t, time.Duration(0), b.Pause(time.Second))
	// Run returns at once.
	done := make(chan struct{})
	go func() { b.Run(context.Background(), func(context.Context) error { return nil }); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("Run of a budget that is off did not return")
	}
}

func TestRunProbes(t *testing.T) {
	b, _ := newBudget(t, on)
	ctx, cancel := context.WithCancel(t.Context())
	probes := 0
	done := make(chan struct{})
	go func() {
		b.Run(ctx, func(context.Context) error {
			probes++
			if probes == 1 {
				return errors.New("clickhouse away") // ignored: the share stays
			}
			time.Sleep(60 * time.Millisecond) // over the target
			if probes == 3 {
				cancel()
			}
			return nil
		})
		close(done)
	}()
	<-done
	require.Equal(t, 3, probes)
	require.InDelta(t, 0.7, b.Share(), 1e-9, "one slow probe counted (the failed one was not, the cancelled one neither)")
}

func TestBackfill(t *testing.T) {
	b, _ := newBudget(t, on)
	now := time.Unix(1_000_000, 0)
	require.True(t, b.Backfill(uint64(now.Add(-2*time.Minute).Unix()), now))
	require.False(t, b.Backfill(uint64(now.Add(-10*time.Second).Unix()), now))
	require.False(t, b.Backfill(uint64(now.Unix()+5), now), "a block from a clock ahead of ours is at the head")
	require.True(t, strings.HasPrefix(b.m.share.Desc().String(), "Desc{fqName: \"moraine_processor_write_budget_share\""))
}

// TestShareFollowsTheHead: a head block slower than the head target shrinks
// the share as a slow probe does, for headWindow; backfill blocks do not
// count; with both signals on, either one slow is enough, and the share
// grows back only once both are under half their targets.
func TestShareFollowsTheHead(t *testing.T) {
	b, reg := newBudget(t, headOn)
	now := time.Unix(1_000_000, 0)
	b.now = func() time.Time { return now }
	ts := uint64(now.Unix()) // a block at the head

	// A backfill block, however late, is not the head's.
	b.ObserveHead(uint64(now.Add(-time.Hour).Unix()), now.Add(-time.Minute))
	b.adjust()
	require.Equal(t, 1.0, b.Share())

	// One slow head block: the share falls at every adjustment while it is
	// in the window...
	b.ObserveHead(ts, now.Add(-500*time.Millisecond))
	for range 3 {
		b.adjust()
	}
	require.InDelta(t, 0.343, b.Share(), 1e-9)
	require.Equal(t, 0.2, testutil.ToFloat64(b.m.headTarget))
	n, err := testutil.GatherAndCount(reg, "moraine_processor_write_budget_head_seconds")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	// ...and no longer once the window has passed; fast blocks let it grow.
	now = now.Add(headWindow + time.Second)
	b.ObserveHead(uint64(now.Unix()), now.Add(-20*time.Millisecond))
	b.adjust()
	require.InDelta(t, 0.363, b.Share(), 1e-9)

	// Run adjusts without probing when only the head target is set.
	probed := false
	ctx, cancel := context.WithTimeout(t.Context(), 3*ProbeInterval)
	defer cancel()
	b.Run(ctx, func(context.Context) error { probed = true; return nil })
	require.False(t, probed)
	require.Greater(t, b.Share(), 0.363)

	// Both signals: slow reads alone shrink it though head blocks are fast.
	both := headOn
	both.ReadLatencyTarget = 50 * time.Millisecond
	b2, _ := newBudget(t, both)
	b2.now = func() time.Time { return now }
	b2.ObserveHead(uint64(now.Unix()), now.Add(-10*time.Millisecond))
	b2.Observe(200 * time.Millisecond)
	require.InDelta(t, 0.7, b2.Share(), 1e-9)
	// Fast reads with a head block between half the target and the target:
	// held where it is.
	b3, _ := newBudget(t, both)
	b3.now = func() time.Time { return now }
	b3.Observe(200 * time.Millisecond)
	b3.ObserveHead(uint64(now.Unix()), now.Add(-150*time.Millisecond))
	for range probeWindow {
		b3.Observe(time.Millisecond)
	}
	require.InDelta(t, 0.2401, b3.Share(), 1e-9, "the slow probe counts while in the window")
	b3.Observe(time.Millisecond)
	require.InDelta(t, 0.2401, b3.Share(), 1e-9, "then nothing moves")
}
