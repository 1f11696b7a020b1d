package process

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/obs"
)

// Main is the whole body of a service's main, the same for every service:
// it parses the flags that register adds (each falling back to its MORAINE_*
// variable), builds the logger from log and the registry, and calls run with
// a context that SIGINT or SIGTERM ends. It returns the exit code: 0 (also
// for -help), 2 for bad flags, 1 when run fails.
func Main(service string, args []string, register func(*flag.FlagSet), log *obs.LogConfig,
	run func(ctx context.Context, logger *slog.Logger, reg *prometheus.Registry) error) int {
	fs := flag.NewFlagSet(service, flag.ContinueOnError)
	register(fs)
	if err := ParseWithEnv(fs, args, "MORAINE"); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", service, err)
		return 2
	}
	logger, err := obs.NewLogger(*log, os.Stderr, service)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", service, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, logger, obs.NewRegistry(service)); err != nil {
		logger.Error(service+" exited", "err", err)
		return 1
	}
	logger.Info(service + " stopped")
	return 0
}
