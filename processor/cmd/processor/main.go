// Command processor consumes the blocks topic: its sink writes blocks,
// transactions, logs and internal transactions to ClickHouse, and its
// matcher joins them against the watched addresses and produces webhook
// activity to the activity topic (see internal/app).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/processor/internal/app"
)

func main() { os.Exit(run()) }

func run() int {
	var cfg app.Config
	fs := flag.NewFlagSet("processor", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := obs.ParseWithEnv(fs, os.Args[1:], "MORAINE"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	logger, err := obs.NewLogger(cfg.Log, os.Stderr, "processor")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, cfg, logger, obs.NewRegistry("processor")); err != nil {
		logger.Error("processor exited", "err", err)
		return 1
	}
	logger.Info("processor stopped")
	return 0
}
