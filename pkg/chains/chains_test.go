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

// TestNodesAsURLsOrObjects: rpcUrls entries are bare URLs or objects with
// limits; names default to the position; RPCURLs mirrors the URLs.
func TestNodesAsURLsOrObjects(t *testing.T) {
	c, err := Parse([]byte(`{"chains":[{"evmChainId":"43114","name":"C","network":"mainnet","networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},
	  "rpcUrls":["http://a:9650/rpc", {"url":"https://hosted/key","name":"hosted","requestsPerSecond":25,"maxConcurrency":4,"maxBatch":30}],
	  "skipChecks":["transactionsRoot"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ch := c.Chains[0]
	nodes := ch.RPCNodes()
	if len(nodes) != 2 || nodes[0].Name != "0" || nodes[0].URL != "http://a:9650/rpc" ||
		nodes[1] != (Node{URL: "https://hosted/key", Name: "hosted", RequestsPerSecond: 25, MaxConcurrency: 4, MaxBatch: 30}) {
		t.Fatalf("nodes = %+v", nodes)
	}
	if len(ch.RPCURLs) != 2 || ch.RPCURLs[1] != "https://hosted/key" {
		t.Fatalf("RPCURLs = %v", ch.RPCURLs)
	}
	if ch.Checked(CheckTransactionsRoot) || !ch.Checked(CheckReceiptsRoot) {
		t.Fatal("skipChecks not applied")
	}
	// A Chain built in code with RPCURLs only.
	if n := (Chain{RPCURLs: []string{"http://x"}}).RPCNodes(); len(n) != 1 || n[0].Name != "0" {
		t.Fatalf("%+v", n)
	}
	for _, bad := range []string{
		`{"url":"http://a","maxBatch":-1}`,
		`{"url":"http://a","name":"has space"}`,
		`{"url":"http://a","limit":3}`,
	} {
		in := `{"chains":[{"evmChainId":"1","name":"E","network":"mainnet","networkToken":{"name":"E","symbol":"E","decimals":18},"rpcUrls":[` + bad + `]}]}`
		if _, err := Parse([]byte(in)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	in := `{"chains":[{"evmChainId":"1","name":"E","network":"mainnet","networkToken":{"name":"E","symbol":"E","decimals":18},"rpcUrls":["http://a"],"skipChecks":["stateRoot"]}]}`
	if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), "stateRoot") {
		t.Errorf("unknown check: %v", err)
	}
}
