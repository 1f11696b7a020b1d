// Package tokenmeta reads token metadata (name, symbol, decimals) with
// eth_call and caches it per (chain, token), for the erc20Token /
// erc721Token / erc1155Token objects of webhook payloads.
//
// What stays with the caller: which tokens to resolve (the transfers of
// matched transactions) and what to do without an answer (the payload omits
// the token object).
//
// Calls go to the chain's rpcUrls (chains file), in order, as JSON-RPC
// batches of name(), symbol() and decimals() at the latest block, several
// tokens per HTTP request. A token "answers" when name() and symbol() return
// a string (ABI string, or bytes32 as old tokens do); decimals() is separate
// (NFTs have none). A definitive answer, including "does not answer"
// (revert, empty result), is cached until evicted (LRU, --matcher.token-cache-size);
// a transport failure (node down, timeout) is cached for FailureTTL only,
// so a dead node costs one timeout per token per TTL rather than one per
// payload.
//
// Metrics:
//
//	moraine_processor_token_metadata_lookups_total{result}   hit, ok, no_answer, error
package tokenmeta

import (
	"bytes"
	"container/list"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/moraine-data/moraine/processor/internal/evm"
)

// Token is what a token contract answered. Name and Symbol are always set
// (a token without them does not answer); Decimals only when HasDecimals.
type Token struct {
	Name        string
	Symbol      string
	Decimals    int
	HasDecimals bool
}

// Config bounds the resolver.
type Config struct {
	// CacheSize is the number of (chain, token) entries kept.
	CacheSize int
	// CallTimeout bounds one Resolve call (all its HTTP requests).
	CallTimeout time.Duration
	// FailureTTL is how long a transport failure is remembered.
	FailureTTL time.Duration
	// BatchTokens is the number of tokens per JSON-RPC batch request (three
	// calls each).
	BatchTokens int
	// Parallel is the number of concurrent HTTP requests per Resolve.
	Parallel int
}

// DefaultConfig is the configuration the flags default to.
func DefaultConfig() Config {
	return Config{CacheSize: 100_000, CallTimeout: 2 * time.Second, FailureTTL: 30 * time.Second, BatchTokens: 50, Parallel: 4}
}

// Deps are the resolver's dependencies; all optional.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	HTTP       *http.Client
	Now        func() time.Time
}

// Resolver resolves and caches token metadata. It is safe for concurrent use.
type Resolver struct {
	cfg    Config
	rpc    map[uint64][]string
	http   *http.Client
	now    func() time.Time
	logger *slog.Logger
	lookup *prometheus.CounterVec

	mu    sync.Mutex
	lru   *list.List // of *entry, most recent first
	index map[key]*list.Element
}

type key struct {
	chain uint64
	addr  evm.Address
}

type entry struct {
	key     key
	tok     *Token // nil: does not answer
	expires time.Time
}

// New returns a resolver calling the given RPC URLs per chain id.
func New(cfg Config, rpcURLs map[uint64][]string, deps Deps) *Resolver {
	def := DefaultConfig()
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = def.CacheSize
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = def.CallTimeout
	}
	if cfg.FailureTTL <= 0 {
		cfg.FailureTTL = def.FailureTTL
	}
	if cfg.BatchTokens <= 0 {
		cfg.BatchTokens = def.BatchTokens
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = def.Parallel
	}
	r := &Resolver{cfg: cfg, rpc: rpcURLs, http: deps.HTTP, now: deps.Now, logger: deps.Logger,
		lru: list.New(), index: map[key]*list.Element{}}
	if r.http == nil {
		r.http = &http.Client{}
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	r.logger = r.logger.With("component", "tokenmeta")
	r.lookup = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "moraine", Subsystem: "processor",
		Name: "token_metadata_lookups_total", Help: "Token metadata lookups by result: hit (cache), ok, no_answer, error (transport)."},
		[]string{"result"})
	for _, l := range []string{"hit", "ok", "no_answer", "error"} {
		r.lookup.WithLabelValues(l)
	}
	if deps.Registerer != nil {
		deps.Registerer.MustRegister(r.lookup)
	}
	return r
}

// Resolve returns the metadata of tokens on chain: a token maps to nil when
// it does not answer, or when its node could not be asked in time.
func (r *Resolver) Resolve(ctx context.Context, chain uint64, tokens []evm.Address) map[evm.Address]*Token {
	out := make(map[evm.Address]*Token, len(tokens))
	var missing []evm.Address
	now := r.now()
	r.mu.Lock()
	for _, a := range tokens {
		if _, done := out[a]; done {
			continue
		}
		if el, ok := r.index[key{chain, a}]; ok {
			e := el.Value.(*entry)
			if e.expires.IsZero() || now.Before(e.expires) {
				r.lru.MoveToFront(el)
				out[a] = e.tok
				r.lookup.WithLabelValues("hit").Inc()
				continue
			}
		}
		out[a] = nil
		missing = append(missing, a)
	}
	r.mu.Unlock()
	if len(missing) == 0 {
		return out
	}
	urls := r.rpc[chain]
	if len(urls) == 0 {
		// No node for the chain: nothing can answer; remember as a failure.
		r.store(chain, missing, nil, true)
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	var mu sync.Mutex
	g := new(errgroup.Group)
	g.SetLimit(r.cfg.Parallel)
	for start := 0; start < len(missing); start += r.cfg.BatchTokens {
		chunk := missing[start:min(start+r.cfg.BatchTokens, len(missing))]
		g.Go(func() error {
			toks, err := r.call(ctx, urls, chunk)
			if err != nil {
				r.logger.Warn("token metadata eth_call failed; payloads omit these tokens until retried",
					"chain_id", chain, "tokens", len(chunk), "err", err)
				r.store(chain, chunk, nil, true)
				return nil
			}
			r.store(chain, chunk, toks, false)
			mu.Lock()
			for i, a := range chunk {
				out[a] = toks[i]
			}
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()
	return out
}

// store caches answers (toks[i] for tokens[i]) or a failure of all.
func (r *Resolver) store(chain uint64, tokens []evm.Address, toks []*Token, failed bool) {
	var expires time.Time
	if failed {
		expires = r.now().Add(r.cfg.FailureTTL)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, a := range tokens {
		var tok *Token
		result := "error"
		if !failed {
			tok = toks[i]
			result = "no_answer"
			if tok != nil {
				result = "ok"
			}
		}
		r.lookup.WithLabelValues(result).Inc()
		k := key{chain, a}
		if el, ok := r.index[k]; ok {
			e := el.Value.(*entry)
			e.tok, e.expires = tok, expires
			r.lru.MoveToFront(el)
			continue
		}
		r.index[k] = r.lru.PushFront(&entry{key: k, tok: tok, expires: expires})
		for r.lru.Len() > r.cfg.CacheSize {
			old := r.lru.Back()
			r.lru.Remove(old)
			delete(r.index, old.Value.(*entry).key)
		}
	}
}

// Len is the number of cached entries.
func (r *Resolver) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lru.Len()
}

// Function selectors.
var (
	selName     = "0x06fdde03"
	selSymbol   = "0x95d89b41"
	selDecimals = "0x313ce567"
)

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int    `json:"id"`
	Method  string `json:"method"`
	Params  []any  `json:"params"`
}

type rpcResponse struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type callArgs struct {
	To   string `json:"to"`
	Data string `json:"data"`
}

// call asks the first URL that answers for the metadata of tokens.
func (r *Resolver) call(ctx context.Context, urls []string, tokens []evm.Address) ([]*Token, error) {
	reqs := make([]rpcRequest, 0, 3*len(tokens))
	for i, a := range tokens {
		for j, sel := range []string{selName, selSymbol, selDecimals} {
			reqs = append(reqs, rpcRequest{JSONRPC: "2.0", ID: 3*i + j, Method: "eth_call",
				Params: []any{callArgs{To: a.Hex(), Data: sel}, "latest"}})
		}
	}
	body, err := json.Marshal(reqs)
	if err != nil {
		return nil, err
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
		results := make([][]byte, len(reqs))
		answered := make([]bool, len(reqs))
		for _, resp := range resps {
			if resp.ID < 0 || resp.ID >= len(reqs) {
				continue
			}
			answered[resp.ID] = true
			if resp.Error != nil {
				continue // reverted or not callable: no answer
			}
			var hexStr string
			if json.Unmarshal(resp.Result, &hexStr) == nil {
				results[resp.ID] = decodeHex(hexStr)
			}
		}
		for i, ok := range answered {
			if !ok {
				return nil, fmt.Errorf("rpc %s: batch response lacks id %d", redact(u), i)
			}
		}
		out := make([]*Token, len(tokens))
		for i := range tokens {
			name, okN := abiString(results[3*i])
			symbol, okS := abiString(results[3*i+1])
			if !okN || !okS {
				continue
			}
			tok := &Token{Name: name, Symbol: symbol}
			tok.Decimals, tok.HasDecimals = abiUint8(results[3*i+2])
			out[i] = tok
		}
		return out, nil
	}
	return nil, errors.Join(errs...)
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

// redact keeps scheme and host of an RPC URL: paths often carry API keys.
func redact(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.IndexByte(u[i+3:], '/'); j >= 0 {
			return u[:i+3+j] + "/…"
		}
	}
	return u
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
