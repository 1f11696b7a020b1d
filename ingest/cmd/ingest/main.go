// Command ingest follows EVM chains over JSON-RPC and produces their blocks,
// with receipts, logs and call traces, to the Kafka blocks topic. See
// internal/follow for the guarantees and internal/app for the flags.
//
// Every flag not given on the command line falls back to MORAINE_ + its name
// upper-cased with "." and "-" as "_" (--kafka.brokers: MORAINE_KAFKA_BROKERS).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/moraine-data/moraine/ingest/internal/app"
	"github.com/moraine-data/moraine/pkg/obs"
)

func main() { os.Exit(run()) }

func run() int {
	cfg := app.DefaultConfig()
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := obs.ParseWithEnv(fs, os.Args[1:], "MORAINE"); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		fmt.Fprintln(os.Stderr, "ingest:", err)
		return 2
	}
	logger, err := obs.NewLogger(cfg.Log, os.Stderr, "ingest")
	if err != nil {
		fmt.Fprintln(os.Stderr, "ingest:", err)
		return 2
	}
	reg := obs.NewRegistry("ingest")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, cfg, logger, reg); err != nil {
		logger.Error("ingest exited", "err", err)
		return 1
	}
	return 0
}
