package bench

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// NodeConfig is the benchmark's stand-in chain node.
type NodeConfig struct {
	ListenAddress string
	// ChainID and Head are what eth_chainId and eth_blockNumber answer.
	ChainID, Head uint64
}

// Node serves the JSON-RPC calls the balance routes make of a chain's
// node, for a synthetic chain that has no node (querybench seed):
// eth_getBalance (every address holds 1e15 times its first byte, at every
// block), eth_call of name(), symbol() and decimals() (every contract is
// "Bench Token", "BNC", 18), and eth_chainId, eth_blockNumber for the
// node pool's health checks. Batches are answered as batches. It is a
// stand-in for the node a deployment has, so that the benchmark measures
// moraine's side: it answers in microseconds, where a real node adds its
// own latency to every native balance the routes read.
func Node(ctx context.Context, cfg NodeConfig) error {
	ln, err := net.Listen("tcp", cfg.ListenAddress)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: nodeHandler(cfg), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type nodeRequest struct {
	ID     json.RawMessage   `json:"id"`
	Method string            `json:"method"`
	Params []json.RawMessage `json:"params"`
}

// abiString is the ABI encoding of a string return value.
func abiString(s string) string {
	return fmt.Sprintf("0x%064x%064x%s", 32, len(s), hex.EncodeToString([]byte(s))+strings.Repeat("00", (32-len(s)%32)%32))
}

func nodeHandler(cfg NodeConfig) http.Handler {
	answer := func(r nodeRequest) map[string]any {
		out := map[string]any{"jsonrpc": "2.0", "id": r.ID}
		switch r.Method {
		case "eth_chainId":
			out["result"] = fmt.Sprintf("0x%x", cfg.ChainID)
		case "eth_blockNumber":
			out["result"] = fmt.Sprintf("0x%x", cfg.Head)
		case "eth_getBalance":
			var a string
			if len(r.Params) > 0 {
				_ = json.Unmarshal(r.Params[0], &a)
			}
			first := byte(0)
			if b, err := hex.DecodeString(strings.TrimPrefix(a, "0x")); err == nil && len(b) > 0 {
				first = b[0]
			}
			out["result"] = fmt.Sprintf("0x%x", uint64(first)*1_000_000_000_000_000)
		case "eth_call":
			var call struct{ Data, Input string }
			if len(r.Params) > 0 {
				_ = json.Unmarshal(r.Params[0], &call)
			}
			data := call.Data + call.Input
			switch {
			case strings.HasPrefix(data, "0x06fdde03"): // name()
				out["result"] = abiString("Bench Token")
			case strings.HasPrefix(data, "0x95d89b41"): // symbol()
				out["result"] = abiString("BNC")
			case strings.HasPrefix(data, "0x313ce567"): // decimals()
				out["result"] = fmt.Sprintf("0x%064x", 18)
			default:
				out["result"] = "0x"
			}
		case "eth_getCode":
			out["result"] = "0x6080"
		default:
			out["error"] = map[string]any{"code": -32601, "message": "the method " + r.Method + " does not exist"}
		}
		return out
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var raw json.RawMessage
		if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 16<<20)).Decode(&raw); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		var batch []nodeRequest
		if json.Unmarshal(raw, &batch) == nil {
			out := make([]map[string]any, len(batch))
			for i, r := range batch {
				out[i] = answer(r)
			}
			_ = json.NewEncoder(w).Encode(out)
			return
		}
		var one nodeRequest
		if err := json.Unmarshal(raw, &one); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(answer(one))
	})
}
