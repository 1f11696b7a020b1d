// Command delivery sends address-activity webhooks.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/delivery/internal/app"
)

func main() { os.Exit(run()) }

func run() int {
	var cfg app.Config
	fs := flag.NewFlagSet("delivery", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := obs.ParseWithEnv(fs, os.Args[1:], "MORAINE"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	logger, err := obs.NewLogger(cfg.Log, os.Stderr, "delivery")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, cfg, logger, obs.NewRegistry("delivery")); err != nil {
		logger.Error("delivery exited", "err", err)
		return 1
	}
	logger.Info("delivery stopped")
	return 0
}
