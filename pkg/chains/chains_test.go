package chains

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadDevChains(t *testing.T) {
	c, err := Load("../../deploy/chains/dev.json")
	if err != nil {
		t.Fatal(err)
	}
	ch, ok := c.Find("43112")
	if !ok || ch.ID() != 43112 || !ch.Traces || !ch.Webhooks {
		t.Fatalf("dev chain not configured as expected: %+v", ch)
	}
	if _, ok := c.Find(ch.BlockchainID); !ok {
		t.Fatal("lookup by blockchain id failed")
	}
}

func TestParseRejects(t *testing.T) {
	good := `{"evmChainId":"43114","name":"C","network":"mainnet","rpcUrls":["https://x/rpc"],"networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18}`
	for _, tc := range []struct {
		name, in, want string
	}{
		{"unknown field", `{"chains":[` + good + `,"trace":true}]}`, "unknown field"},
		{"bad id", `{"chains":[` + strings.Replace(good, `"43114"`, `"0x1"`, 1) + `}]}`, "evmChainId"},
		{"bad network", `{"chains":[` + strings.Replace(good, "mainnet", "moon", 1) + `}]}`, "network"},
		{"bad url", `{"chains":[` + strings.Replace(good, "https://x/rpc", "ftp://x", 1) + `}]}`, "URL"},
		{"duplicate", `{"chains":[` + good + `},` + good + `}]}`, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
	if _, err := Parse([]byte(`{"chains":[` + good + `}]}`)); err != nil {
		t.Fatalf("good config rejected: %v", err)
	}
}

// TestShippedChainFilesAreValid loads every chain file in deploy/chains.
func TestShippedChainFilesAreValid(t *testing.T) {
	files, _ := filepath.Glob("../../deploy/chains/*.json")
	if len(files) < 3 {
		t.Fatalf("found %d chain files", len(files))
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
