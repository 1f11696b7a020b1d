// Package toolmain holds what the mains of the deploy tools (devchain,
// replay, corpus) share: how they exit, and the logger and signal context
// their run starts with. The services' mains are different (metrics,
// health, one registry): see pkg/obs.Main.
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

	"github.com/moraine-data/moraine/pkg/obs"
)

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
