// Command corpus builds a large replay corpus from real recordings (package
// deploy/corpus): one contiguous chain of at least --blocks blocks and
// --transactions transactions with receipts, logs and call traces, renumbered
// and re-hashed consistently, written to --out as zstd frames with an index
// that the replay source serves from disk (bin/replay --replay.file DIR).
//
//	corpus --out .moraine/corpus                      # the benchmark corpus: 200,000+ blocks, 5,000,000+ txs
//	corpus --out bench/tmp/corpus-small --blocks 20000 --transactions 0
//
// The sources default to the recordings with call traces in ../shared/data
// (Gunzilla 14M, C-Chain 1..100); --source replaces them (repeatable). The
// same flags give the same corpus, byte for byte. Every flag can also be set
// through the environment: MORAINE_ + the flag name in upper case with '.'
// and '-' turned into '_'.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/moraine-data/moraine/deploy/corpus"
	"github.com/moraine-data/moraine/deploy/internal/toolmain"
	"github.com/moraine-data/moraine/pkg/obs"
)

// defaultSources are the recordings that carry receipts and call traces for
// every block; the other recorded blocks in ../shared/data lack receipts or
// traces and cannot be served as blocks of a traced chain.
var defaultSources = []string{
	"avalanche/gunzilla_14M/GUNZILLA_BLOCKS.jsonl.zst",
	"avalanche/cchain_1_100/blocks_1_100.jsonl.zst",
}

type sources []string

func (s *sources) String() string     { return strings.Join(*s, ",") }
func (s *sources) Set(v string) error { *s = append(*s, v); return nil }

type options struct {
	cfg        corpus.Config
	sharedData string
	level      string
	start      string
	log        obs.LogConfig
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{cfg: corpus.DefaultConfig()}
	fs := toolmain.Flags("corpus", stderr)
	var src sources
	fs.StringVar(&o.cfg.Out, "out", "", "corpus directory to write (required)")
	fs.Var(&src, "source", "recording to take blocks from, JSONL optionally zstd (repeatable; default: the traced recordings of --shared-data)")
	fs.StringVar(&o.sharedData, "shared-data", "../shared/data", "directory of the shared recordings (for the default sources)")
	fs.Uint64Var(&o.cfg.Blocks, "blocks", o.cfg.Blocks, "at least this many blocks")
	fs.Uint64Var(&o.cfg.Transactions, "transactions", o.cfg.Transactions, "at least this many transactions")
	fs.Uint64Var(&o.cfg.ChainID, "chain.id", o.cfg.ChainID, "EVM chain id of the corpus chain")
	fs.Uint64Var(&o.cfg.First, "first-block", o.cfg.First, "number of the first block (at least 1)")
	fs.StringVar(&o.start, "start-time", o.cfg.StartTime.Format(time.RFC3339), "timestamp of the first block (RFC 3339)")
	fs.DurationVar(&o.cfg.BlockInterval, "block-interval", o.cfg.BlockInterval, "time between blocks (whole seconds)")
	fs.StringVar(&o.cfg.Seed, "seed", o.cfg.Seed, "seed of the hash key: same seed, same hashes")
	fs.IntVar(&o.cfg.BlocksPerFrame, "blocks-per-frame", o.cfg.BlocksPerFrame, "blocks per zstd frame (the replay source reads and caches whole frames)")
	fs.StringVar(&o.level, "zstd-level", "default", "zstd level: fastest, default, better or best")
	if err := toolmain.Parse(fs, args, &o.log); err != nil {
		return nil, err
	}
	if o.cfg.Out == "" {
		return nil, errors.New("--out is required")
	}
	ok, level := zstd.EncoderLevelFromString(o.level)
	if !ok {
		return nil, fmt.Errorf("--zstd-level %q: want fastest, default, better or best", o.level)
	}
	o.cfg.Level = level
	t, err := time.Parse(time.RFC3339, o.start)
	if err != nil {
		return nil, fmt.Errorf("--start-time: %w", err)
	}
	o.cfg.StartTime = t
	o.cfg.Sources = src
	if len(src) == 0 {
		for _, s := range defaultSources {
			o.cfg.Sources = append(o.cfg.Sources, filepath.Join(o.sharedData, s))
		}
	}
	return o, o.cfg.Validate()
}

func main() { toolmain.Exit("corpus", run) }

func run(args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop, logger, err := toolmain.Start("corpus", o.log, stderr)
	if err != nil {
		return err
	}
	defer stop()
	last := time.Time{}
	o.cfg.Progress = func(st corpus.Stats) {
		if time.Since(last) < 10*time.Second {
			return
		}
		last = time.Now()
		logger.Info("corpus: writing", "blocks", st.Blocks, "txs", st.Transactions,
			"json_mb", st.Bytes>>20, "compressed_mb", st.Compressed>>20, "elapsed", st.Elapsed.Round(time.Second))
	}
	start := time.Now()
	meta, err := corpus.Generate(ctx, o.cfg, logger)
	if err != nil {
		return err
	}
	st, _ := os.Stat(filepath.Join(o.cfg.Out, "blocks.jsonl.zst"))
	var size int64
	if st != nil {
		size = st.Size()
	}
	fmt.Printf("corpus %s: blocks %d..%d (%d), %d transactions, %d logs, %d call frames, chain %d; %.1f MB compressed, written in %s\n",
		o.cfg.Out, meta.First, meta.Last, meta.Blocks, meta.Transactions, meta.Logs, meta.CallFrames, meta.ChainID,
		float64(size)/1e6, time.Since(start).Round(time.Second))
	return nil
}
