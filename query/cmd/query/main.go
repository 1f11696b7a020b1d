// Command query serves the Avalanche Data API (Glacier) from ClickHouse: the
// block and chain endpoints (internal/api) and the webhook, address, shared
// secret and delivery endpoints (internal/webhookapi).
package main

import (
	"os"

	"github.com/moraine-data/moraine/pkg/process"
	"github.com/moraine-data/moraine/query/internal/app"
)

func main() {
	var cfg app.Config
	os.Exit(process.Main("query", os.Args[1:], cfg.RegisterFlags, &cfg.Log,
		func(deps process.Deps) (process.Service, error) {
			return app.New(cfg, app.Deps{Logger: deps.Logger, Registry: deps.Registry})
		}))
}
