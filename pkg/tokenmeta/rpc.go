package tokenmeta

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/moraine-data/moraine/pkg/evm"
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

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int    `json:"id"`
	Method  string `json:"method"`
	Params  []any  `json:"params"`
}

type rpcResponse struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

type callArgs struct {
	To   string `json:"to"`
	Data string `json:"data"`
}

// ethCall is eth_call of data on to at the latest block.
func ethCall(to evm.Address, data string) rpcCall {
	return rpcCall{Method: "eth_call", Params: []any{callArgs{To: to.Hex(), Data: data}, "latest"}}
}

// rpcError is a JSON-RPC error answer.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// batch sends calls as one JSON-RPC batch to the first URL that answers and
// returns each call's result in order; a call that failed (reverted, not
// callable) has a nil result. The error is a failure of every URL: transport,
// or an error answer to a Required call.
func (r *Resolver) batch(ctx context.Context, urls []string, calls []rpcCall) ([]json.RawMessage, error) {
	results, _, err := r.batchWithErrors(ctx, urls, calls)
	return results, err
}

// batchWithErrors is batch that also returns the error answer of each call
// that failed (nil for the others).
func (r *Resolver) batchWithErrors(ctx context.Context, urls []string, calls []rpcCall) ([]json.RawMessage, []*rpcError, error) {
	reqs := make([]rpcRequest, len(calls))
	for i, c := range calls {
		reqs[i] = rpcRequest{JSONRPC: "2.0", ID: i, Method: c.Method, Params: c.Params}
	}
	body, err := json.Marshal(reqs)
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	for _, u := range urls {
		resps, err := r.post(ctx, u, body)
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		results, callErrs, err := batchResults(u, calls, resps)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		return results, callErrs, nil
	}
	return nil, nil, errors.Join(errs...)
}

// batchResults orders the responses of one URL by call.
func batchResults(url string, calls []rpcCall, resps []rpcResponse) ([]json.RawMessage, []*rpcError, error) {
	results := make([]json.RawMessage, len(calls))
	callErrs := make([]*rpcError, len(calls))
	answered := make([]bool, len(calls))
	for _, resp := range resps {
		if resp.ID < 0 || resp.ID >= len(calls) {
			continue
		}
		answered[resp.ID] = true
		switch {
		case resp.Error == nil:
			results[resp.ID] = resp.Result
		case calls[resp.ID].Required:
			return nil, nil, fmt.Errorf("rpc %s: %s: error %d: %s", redact(url), calls[resp.ID].Method, resp.Error.Code, resp.Error.Message)
		default:
			callErrs[resp.ID] = resp.Error
		}
	}
	for i, ok := range answered {
		if !ok {
			return nil, nil, fmt.Errorf("rpc %s: batch response lacks id %d", redact(url), i)
		}
	}
	return results, callErrs, nil
}

func (r *Resolver) post(ctx context.Context, url string, body []byte) ([]rpcResponse, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("rpc %s: %w", redact(url), err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("rpc %s: %w", redact(url), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("rpc %s: HTTP %d", redact(url), resp.StatusCode)
	}
	var out []rpcResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("rpc %s: decode batch response: %w", redact(url), err)
	}
	return out, nil
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

// redact keeps scheme and host of an RPC URL: paths often carry API keys.
func redact(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.IndexByte(u[i+3:], '/'); j >= 0 {
			return u[:i+3+j] + "/…"
		}
	}
	return u
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
