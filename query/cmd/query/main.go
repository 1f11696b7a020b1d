// Command query serves the Avalanche Data API (Glacier) from ClickHouse: the
// block and chain endpoints (internal/api) and the webhook, address, shared
// secret and delivery endpoints (internal/webhookapi).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/process"
	"github.com/moraine-data/moraine/query/internal/app"
)

func main() {
	var cfg app.Config
	os.Exit(process.Main("query", os.Args[1:], cfg.RegisterFlags, &cfg.Log,
		func(ctx context.Context, logger *slog.Logger, reg *prometheus.Registry) error {
			a, err := app.New(cfg, app.Deps{Logger: logger, Registry: reg})
			if err != nil {
				return err
			}
			return a.Run(ctx)
		}))
}
