package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"testing"
	"time"
)

// TestDevchainLive runs the development chain (the source `make run` uses)
// through the pipeline and checks that the API serves every mined block
// within seconds, matching the node's own answers, and measures how long a
// block takes from the node to the API.
func TestDevchainLive(t *testing.T) {
	rpcAddr := freeAddr(t)
	start(t, "devchain", "--rpc.listen-address", rpcAddr, "--block.interval", "250ms", "--traffic.tx-per-block", "8")
	rpcURL := "http://" + rpcAddr
	eventually(t, 60*time.Second, "devchain RPC", func() bool {
		_, err := rpcCall(rpcURL, "eth_blockNumber")
		return err == nil
	})
	s := startServices(t, fmt.Sprintf(`{"evmChainId":"43112","name":"Development chain","network":"devnet",
		"rpcUrls":["%s"],"wsUrl":"ws://%s","networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},
		"traces":true,"webhooks":true,"startBlock":0}`, rpcURL, rpcAddr), pipelineOpts{})

	// Watch the head for a while and time each new block from the moment
	// the node reports it to the moment the API serves it.
	var lags []time.Duration
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		raw, err := rpcCall(rpcURL, "eth_blockNumber")
		if err != nil {
			t.Fatal(err)
		}
		var hexNum string
		_ = json.Unmarshal(raw, &hexNum)
		n := hexToDec(hexNum)
		seen := time.Now()
		eventually(t, 10*time.Second, "block "+n+" in the API", func() bool {
			return getJSON(t, fmt.Sprintf("%s/v1/chains/43112/blocks/%s", s.api, n), nil) == http.StatusOK
		})
		lags = append(lags, time.Since(seen))
		time.Sleep(100 * time.Millisecond)
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	t.Logf("node head -> API: %d samples, p50 %s, max %s", len(lags), lags[len(lags)/2], lags[len(lags)-1])
	if lags[len(lags)/2] > 3*time.Second {
		t.Errorf("median node->API delay %s: blocks must be served within seconds", lags[len(lags)/2])
	}

	// Every block the API lists matches the node's own answer.
	var page struct {
		Blocks []map[string]any `json:"blocks"`
	}
	if code := getJSON(t, s.api+"/v1/chains/43112/blocks?pageSize=100", &page); code != http.StatusOK {
		t.Fatalf("list: %d", code)
	}
	if len(page.Blocks) < 10 {
		t.Fatalf("only %d blocks listed", len(page.Blocks))
	}
	for _, b := range page.Blocks {
		num, _ := strconv.ParseUint(fmt.Sprint(b["blockNumber"]), 10, 64)
		raw, err := rpcCall(rpcURL, "eth_getBlockByNumber", fmt.Sprintf("0x%x", num), true)
		if err != nil {
			t.Fatal(err)
		}
		var nb map[string]any
		if err := json.Unmarshal(raw, &nb); err != nil {
			t.Fatal(err)
		}
		txs, _ := nb["transactions"].([]any)
		for field, want := range map[string]string{
			"blockHash":      str(nb["hash"]),
			"parentHash":     str(nb["parentHash"]),
			"blockTimestamp": hexToDec(str(nb["timestamp"])),
			"gasUsed":        hexToDec(str(nb["gasUsed"])),
			"gasLimit":       hexToDec(str(nb["gasLimit"])),
			"baseFee":        orZero(hexToDec(str(nb["baseFeePerGas"]))),
			"txCount":        strconv.Itoa(len(txs)),
		} {
			if got := fmt.Sprint(b[field]); got != want {
				t.Errorf("block %d %s: API %q, node %q", num, field, got, want)
			}
		}
	}
}
