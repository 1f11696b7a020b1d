package sink

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestIndexProgress: the "indexed" line comes once per interval, per chain,
// with the rate over the interval and the age of the highest block.
func TestIndexProgress(t *testing.T) {
	var out bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&out, nil))
	t0 := time.Unix(1_700_000_000, 0)
	batch := func(blocks, txs int, last map[uint64]lastBlock) *written {
		return &written{batch: &Batch{Blocks: blocks, Txs: txs}, last: last}
	}
	var p indexProgress
	p.add(batch(100, 1000, map[uint64]lastBlock{43114: {number: 100, timestamp: uint64(t0.Unix()) - 60}}), t0, logger)
	p.add(batch(200, 2000, map[uint64]lastBlock{43114: {number: 300, timestamp: uint64(t0.Unix()) - 10}}), t0.Add(10*time.Second), logger)
	if out.Len() != 0 {
		t.Fatalf("logged before the interval: %s", out.String())
	}
	p.add(batch(300, 3000, map[uint64]lastBlock{7: {number: 5, timestamp: uint64(t0.Unix())}}), t0.Add(30*time.Second), logger)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a line per chain, got:\n%s", out.String())
	}
	for _, want := range []string{"chain_id=43114 block=300 lag=40s blocks_per_s=20 txs_per_s=200", "chain_id=7 block=5 lag=30s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	out.Reset()
	p.add(batch(1, 1, map[uint64]lastBlock{7: {number: 6}}), t0.Add(40*time.Second), logger)
	if out.Len() != 0 {
		t.Fatalf("logged again within the interval: %s", out.String())
	}
}
