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

// Deps are what Main gives every service: its one logger and its registry
// (with the Go, process and build-info collectors).
type Deps struct {
	Logger   *slog.Logger
	Registry *prometheus.Registry
}

// Validate reports a missing dependency (a wiring bug of a test or main).
func (d Deps) Validate() error {
	if d.Logger == nil || d.Registry == nil {
		return errors.New("Deps.Logger and Deps.Registry are required")
	}
	return nil
}

// Service is what a service's New returns: Run blocks until ctx ends (nil)
// or the service fails.
type Service interface {
	Run(ctx context.Context) error
}

// Main is the whole body of a service's main, the same for every service:
// it parses the flags that register adds (each falling back to its MORAINE_*
// variable), builds the logger from log and the registry, builds the
// service with newService and runs it with a context that SIGINT or SIGTERM
// ends. It returns the exit code: 0 (also for -help), 2 for bad flags, 1
// when the service cannot be built or fails.
func Main(service string, args []string, register func(*flag.FlagSet), log *obs.LogConfig,
	newService func(Deps) (Service, error)) int {
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
	svc, err := newService(Deps{Logger: logger, Registry: obs.NewRegistry(service)})
	if err == nil {
		err = svc.Run(ctx)
	}
	if err != nil {
		logger.Error(service+" exited", "err", err)
		return 1
	}
	logger.Info(service + " stopped")
	return 0
}
