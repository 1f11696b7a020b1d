package tokenmeta

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/rpc"
)

// Function selectors.
const (
	selName              = "0x06fdde03"
	selSymbol            = "0x95d89b41"
	selDecimals          = "0x313ce567"
	selSupportsInterface = "0x01ffc9a7"
)

// rpcCall is one JSON-RPC call of a batch. An error answer to a Required
// call is the node's failure (eth_getCode does not fail on a healthy
// node), not the contract's answer: the batch then fails.
type rpcCall struct {
	Method   string
	Params   []any
	Required bool
}

type callArgs struct {
	To   string `json:"to"`
	Data string `json:"data"`
}

// ethCall is eth_call of data on to at the latest block.
func ethCall(to evm.Address, data string) rpcCall {
	return rpcCall{Method: "eth_call", Params: []any{callArgs{To: to.Hex(), Data: data}, "latest"}}
}

// batch sends calls as one JSON-RPC batch through the chain's pool (which
// fails over between its nodes) and returns each call's result in order; a
// call that failed (reverted, not callable) has a nil result. The error is
// the pool's failure, or an error answer to a Required call.
func batch(ctx context.Context, pool *rpc.Pool, calls []rpcCall) ([]json.RawMessage, error) {
	reqs := make([]*rpc.Request, len(calls))
	for i, c := range calls {
		reqs[i] = &rpc.Request{Method: c.Method, Params: c.Params}
	}
	// Small reads where latency matters: hedged.
	if err := pool.Batch(ctx, reqs, rpc.Hedge()); err != nil {
		return nil, fmt.Errorf("rpc chain %s: %w", pool.Chain(), err)
	}
	results := make([]json.RawMessage, len(calls))
	for i, r := range reqs {
		switch {
		case r.Err == nil:
			// Copied: the answer's memory goes back to the pool.
			results[i] = append(json.RawMessage(nil), r.Result...)
		case calls[i].Required || rpc.IsNodeFailure(r.Err) || rpc.IsUnavailable(r.Err):
			return nil, fmt.Errorf("rpc chain %s node %s: %s: %w", pool.Chain(), r.Node, calls[i].Method, r.Err)
		}
	}
	pool.Release(reqs)
	return results, nil
}

// tokenCalls are name(), symbol() and decimals().
func tokenCalls(a evm.Address) []rpcCall {
	return []rpcCall{ethCall(a, selName), ethCall(a, selSymbol), ethCall(a, selDecimals)}
}

// decodeToken reads the answers of tokenCalls: nil unless the contract
// answers as a token (tokenNames).
func decodeToken(res []json.RawMessage) *Token {
	name, symbol, isToken := tokenNames(res[0], res[1])
	if !isToken {
		return nil
	}
	tok := &Token{Name: name, Symbol: symbol}
	tok.Decimals, tok.HasDecimals = abiUint8(hexResult(res[2]))
	return tok
}

// tokenNames decodes the answers to name() and symbol() ("" when one did
// not answer). isToken is the package's one rule for "answers as a token":
// both return a string.
func tokenNames(nameRes, symbolRes json.RawMessage) (name, symbol string, isToken bool) {
	name, okN := abiString(hexResult(nameRes))
	symbol, okS := abiString(hexResult(symbolRes))
	return name, symbol, okN && okS
}

// hexResult decodes a result that is a 0x hex string (nil otherwise).
func hexResult(raw json.RawMessage) []byte {
	var s string
	if raw == nil || json.Unmarshal(raw, &s) != nil {
		return nil
	}
	return decodeHex(s)
}

func decodeHex(s string) []byte {
	s = strings.TrimPrefix(s, "0x")
	if len(s)%2 != 0 {
		return nil
	}
	b := make([]byte, len(s)/2)
	for i := range b {
		hi, ok1 := nibble(s[2*i])
		lo, ok2 := nibble(s[2*i+1])
		if !ok1 || !ok2 {
			return nil
		}
		b[i] = hi<<4 | lo
	}
	return b
}

func nibble(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// maxText bounds a name or symbol: a contract may return anything.
const maxText = 256

// abiString decodes a string return value: ABI-encoded string, or bytes32
// (MKR-style tokens), trimmed of trailing zero bytes. Invalid UTF-8 becomes
// U+FFFD and NUL characters are dropped, so the text is safe JSON.
func abiString(b []byte) (string, bool) {
	var raw []byte
	switch {
	case len(b) == 32:
		raw = bytes.TrimRight(b, "\x00")
	case len(b) >= 64:
		off, ok := word(b, 0)
		if !ok || off+32 > uint64(len(b)) {
			return "", false
		}
		n, ok := word(b, int(off))
		if !ok || n > uint64(len(b))-off-32 {
			return "", false
		}
		raw = b[off+32 : off+32+n]
	default:
		return "", false
	}
	s := strings.ToValidUTF8(strings.ReplaceAll(string(raw), "\x00", ""), "\uFFFD")
	if len(s) > maxText {
		s = s[:maxText]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s, true
}

// abiUint8 decodes a decimals() return value (uint8; any uint256 up to 255
// is accepted).
func abiUint8(b []byte) (int, bool) {
	if len(b) != 32 {
		return 0, false
	}
	v, ok := word(b, 0)
	if !ok || v > 255 {
		return 0, false
	}
	return int(v), true
}

// abiBool decodes a bool return value: exactly one word, 0 or 1.
func abiBool(b []byte) bool {
	v, ok := word(b, 0)
	return ok && len(b) == 32 && v == 1
}

// word reads the 32-byte word at pos as a uint64; false if it does not fit.
func word(b []byte, pos int) (uint64, bool) {
	if pos < 0 || pos+32 > len(b) {
		return 0, false
	}
	for _, c := range b[pos : pos+24] {
		if c != 0 {
			return 0, false
		}
	}
	return binary.BigEndian.Uint64(b[pos+24 : pos+32]), true
}
