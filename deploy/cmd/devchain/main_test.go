package main

import (
	"io"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	t.Setenv("MORAINE_BLOCK_INTERVAL", "200ms")
	t.Setenv("MORAINE_TRAFFIC_SEED", "9")
	t.Setenv("MORAINE_CHAIN_ID", "77")
	o, err := parseFlags([]string{"--chain.id", "43112", "--traffic.tx-per-block", "0", "--rpc.listen-address", "0.0.0.0:9650"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if c.BlockInterval != 200*time.Millisecond || c.Seed != 9 || c.ChainID != 43112 || c.TxPerBlock != -1 || c.ListenAddress != "0.0.0.0:9650" {
		t.Fatalf("config %+v", c)
	}
	if c.DataDir != "" {
		t.Fatalf("default data dir %q, want in memory", c.DataDir)
	}
	t.Setenv("MORAINE_DATADIR", "/var/lib/moraine/devchain")
	if o, err := parseFlags(nil, io.Discard); err != nil || o.cfg.DataDir != "/var/lib/moraine/devchain" {
		t.Fatalf("MORAINE_DATADIR: %+v %v", o, err)
	}
	if o, err := parseFlags([]string{"--datadir", "state/devchain"}, io.Discard); err != nil || o.cfg.DataDir != "state/devchain" {
		t.Fatalf("--datadir: %+v %v", o, err)
	}
	if _, err := parseFlags([]string{"--block.interval", "soon"}, io.Discard); err == nil {
		t.Fatal("bad interval accepted")
	}
}
