// Package corpus builds a large replay corpus from real recordings: one
// contiguous chain of at least Config.Blocks blocks and Config.Transactions
// transactions, with their receipts, logs and call traces, for benchmarks
// that run far longer than a recording lasts (make bench-backfill).
//
// The recorded blocks (Gunzilla's 1,001 blocks with their call traces, C-Chain
// blocks 1..100, ...) are laid out in a cycle, each source spread evenly over
// it, and the cycle is repeated until both counts are reached. Every copy is
// renumbered into the chain and gets new hashes from a replay.HashScheme: the
// block's hash and parent hash (so that parent links hold: block n's parent
// is block n-1's hash), every transaction hash, and every place that repeats
// them (transactions' blockHash and blockNumber; receipts' and logs'
// blockHash, blockNumber and transactionHash; traces' txHash). Timestamps
// advance by Config.BlockInterval. Everything else is the recorded bytes:
// the mix of transaction kinds, their inputs, logs and call trees, and the
// block sizes are the real ones, repeated.
//
// What a copy does not change: the recorded from/nonce pairs, contract
// addresses and token ids repeat in every cycle, and roots (state,
// receipts, transactions, logs bloom) are the recorded ones. An indexer does
// not check them; a node would.
//
// The output is a replay.Corpus directory: independent zstd frames of
// Config.BlocksPerFrame blocks and an index, which the replay source serves
// a frame at a time instead of loading the chain into memory.
package corpus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/moraine-data/moraine/deploy/replay"
)

// Config says what to build.
type Config struct {
	// Sources are recordings (JSONL, optionally zstd) to take blocks from.
	// Every block of every source is used once per cycle.
	Sources []string
	// Out is the corpus directory.
	Out string
	// Blocks and Transactions are minimums: whole cycles' blocks are added
	// until both are reached (the last cycle may stop part way).
	Blocks       uint64
	Transactions uint64
	// ChainID is the corpus chain's EVM chain id (recorded transactions keep
	// the chain ids they were signed for).
	ChainID uint64
	// First is the first block number (at least 1: its parent is First-1).
	First uint64
	// StartTime is the first block's timestamp; each next block is
	// BlockInterval later.
	StartTime     time.Time
	BlockInterval time.Duration
	// Seed derives the hash key: the same seed and sources give the same
	// corpus, byte for byte.
	Seed string
	// BlocksPerFrame is the number of blocks per zstd frame.
	BlocksPerFrame int
	// Level is the zstd level.
	Level zstd.EncoderLevel
	// Workers compress frames in parallel (default: the number of CPUs).
	Workers int
	// Progress, when set, is called about every second while writing.
	Progress func(Stats)
}

// DefaultConfig holds the defaults of deploy/cmd/corpus.
func DefaultConfig() Config {
	return Config{
		Blocks: 200_000, Transactions: 5_000_000, ChainID: 99913, First: 1,
		StartTime: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), BlockInterval: 2 * time.Second,
		Seed: "moraine corpus 1", BlocksPerFrame: 32, Level: zstd.SpeedDefault,
	}
}

// Stats counts what was written.
type Stats struct {
	Blocks, Transactions, Logs, CallFrames uint64
	// Bytes are the JSON bytes before compression, Compressed after.
	Bytes, Compressed uint64
	Elapsed           time.Duration
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case len(c.Sources) == 0:
		return errors.New("corpus: no sources")
	case c.Out == "":
		return errors.New("corpus: no output directory")
	case c.Blocks == 0 && c.Transactions == 0:
		return errors.New("corpus: want some blocks or transactions")
	case c.First == 0:
		return errors.New("corpus: the first block must be at least 1 (its parent is first-1)")
	case c.BlockInterval < time.Second || c.BlockInterval%time.Second != 0:
		return errors.New("corpus: the block interval must be whole seconds, at least one")
	case c.BlocksPerFrame <= 0:
		return errors.New("corpus: blocks per frame must be positive")
	case c.ChainID == 0:
		return errors.New("corpus: chain id must be set")
	}
	return nil
}

// Key is the hash key derived from a seed.
func Key(seed string) []byte {
	k := sha256.Sum256([]byte("moraine corpus hash key\x00" + seed))
	return k[:16]
}

// Generate builds the corpus and returns what it holds.
func Generate(ctx context.Context, cfg Config, logger *slog.Logger) (replay.CorpusMeta, error) {
	if err := cfg.Validate(); err != nil {
		return replay.CorpusMeta{}, err
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.NumCPU()
	}
	cycle, sources, err := loadCycle(cfg.Sources)
	if err != nil {
		return replay.CorpusMeta{}, err
	}
	cycleTxs := 0
	for _, t := range cycle {
		cycleTxs += t.txs
	}
	if cycleTxs == 0 && cfg.Transactions > 0 {
		return replay.CorpusMeta{}, errors.New("corpus: the sources hold no transactions")
	}
	logger.Info("corpus: sources read", "blocks_per_cycle", len(cycle), "txs_per_cycle", cycleTxs)
	scheme, err := replay.NewHashScheme(Key(cfg.Seed))
	if err != nil {
		return replay.CorpusMeta{}, err
	}
	w, err := replay.CreateCorpus(cfg.Out, cfg.Level)
	if err != nil {
		return replay.CorpusMeta{}, err
	}
	closed := false
	defer func() {
		if !closed {
			w.Abort()
		}
	}()
	// The plan: block i of the corpus is cycle[i % len(cycle)]; count until
	// both minimums are reached.
	var total uint64
	{
		var txs uint64
		for total < cfg.Blocks || txs < cfg.Transactions {
			txs += uint64(cycle[total%uint64(len(cycle))].txs)
			total++
		}
	}
	frames := int((total + uint64(cfg.BlocksPerFrame) - 1) / uint64(cfg.BlocksPerFrame))
	start := time.Now()
	interval := uint64(cfg.BlockInterval / time.Second)
	t0 := uint64(cfg.StartTime.Unix())

	type result struct {
		k          int
		comp       []byte
		blocks     int
		raw        uint64
		txs, logs  uint64
		callFrames uint64
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	results := make(chan result, cfg.Workers)
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			var lines []byte
			for k := range jobs {
				r := result{k: k}
				lines = lines[:0]
				for i := uint64(k) * uint64(cfg.BlocksPerFrame); i < total && r.blocks < cfg.BlocksPerFrame; i++ {
					t := cycle[i%uint64(len(cycle))]
					n := cfg.First + i
					lines = t.render(lines, scheme, n, t0+i*interval)
					lines = append(lines, '\n')
					r.blocks++
					r.txs += uint64(t.txs)
					r.logs += uint64(t.logs)
					r.callFrames += uint64(t.frames)
				}
				r.raw = uint64(len(lines))
				r.comp = w.CompressFrame(lines, nil)
				select {
				case results <- r:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	go func() {
		defer close(jobs)
		for k := range frames {
			select {
			case jobs <- k:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	var st Stats
	pending := map[int]result{}
	next := 0
	lastProgress := time.Now()
	for r := range results {
		pending[r.k] = r
		for {
			r, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			if err := w.AppendFrame(r.comp, r.blocks); err != nil {
				cancel()
				return replay.CorpusMeta{}, err
			}
			st.Blocks += uint64(r.blocks)
			st.Transactions += r.txs
			st.Logs += r.logs
			st.CallFrames += r.callFrames
			st.Bytes += r.raw
			st.Compressed = w.Bytes()
			next++
		}
		if cfg.Progress != nil && time.Since(lastProgress) > time.Second {
			lastProgress = time.Now()
			st.Elapsed = time.Since(start)
			cfg.Progress(st)
		}
	}
	if err := ctx.Err(); err != nil {
		return replay.CorpusMeta{}, err
	}
	if next != frames {
		return replay.CorpusMeta{}, fmt.Errorf("corpus: %d of %d frames written", next, frames)
	}
	meta := replay.CorpusMeta{
		ChainID: cfg.ChainID, First: cfg.First, Last: cfg.First + total - 1,
		Blocks: st.Blocks, Transactions: st.Transactions, Logs: st.Logs, CallFrames: st.CallFrames,
		BlocksPerFrame: cfg.BlocksPerFrame, HashKey: hex.EncodeToString(Key(cfg.Seed)),
		Generator: fmt.Sprintf("deploy/cmd/corpus: seed %q, first block at %s, a block every %s, zstd %s",
			cfg.Seed, cfg.StartTime.UTC().Format(time.RFC3339), cfg.BlockInterval, cfg.Level),
		Sources: sources,
	}
	closed = true
	if err := w.Close(meta); err != nil {
		return replay.CorpusMeta{}, err
	}
	st.Elapsed = time.Since(start)
	if cfg.Progress != nil {
		cfg.Progress(st)
	}
	return meta, nil
}

// loadCycle reads the sources into templates and lays them out in one cycle
// with each source's blocks spread evenly: the j-th of a source's c blocks
// sits at (j+0.5)/c of the cycle.
func loadCycle(paths []string) ([]*template, []replay.CorpusSource, error) {
	type placed struct {
		at  float64
		src int
		t   *template
	}
	var all []placed
	var sources []replay.CorpusSource
	for si, p := range paths {
		ts, err := readTemplates(p)
		if err != nil {
			return nil, nil, fmt.Errorf("corpus: %s: %w", p, err)
		}
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].number < ts[j].number })
		src := replay.CorpusSource{File: filepath.Base(p), Blocks: len(ts)}
		for j, t := range ts {
			src.Transactions += t.txs
			all = append(all, placed{at: (float64(j) + 0.5) / float64(len(ts)), src: si, t: t})
		}
		sources = append(sources, src)
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].at != all[j].at {
			return all[i].at < all[j].at
		}
		return all[i].src < all[j].src
	})
	cycle := make([]*template, len(all))
	for i, p := range all {
		cycle[i] = p.t
	}
	if len(cycle) == 0 {
		return nil, nil, errors.New("corpus: the sources hold no blocks")
	}
	return cycle, sources, nil
}

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// readTemplates reads a recording (zstd-compressed or not) into templates.
func readTemplates(path string) ([]*template, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, 4)
	if _, err := io.ReadFull(f, head); err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	var r io.Reader = f
	if bytes.Equal(head, zstdMagic) {
		dec, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer dec.Close()
		r = dec
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var out []*template
	name := filepath.Base(path)
	for lineNo := 1; len(data) > 0; lineNo++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		t, err := parseTemplate(name, line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		out = append(out, t)
	}
	return out, nil
}
