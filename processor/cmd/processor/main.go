// Command processor consumes the blocks topic: its sink writes blocks,
// transactions, logs and internal transactions to ClickHouse, and its
// matcher joins them against the watched addresses and produces webhook
// activity to the activity topic (see internal/app).
package main

import (
	"os"

	"github.com/moraine-data/moraine/pkg/process"
	"github.com/moraine-data/moraine/processor/internal/app"
)

func main() {
	// A higher GC target than Go's default (see process.DefaultGOGC), under
	// a soft memory limit of 768 MiB (process.DefaultMemoryLimit); GOGC and
	// GOMEMLIMIT still override them.
	process.DefaultGOGC(300)
	process.DefaultMemoryLimit(768 << 20)
	var cfg app.Config
	os.Exit(process.Main("processor", os.Args[1:], cfg.RegisterFlags, &cfg.Log,
		func(deps process.Deps) (process.Service, error) { return app.New(cfg, deps) }))
}
