// Command querybench seeds synthetic blocks and transaction history and
// loads a running query service.
//
//	querybench seed [--clickhouse.* flags] --chain 43112 --blocks 10000000 [--first 0] [--step 1] \
//	    [--txs 50000000 --tx-per-block 5 --addresses 10000000 --tokens 100]
//	querybench load --url http://127.0.0.1:8080 --rate 500 --duration 30s \
//	    --path /v1/chains/43112/blocks --path '/v1/chains/43112/blocks/{rand:0:9999999}'
//	querybench load --rate 200 --duration 2h --head-chain 99913 --report-every 10s \
//	    --path '/v1/chains/99913/blocks/{rand:1:head}'      (a chain being backfilled)
//	querybench page-token --url http://127.0.0.1:8080 --path /v1/chains/43112/addresses/0x.../transactions --pages 999
//	querybench seed-usage [--clickhouse.* flags] --requests 10000000 --accounts 1000 --days 30 --keys-out FILE
//
// seed writes the chain with INSERT ... SELECT FROM numbers() (10M blocks in
// about a minute on 2 cores) and sets its head in chain_heads; with --txs it
// then writes that many transactions over those blocks (step 1) with the
// transaction-history tables (bench.SeedHistory: three router addresses with
// 10%, 5% and 2% of the transactions, a pool of --addresses accounts, ERC-20
// transfers of --tokens tokens); --blocks 0 seeds only the history of blocks
// seeded before. The service's chain file must list the chain. load fires
// requests open-loop at --rate (round-robin over --path; "{rand:LO:HI}" is a
// random integer per request, "{rand:LO:head}" one up to the newest block of
// --head-chain, "{addr:LO:HI}" and "{txhash:LO:HI}" a seeded address or
// transaction hash) and prints p50/p90/p99/max per path, with --report-every
// also per interval. An interrupt (SIGINT) ends the run early and prints what
// it measured; --header "name: value" (repeatable) is sent with every
// request. page-token follows nextPageToken --pages times and prints the
// token of the next page, for loading a deep page. seed-usage writes a
// request log of --requests requests over --days days ending today (and
// its usage rollups) for --accounts accounts, and writes API keys to read
// it to --keys-out (bench.SeedUsage). Flags fall back to MORAINE_* env vars.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/process"
	"github.com/moraine-data/moraine/query/internal/ops/bench"
)

type paths []string

func (p *paths) String() string     { return strings.Join(*p, ",") }
func (p *paths) Set(v string) error { *p = append(*p, v); return nil }

func main() { os.Exit(run()) }

func run() int {
	if len(os.Args) < 2 || (os.Args[1] != "seed" && os.Args[1] != "load" && os.Args[1] != "page-token" && os.Args[1] != "node" && os.Args[1] != "seed-usage") {
		fmt.Fprintln(os.Stderr, "usage: querybench seed|load|page-token|node|seed-usage [flags] (-h for the flags of each)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger, _ := obs.NewLogger(obs.LogConfig{Level: "info", Format: "text"}, os.Stderr, "querybench")
	fs := flag.NewFlagSet("querybench "+os.Args[1], flag.ExitOnError)
	switch os.Args[1] {
	case "seed":
		var (
			ch chclient.Config
			sc bench.SeedConfig
			hc bench.HistoryConfig
		)
		ch.RegisterFlags(fs)
		fs.Uint64Var(&sc.ChainID, "chain", 43112, "EVM chain id of the synthetic chain")
		fs.Uint64Var(&sc.First, "first", 0, "first block number")
		fs.Uint64Var(&sc.Blocks, "blocks", 10_000_000, "number of blocks")
		fs.Uint64Var(&sc.Step, "step", 1, "distance between block numbers (100: every 100th block, like a replay)")
		fs.Uint64Var(&sc.Chunk, "chunk", 1_000_000, "rows per INSERT ... SELECT")
		fs.Uint64Var(&hc.Txs, "txs", 0, "transactions of synthetic history over the blocks (0: none)")
		fs.Uint64Var(&hc.TxPerBlock, "tx-per-block", 5, "transactions per block of the history")
		fs.Uint64Var(&hc.Addresses, "addresses", 10_000_000, "accounts of the history's address pool (besides the three routers)")
		fs.Uint64Var(&hc.Tokens, "tokens", 100, "ERC-20 contracts of the history")
		tables := fs.String("history-tables", "", "seed only these history tables (comma-separated; empty: all; none: no history table)")
		withBalances := fs.Bool("balances", false, "also seed the balance tables of the history's transfers, and the balance benchmark's holders (a holder of 1,000 tokens, one of 10,000 NFTs, the curve holders), then sum them")
		if err := process.ParseWithEnv(fs, os.Args[2:], "MORAINE"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		hc.ChainID, hc.First, hc.Chunk = sc.ChainID, sc.First, sc.Chunk
		if *tables != "" {
			hc.Tables = process.SplitList(*tables)
		}
		if hc.Txs > 0 && sc.Step != 1 {
			fmt.Fprintln(os.Stderr, "querybench seed: --txs needs --step 1")
			return 2
		}
		octx, cancel := context.WithTimeout(ctx, time.Minute)
		conn, err := chclient.Open(octx, ch, logger)
		cancel()
		if err != nil {
			logger.Error("open clickhouse", "err", err)
			return 1
		}
		defer conn.Close()
		start := time.Now()
		if sc.Blocks > 0 {
			if err := bench.Seed(ctx, conn, sc, logger); err != nil {
				logger.Error("seed", "err", err)
				return 1
			}
			fmt.Printf("seeded %d blocks of chain %d in %s\n", sc.Blocks, sc.ChainID, time.Since(start).Round(time.Millisecond))
		}
		if hc.Txs > 0 && *tables != "none" {
			start = time.Now()
			if err := bench.SeedHistory(ctx, conn, hc, logger); err != nil {
				logger.Error("seed history", "err", err)
				return 1
			}
			fmt.Printf("seeded %d transactions of chain %d in %s\n", hc.Txs, hc.ChainID, time.Since(start).Round(time.Millisecond))
		}
		if *withBalances {
			start = time.Now()
			if err := bench.SeedBalances(ctx, conn, bench.BalanceConfig{History: hc, Blocks: sc.Blocks}, logger); err != nil {
				logger.Error("seed balances", "err", err)
				return 1
			}
			fmt.Printf("seeded the balances of %d transactions of chain %d in %s\n", hc.Txs, hc.ChainID, time.Since(start).Round(time.Millisecond))
		}
	case "node":
		var nc bench.NodeConfig
		fs.StringVar(&nc.ListenAddress, "listen-address", "127.0.0.1:18545", "address of the stand-in node's JSON-RPC (HTTP)")
		fs.Uint64Var(&nc.ChainID, "chain", 43112, "EVM chain id it answers eth_chainId with")
		fs.Uint64Var(&nc.Head, "head", 0, "block number it answers eth_blockNumber with")
		if err := fs.Parse(os.Args[2:]); err != nil {
			return 2
		}
		logger.Info("stand-in node listening", "addr", nc.ListenAddress)
		if err := bench.Node(ctx, nc); err != nil {
			logger.Error("node", "err", err)
			return 1
		}
	case "load":
		var (
			lc bench.LoadConfig
			ps paths
		)
		fs.StringVar(&lc.BaseURL, "url", "http://127.0.0.1:8080", "base URL of the query service")
		fs.Var(&ps, "path", "request path, repeatable; {rand:LO:HI} is replaced by a random integer")
		fs.Float64Var(&lc.Rate, "rate", 200, "requests per second (open loop)")
		fs.DurationVar(&lc.Duration, "duration", 30*time.Second, "length of the run")
		fs.IntVar(&lc.Concurrency, "concurrency", 64, "most requests in flight")
		fs.DurationVar(&lc.Timeout, "timeout", 10*time.Second, "per-request timeout")
		fs.BoolVar(&lc.AllowRemote, "allow-remote", false, "allow a non-loopback target")
		fs.StringVar(&lc.HeadChain, "head-chain", "", "chain whose newest block {rand:LO:head} reads (asked every second; the load starts once it is known)")
		fs.DurationVar(&lc.Report, "report-every", 0, "also print the statistics of each interval of this length while running (0: only at the end)")
		var headers paths
		fs.Var(&headers, "header", `header sent with every request, "Name: value" (repeatable)`)
		if err := fs.Parse(os.Args[2:]); err != nil {
			return 2
		}
		lc.Header = http.Header{}
		for _, h := range headers {
			name, value, ok := strings.Cut(h, ":")
			if !ok {
				fmt.Fprintf(os.Stderr, "querybench load: --header %q: want \"Name: value\"\n", h)
				return 2
			}
			lc.Header.Add(strings.TrimSpace(name), strings.TrimSpace(value))
		}
		lc.Paths = ps
		lc.ReportTo = os.Stdout
		if len(lc.Paths) == 0 {
			lc.Paths = []string{"/v1/chains/43112/blocks"}
		}
		res, err := bench.Load(ctx, lc)
		if err != nil {
			logger.Error("load", "err", err)
			return 1
		}
		fmt.Print(res)
		if res.Total.Errors > 0 {
			return 1
		}
	case "seed-usage":
		var (
			ch chclient.Config
			uc bench.UsageConfig
		)
		ch.RegisterFlags(fs)
		fs.Uint64Var(&uc.Requests, "requests", 10_000_000, "requests of the log")
		fs.Uint64Var(&uc.Accounts, "accounts", 1000, "accounts that sent them")
		fs.Uint64Var(&uc.Days, "days", 30, "days they span, ending now")
		out := fs.String("keys-out", "", "file to write the keys to (lines: heavy|median|light|operator KEY)")
		if err := process.ParseWithEnv(fs, os.Args[2:], "MORAINE"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		uc.End = time.Now()
		octx, cancel := context.WithTimeout(ctx, time.Minute)
		conn, err := chclient.Open(octx, ch, logger)
		cancel()
		if err != nil {
			logger.Error("open clickhouse", "err", err)
			return 1
		}
		defer conn.Close()
		start := time.Now()
		keys, err := bench.SeedUsage(ctx, conn, uc, logger)
		if err != nil {
			logger.Error("seed usage", "err", err)
			return 1
		}
		fmt.Printf("seeded %d requests of %d accounts over %d days in %s\n", uc.Requests, uc.Accounts, uc.Days, time.Since(start).Round(time.Millisecond))
		if *out != "" {
			text := fmt.Sprintf("heavy %s\nmedian %s\nlight %s\noperator %s\n", keys.Heavy, keys.Median, keys.Light, keys.Operator)
			if err := os.WriteFile(*out, []byte(text), 0o600); err != nil {
				logger.Error("write keys", "err", err)
				return 1
			}
		}
	case "page-token":
		var (
			base, path string
			pages      int
		)
		fs.StringVar(&base, "url", "http://127.0.0.1:8080", "base URL of the query service")
		fs.StringVar(&path, "path", "", "list path (with its query parameters, without pageToken)")
		fs.IntVar(&pages, "pages", 999, "pages to follow")
		if err := fs.Parse(os.Args[2:]); err != nil {
			return 2
		}
		token, err := bench.PageToken(ctx, base, path, pages)
		if err != nil {
			logger.Error("page-token", "err", err)
			return 1
		}
		fmt.Println(token)
	}
	return 0
}
