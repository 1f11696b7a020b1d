// Command delivery sends address-activity webhooks: signed POSTs, retried
// durably on the hosted service's schedule, failing webhooks deactivated,
// every attempt logged (see internal/pipeline; flags: delivery -help).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/delivery/internal/app"
	"github.com/moraine-data/moraine/pkg/process"
)

func main() {
	var cfg app.Config
	os.Exit(process.Main("delivery", os.Args[1:], cfg.RegisterFlags, &cfg.Log,
		func(ctx context.Context, logger *slog.Logger, reg *prometheus.Registry) error {
			a, err := app.New(cfg, app.Deps{Logger: logger, Registry: reg})
			if err != nil {
				return err
			}
			return a.Run(ctx)
		}))
}
