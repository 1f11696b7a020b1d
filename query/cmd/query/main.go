// Command query serves the Avalanche Data API (Glacier) block and chain
// endpoints from ClickHouse. See internal/api for the routes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/query/internal/app"
)

func main() { os.Exit(run()) }

func run() int {
	var cfg app.Config
	fs := flag.NewFlagSet("query", flag.ExitOnError)
	cfg.RegisterFlags(fs)
	if err := obs.ParseWithEnv(fs, os.Args[1:], "MORAINE"); err != nil {
		fmt.Fprintln(os.Stderr, "query:", err)
		return 2
	}
	logger, err := obs.NewLogger(cfg.Log, os.Stderr, "query")
	if err != nil {
		fmt.Fprintln(os.Stderr, "query:", err)
		return 2
	}
	reg := obs.NewRegistry("query")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, cfg, app.Deps{Logger: logger, Registry: reg}); err != nil {
		logger.Error("query exited", "err", err)
		return 1
	}
	return 0
}
