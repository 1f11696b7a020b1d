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

var on = Config{ReadLatencyTarget: 50 * time.Millisecond, MinShare: 0.1, BackfillLag: time.Minute}

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
