// Command delivery sends address-activity webhooks: signed POSTs, retried
// durably on the hosted service's schedule, failing webhooks deactivated,
// every attempt logged (see internal/pipeline; flags: delivery -help).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/moraine-data/moraine/delivery/internal/app"
	"github.com/moraine-data/moraine/pkg/obs"
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
