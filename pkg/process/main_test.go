package process

import (
	"context"
	"errors"
	"testing"

	"github.com/moraine-data/moraine/pkg/obs"
)

func TestMainExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		newErr error
		runErr error
		want   int
	}{
		{name: "runs and stops", want: 0},
		{name: "help", args: []string{"-help"}, want: 0},
		{name: "unknown flag", args: []string{"--nope"}, want: 2},
		{name: "bad log level", args: []string{"--log.level", "loud"}, want: 2},
		{name: "run fails", runErr: errors.New("boom"), want: 1},
		{name: "new fails", newErr: errors.New("bad config"), want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log obs.LogConfig
			ran := false
			got := Main("svc", tc.args, log.RegisterFlags, &log, func(deps Deps) (Service, error) {
				if err := deps.Validate(); err != nil {
					t.Error(err)
				}
				return serviceFunc(func(ctx context.Context) error {
					ran = true
					if ctx == nil {
						t.Error("run got a nil context")
					}
					return tc.runErr
				}), tc.newErr
			})
			if got != tc.want {
				t.Fatalf("exit code %d, want %d", got, tc.want)
			}
			if ran != (tc.want != 2 && tc.name != "help" && tc.newErr == nil) {
				t.Fatalf("run called = %v", ran)
			}
		})
	}
}

// serviceFunc is a Service from a function.
type serviceFunc func(ctx context.Context) error

func (f serviceFunc) Run(ctx context.Context) error { return f(ctx) }
