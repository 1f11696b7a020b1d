package process

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/obs"
)

func TestMainExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		runErr error
		want   int
	}{
		{name: "runs and stops", want: 0},
		{name: "help", args: []string{"-help"}, want: 0},
		{name: "unknown flag", args: []string{"--nope"}, want: 2},
		{name: "bad log level", args: []string{"--log.level", "loud"}, want: 2},
		{name: "run fails", runErr: errors.New("boom"), want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log obs.LogConfig
			ran := false
			got := Main("svc", tc.args, log.RegisterFlags, &log, func(ctx context.Context, l *slog.Logger, r *prometheus.Registry) error {
				ran = true
				if l == nil || r == nil || ctx == nil {
					t.Error("run got nil dependencies")
				}
				return tc.runErr
			})
			if got != tc.want {
				t.Fatalf("exit code %d, want %d", got, tc.want)
			}
			if ran != (tc.want != 2 && tc.name != "help") {
				t.Fatalf("run called = %v", ran)
			}
		})
	}
}
