// Command delivery sends address-activity webhooks: signed POSTs, retried
// durably on the hosted service's schedule, failing webhooks deactivated,
// every attempt logged (see internal/pipeline; flags: delivery -help).
package main

import (
	"os"

	"github.com/moraine-data/moraine/delivery/internal/app"
	"github.com/moraine-data/moraine/pkg/process"
)

func main() {
	var cfg app.Config
	os.Exit(process.Main("delivery", os.Args[1:], cfg.RegisterFlags, &cfg.Log,
		func(deps process.Deps) (process.Service, error) { return app.New(cfg, deps) }))
}
