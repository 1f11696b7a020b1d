package flagenv

import (
	"flag"
	"io"
	"testing"
	"time"
)

func TestEnvName(t *testing.T) {
	if got := EnvName(Prefix, "rpc.listen-address"); got != "MORAINE_RPC_LISTEN_ADDRESS" {
		t.Fatalf("got %q", got)
	}
}

func TestApplyPrefersCommandLine(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("rpc.listen-address", "127.0.0.1:8545", "")
	iv := fs.Duration("block.interval", time.Second, "")
	n := fs.Int("traffic.tx-per-block", 16, "")
	env := map[string]string{
		"MORAINE_RPC_LISTEN_ADDRESS":   "0.0.0.0:9000",
		"MORAINE_BLOCK_INTERVAL":       "250ms",
		"MORAINE_TRAFFIC_TX_PER_BLOCK": "99",
	}
	if err := fs.Parse([]string{"--traffic.tx-per-block", "7"}); err != nil {
		t.Fatal(err)
	}
	if err := apply(fs, Prefix, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if *addr != "0.0.0.0:9000" || *iv != 250*time.Millisecond || *n != 7 {
		t.Fatalf("got %q %v %d", *addr, *iv, *n)
	}
	env["MORAINE_BLOCK_INTERVAL"] = "soon"
	fs2 := flag.NewFlagSet("y", flag.ContinueOnError)
	fs2.Duration("block.interval", time.Second, "")
	_ = fs2.Parse(nil)
	if err := apply(fs2, Prefix, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err == nil {
		t.Fatal("bad duration accepted")
	}
}
