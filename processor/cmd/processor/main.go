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
	// a soft memory limit (process.DefaultMemoryLimit) sized for two
	// batches of --processor.batch-rows' default in memory at once (the
	// one being built, the one being inserted): a backfill's resident
	// memory stays near 1.5 GiB. A limit under that working set makes the
	// collector run whenever the heap nears it (at 768 MiB the processor
	// took about a quarter more CPU: bench/history.md). GOGC and GOMEMLIMIT
	// still override them.
	process.DefaultGOGC(300)
	process.DefaultMemoryLimit(1536 << 20)
	var cfg app.Config
	os.Exit(process.Main("processor", os.Args[1:], cfg.RegisterFlags, &cfg.Log,
		func(deps process.Deps) (process.Service, error) { return app.New(cfg, deps) }))
}
