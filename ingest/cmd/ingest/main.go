// Command ingest follows EVM chains over JSON-RPC and produces their blocks,
// with receipts, logs and call traces, to the Kafka blocks topic. See
// internal/follow for the guarantees and internal/app for the flags.
//
// Every flag not given on the command line falls back to MORAINE_ + its name
// upper-cased with "." and "-" as "_" (--kafka.brokers: MORAINE_KAFKA_BROKERS).
package main

import (
	"os"

	"github.com/moraine-data/moraine/ingest/internal/app"
	"github.com/moraine-data/moraine/pkg/process"
)

func main() {
	cfg := app.DefaultConfig()
	os.Exit(process.Main("ingest", os.Args[1:], cfg.RegisterFlags, &cfg.Log,
		func(deps process.Deps) (process.Service, error) { return app.New(cfg, deps) }))
}
