package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Error is a JSON-RPC error answer.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("rpc error %d: %s", e.Code, e.Message) }

// rateLimited reports whether a JSON-RPC error means "slow down": providers
// use -32005 (limit exceeded), 429, or only say so in the message.
func (e *Error) rateLimited() bool {
	if e.Code == -32005 || e.Code == 429 {
		return true
	}
	m := strings.ToLower(e.Message)
	return strings.Contains(m, "rate limit") || strings.Contains(m, "too many requests")
}

// unavailableMessages are how nodes say they cannot answer for the block
// asked, although they work: go-ethereum and its forks (coreth, subnet-evm),
// Erigon, Nethermind, Besu and the hosted providers in front of them. Each
// is matched lower-cased, anywhere in the message.
var unavailableMessages = []string{
	"missing trie node",                     // geth: state pruned
	"header not found",                      // geth: block unknown (ahead of the node, or pruned)
	"unknown block",                         // geth, erigon
	"required historical state unavailable", // geth (path scheme)
	"historical state",                      // "historical state ... is not available" (geth), "...not available" (erigon)
	"state is not available",                // coreth, subnet-evm
	"state not available",
	"pruned", // "block ... pruned", "state ... has been pruned"
	"missing state",
	"no state available",
	"block not found",
	"state histories",            // geth path scheme: "state histories haven't been fully indexed"
	"is not currently canonical", // block given by hash on another fork (EIP-1898)
}

// IsUnavailable reports whether err is a node's answer that it cannot serve
// the block asked: its state was pruned (missing trie node), or it does not
// have that block (header not found). The node itself works: another node
// (an archive node, or one further ahead) may answer. A Pool asks the
// chain's other nodes before returning such an error. It is false for a
// failed node (IsNodeFailure) and for a contract's own answer (IsReverted).
func IsUnavailable(err error) bool {
	var re *Error
	if !errors.As(err, &re) || re.rateLimited() {
		return false
	}
	m := strings.ToLower(re.Message)
	for _, s := range unavailableMessages {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// IsReverted reports whether err is an eth_call's execution reverting (or
// otherwise failing in the EVM): the contract's answer, the same from every
// node.
func IsReverted(err error) bool {
	var re *Error
	if !errors.As(err, &re) {
		return false
	}
	m := strings.ToLower(re.Message)
	return re.Code == 3 || strings.Contains(m, "revert") || strings.Contains(m, "invalid opcode") ||
		strings.Contains(m, "out of gas") || strings.Contains(m, "execution aborted")
}

// IsNodeFailure reports whether err is the node failing rather than
// answering: transport errors, timeouts, HTTP errors, rate limiting,
// answers that are not JSON-RPC, or a pool with no node left to ask
// (ErrNoNode).
func IsNodeFailure(err error) bool {
	if err == nil {
		return false
	}
	var re *Error
	if errors.As(err, &re) {
		return re.rateLimited()
	}
	return true
}

// ErrNoNode is the pool having no node to send a call to: every node is
// down, or none has reached the block asked (AtBlock).
var ErrNoNode = errors.New("no node available")

// retryAfterError carries a server's Retry-After.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter makes obs.Retry wait what the server asked.
func (e *retryAfterError) RetryAfter() time.Duration { return e.after }

// statusError is an HTTP answer that is not 200.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string { return fmt.Sprintf("http %d: %s", e.code, e.body) }

var (
	// errBadResponse is an answer that is not a JSON-RPC response.
	errBadResponse = errors.New("bad JSON-RPC response")
	// errTimeout is one HTTP request running past Config.Timeout.
	errTimeout = errors.New("rpc request timed out")
)

func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var se *statusError
	if errors.As(err, &se) {
		return se.code >= 500 || se.code == http.StatusTooManyRequests || se.code == http.StatusRequestTimeout
	}
	// Transport errors, timeouts and truncated answers are transient; a
	// well-formed answer that is not JSON-RPC will not improve.
	return !errors.Is(err, errBadResponse)
}

func resultLabel(callErr, batchErr error) string {
	err := batchErr
	if err == nil {
		err = callErr
	}
	if err == nil {
		return "ok"
	}
	var re *Error
	var se *statusError
	switch {
	case errors.As(err, &re):
		if re.rateLimited() {
			return "rate_limited"
		}
		return "rpc_error"
	case errors.As(err, &se):
		if se.code == http.StatusTooManyRequests {
			return "rate_limited"
		}
		return "http_error"
	case errors.Is(err, errBadResponse):
		return "bad_response"
	case errors.Is(err, errTimeout) || errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "transport_error"
}

// Redact returns the scheme and host of a node URL: providers put API keys
// in the path, query or user info, which must not reach logs. It is the one
// redaction rule of the codebase.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable URL)"
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil {
		return u.Scheme + "://" + u.Host + "/..."
	}
	return u.Scheme + "://" + u.Host
}
