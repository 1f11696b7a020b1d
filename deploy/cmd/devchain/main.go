// Command devchain runs the moraine development chain: an in-process
// go-ethereum node (chain id 43112 by default) that mines a block every
// --block.interval with seeded, realistic traffic and serves JSON-RPC over HTTP
// and WebSocket on --rpc.listen-address. See package devchain for details.
//
// With --datadir the chain is stored in that directory and continues from it
// after a restart; SIGINT or SIGTERM stops it cleanly. The database is synced
// after every block, so a SIGKILL loses at most the block being sealed (or the
// unsynced part of a moraine_mine batch): the chain then continues from what
// was stored.
//
// Every flag can also be set through the environment: MORAINE_ + the flag name
// in upper case with '.' and '-' turned into '_' (--block.interval ->
// MORAINE_BLOCK_INTERVAL). The command line wins.
package main

import (
	"errors"
	"io"
	"log/slog"

	gethlog "github.com/ethereum/go-ethereum/log"

	"github.com/moraine-data/moraine/deploy/devchain"
	"github.com/moraine-data/moraine/deploy/internal/toolmain"
	"github.com/moraine-data/moraine/pkg/obs"
)

type options struct {
	cfg devchain.Config
	log obs.LogConfig
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := toolmain.Flags("devchain", stderr)
	fs.StringVar(&o.cfg.ListenAddress, "rpc.listen-address", devchain.DefaultListenAddress, "host:port of the JSON-RPC server (HTTP and WebSocket on the same port)")
	fs.Uint64Var(&o.cfg.ChainID, "chain.id", devchain.DefaultChainID, "EVM chain id")
	fs.DurationVar(&o.cfg.BlockInterval, "block.interval", devchain.DefaultBlockInterval, "time between blocks (0s: only on moraine_mine)")
	txPerBlock := fs.Int("traffic.tx-per-block", devchain.DefaultTxPerBlock, "generated transactions per block (0: empty blocks)")
	fs.Uint64Var(&o.cfg.Seed, "traffic.seed", 1, "seed of the traffic generator (same seed, same transactions)")
	fs.IntVar(&o.cfg.Accounts, "traffic.accounts", devchain.DefaultAccounts, "number of funded accounts that send traffic")
	fs.StringVar(&o.cfg.DataDir, "datadir", "", "directory of the chain database: a restart continues the chain stored there "+
		"(created if missing; keep --chain.id and --traffic.accounts unchanged, or remove it). Empty: in memory, every start is a new chain from genesis")
	fs.StringVar(&o.cfg.MetadataBaseURL, "metadata.base-url", "", "URL prefix of the NFT metadata documents the metadata collections' token URIs name "+
		"(served under /nft/ on --rpc.listen-address); empty: http://<rpc.listen-address>/nft/. Set it when the metadata worker reaches the chain under another name")
	if err := toolmain.Parse(fs, args, &o.log); err != nil {
		return nil, err
	}
	if o.cfg.BlockInterval == 0 {
		o.cfg.BlockInterval = -1 // manual
	}
	if o.cfg.BlockInterval < 0 {
		o.cfg.BlockInterval = -1
	}
	switch {
	case *txPerBlock == 0:
		o.cfg.TxPerBlock = -1 // no traffic
	case *txPerBlock < 0:
		return nil, errors.New("--traffic.tx-per-block must not be negative")
	default:
		o.cfg.TxPerBlock = *txPerBlock
	}
	if o.cfg.Accounts < 2 {
		return nil, errors.New("--traffic.accounts must be at least 2")
	}
	return o, nil
}

func main() { toolmain.Exit("devchain", run) }

func run(args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop, logger, err := toolmain.Start("devchain", o.log, stderr)
	if err != nil {
		return err
	}
	defer stop()
	// go-ethereum's own log lines: warnings and errors only, unless debugging.
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(o.log.Level))
	gethLevel := max(lvl, slog.LevelWarn)
	if lvl <= slog.LevelDebug {
		gethLevel = slog.LevelInfo
	}
	gethLogger, _ := obs.NewLogger(obs.LogConfig{Level: gethLevel.String(), Format: o.log.Format}, stderr, "devchain")
	gethlog.SetDefault(gethlog.NewLogger(gethLogger.Handler().WithAttrs([]slog.Attr{slog.String("component", "geth")})))
	o.cfg.Logger = logger

	chain, err := devchain.Start(ctx, o.cfg)
	if err != nil {
		return err
	}
	return toolmain.Serve(ctx, "devchain", logger, chain.Close)
}
