// Command replay serves a recorded chain (a JSONL file, optionally
// zstd-compressed, one {"block","receipts","traces"} object per line, or a
// corpus directory written by deploy/cmd/corpus, read from disk as needed)
// over JSON-RPC on HTTP and WebSocket, byte for byte as recorded. In --replay.mode
// backfill every block is there from the start; in live mode the blocks are
// released one by one at --replay.rate blocks per second. See package replay.
//
// Every flag can also be set through the environment: MORAINE_ + the flag name
// in upper case with '.' and '-' turned into '_' (--replay.file ->
// MORAINE_REPLAY_FILE). The command line wins.
package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/moraine-data/moraine/deploy/internal/toolmain"
	"github.com/moraine-data/moraine/deploy/replay"
	"github.com/moraine-data/moraine/pkg/obs"
)

type options struct {
	cfg replay.Config
	log obs.LogConfig
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := toolmain.Flags("replay", stderr)
	fs.StringVar(&o.cfg.File, "replay.file", "", "recording to serve: JSONL, optionally zstd-compressed, or a corpus directory (required)")
	fs.StringVar(&o.cfg.Mode, "replay.mode", replay.ModeBackfill, "backfill (every block at once) or live (released one by one)")
	fs.Float64Var(&o.cfg.Rate, "replay.rate", replay.DefaultRate, "live mode: blocks released per second")
	fs.Uint64Var(&o.cfg.ChainID, "chain.id", 0, "EVM chain id for eth_chainId (0: read it from the recorded transactions)")
	fs.StringVar(&o.cfg.ListenAddress, "rpc.listen-address", replay.DefaultListenAddress, "host:port of the JSON-RPC server (HTTP and WebSocket on the same port)")
	fs.IntVar(&o.cfg.Preload, "replay.preload", 1, "live mode: blocks released at start (a backfill before the head)")
	fs.Float64Var(&o.cfg.TracedBlocksPerSecond, "replay.traced-blocks-per-second", 0, "cap on blocks traced per second, a real node's tracer cost (0: no cap)")
	fs.BoolVar(&o.cfg.FaultControl, "replay.fault-control", false, "serve moraine_setFaults and moraine_faultCounts: misbehave on request (the node fault suite)")
	fs.Uint64Var(&o.cfg.Faults.Seed, "replay.fault-seed", 1, "seed of the fault draws")
	if err := toolmain.Parse(fs, args, &o.log); err != nil {
		return nil, err
	}
	if o.cfg.File == "" {
		return nil, errors.New("--replay.file is required")
	}
	if o.cfg.Mode != replay.ModeBackfill && o.cfg.Mode != replay.ModeLive {
		return nil, fmt.Errorf("--replay.mode %q: want backfill or live", o.cfg.Mode)
	}
	if o.cfg.TracedBlocksPerSecond < 0 {
		return nil, errors.New("--replay.traced-blocks-per-second must not be negative")
	}
	if o.cfg.Rate <= 0 {
		return nil, errors.New("--replay.rate must be positive")
	}
	return o, nil
}

func main() { toolmain.Exit("replay", run) }

func run(args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop, logger, err := toolmain.Start("replay", o.log, stderr)
	if err != nil {
		return err
	}
	defer stop()
	o.cfg.Logger = logger
	srv, err := replay.Start(ctx, o.cfg)
	if err != nil {
		return err
	}
	return toolmain.Serve(ctx, "replay", logger, srv.Close)
}
