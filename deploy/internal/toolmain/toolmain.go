// Package toolmain holds what the mains of the deploy tools (devchain,
// replay, corpus) share: how they parse their flags and exit, the logger
// and signal context their run starts with, and how a serving tool stops.
// The services' mains are different (metrics, health, one registry): see
// pkg/process.Main.
package toolmain

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/process"
)

// Flags returns a tool's flag set: it prints parse errors and -help on
// stderr and returns them (Exit turns them into the exit code).
func Flags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// Parse adds the log flags (into log) to fs and parses args; a flag args do
// not set falls back to its MORAINE_* environment variable, as the
// services' flags do. The tools take no positional arguments: one is an
// error rather than silently ignored.
func Parse(fs *flag.FlagSet, args []string, log *obs.LogConfig) error {
	log.RegisterFlags(fs)
	if err := process.ParseWithEnv(fs, args, "MORAINE"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}

// Exit calls run with the command line and exits the process: 0 when run
// succeeds or -help was asked (the flag package printed the usage), else 1
// after printing "<name>: <error>" on stderr.
func Exit(name string, run func(args []string, stderr io.Writer) error) {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Start returns the tool's logger, built from log and made the process
// default, and a context that SIGINT or SIGTERM ends (stop releases it).
func Start(name string, log obs.LogConfig, stderr io.Writer) (ctx context.Context, stop context.CancelFunc, logger *slog.Logger, err error) {
	if logger, err = obs.NewLogger(log, stderr, name); err != nil {
		return nil, nil, nil, err
	}
	slog.SetDefault(logger)
	ctx, stop = signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	return ctx, stop, logger, nil
}

// shutdownTimeout bounds Serve's close: a server stuck on a client must not
// keep the tool from exiting on SIGTERM.
const shutdownTimeout = 30 * time.Second

// Serve blocks until ctx ends (the tool was signalled), then closes its
// server and returns close's error, or an error when close takes longer
// than shutdownTimeout.
func Serve(ctx context.Context, name string, logger *slog.Logger, close func() error) error {
	<-ctx.Done()
	logger.Info(name + ": shutting down")
	done := make(chan error, 1)
	go func() { done <- close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(shutdownTimeout):
		return errors.New("shutdown timed out")
	}
}
