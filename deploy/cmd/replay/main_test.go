package main

import (
	"io"
	"testing"
)

func TestParseFlags(t *testing.T) {
	t.Setenv("MORAINE_REPLAY_FILE", "/data/blocks.jsonl.zst")
	t.Setenv("MORAINE_REPLAY_MODE", "live")
	t.Setenv("MORAINE_REPLAY_RATE", "5")
	o, err := parseFlags([]string{"--replay.rate", "0.5", "--chain.id", "43419"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if c.File != "/data/blocks.jsonl.zst" || c.Mode != "live" || c.Rate != 0.5 || c.ChainID != 43419 || c.ListenAddress != "127.0.0.1:8545" {
		t.Fatalf("config %+v", c)
	}
	t.Setenv("MORAINE_REPLAY_MODE", "sideways")
	if _, err := parseFlags(nil, io.Discard); err == nil {
		t.Fatal("bad mode accepted")
	}
}
