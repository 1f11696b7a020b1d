// Command ingest follows EVM chains over JSON-RPC and produces their blocks,
// with receipts, logs and call traces, to the Kafka blocks topic. See
// internal/follow for the guarantees and internal/app for the flags.
//
// Every flag not given on the command line falls back to MORAINE_ + its name
// upper-cased with "." and "-" as "_" (--kafka.brokers: MORAINE_KAFKA_BROKERS).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/ingest/internal/app"
	"github.com/moraine-data/moraine/pkg/process"
)

func main() {
	cfg := app.DefaultConfig()
	os.Exit(process.Main("ingest", os.Args[1:], cfg.RegisterFlags, &cfg.Log,
		func(ctx context.Context, logger *slog.Logger, reg *prometheus.Registry) error {
			a, err := app.New(cfg, app.Deps{Logger: logger, Registry: reg})
			if err != nil {
				return err
			}
			return a.Run(ctx)
		}))
}
