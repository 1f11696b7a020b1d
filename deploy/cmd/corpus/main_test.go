package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--out", "x", "--shared-data", "/data"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.cfg.Blocks != 200_000 || o.cfg.Transactions != 5_000_000 || o.cfg.ChainID != 99913 || o.cfg.Level != zstd.SpeedDefault {
		t.Errorf("defaults: %+v", o.cfg)
	}
	if len(o.cfg.Sources) != 2 || o.cfg.Sources[0] != filepath.Join("/data", defaultSources[0]) {
		t.Errorf("default sources %v", o.cfg.Sources)
	}
	o, err = parseFlags([]string{"--out", "x", "--source", "a.jsonl", "--source", "b.jsonl", "--start-time", "2024-02-03T04:05:06Z",
		"--block-interval", "1s", "--zstd-level", "fastest"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.cfg.Sources, ",") != "a.jsonl,b.jsonl" || !o.cfg.StartTime.Equal(time.Date(2024, 2, 3, 4, 5, 6, 0, time.UTC)) ||
		o.cfg.BlockInterval != time.Second || o.cfg.Level != zstd.SpeedFastest {
		t.Errorf("flags: %+v", o.cfg)
	}
	for _, bad := range [][]string{
		{},                                  // no --out
		{"--out", "x", "--zstd-level", "9"}, // not a level name
		{"--out", "x", "--block-interval", "1500ms"},
		{"--out", "x", "--first-block", "0"},
		{"--out", "x", "--start-time", "yesterday"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
