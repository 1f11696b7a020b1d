// Package tokenmeta reads what token contracts say about themselves with
// eth_call, and caches it per (chain, contract): name, symbol and decimals
// for the erc20Token / erc721Token / erc1155Token objects of webhook payloads
// and Data API transfers (Resolve), and, for the Data API's contract
// metadata, whether an address holds code and which token standard it
// implements (Describe). The processor and the query service share it.
//
// What stays with the caller: which contracts to ask about, and what to
// render without an answer (payloads omit the token object; the API
// documents its own defaults).
//
// Calls go to the chain's nodes through its pkg/rpc Pool (failover, limits
// from the chains file), as JSON-RPC batches at the latest block, several
// contracts per HTTP request. A
// contract answers as a token when both name() and symbol() return a string
// (ABI string, or bytes32 as old tokens do): one rule for Resolve's Token
// and Describe's ERC-20 detection, the rule the webhook payloads' token
// objects were built on (the hosted Erc20Token and Erc721Token require both
// fields). decimals() is separate (NFTs have none).
//
// What is cached (an LRU of Config.CacheSize entries per kind of question):
//   - an answer, including "does not answer" (revert, empty result), until
//     evicted: a contract's code does not change;
//   - "no code at this address" (Describe) for AbsentTTL only: a CREATE2
//     address can be deployed later;
//   - a failure to ask (node down, RPC error, timeout) for FailureTTL, as
//     the error itself: a lookup that hits it fails too, never reads as an
//     answer. The short memory keeps a dead node from costing one timeout
//     per request. A chain without an RPC URL is an error every time and
//     is not cached (there is no node to spare).
//
// Metrics (the subsystem is Deps.Subsystem, the service's name):
//
//	moraine_<subsystem>_token_metadata_lookups_total{result}   hit, ok, no_answer, error
//
// A remembered failure counts as error, not hit.
package tokenmeta

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/rpc"
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
	// CacheSize is the number of (chain, contract) entries kept, per kind
	// of question (token metadata, contract description).
	CacheSize int
	// CallTimeout bounds one Resolve or Describe call (all its HTTP requests).
	CallTimeout time.Duration
	// FailureTTL is how long a failure to ask the node is remembered (and
	// returned as the error) before the node is asked again.
	FailureTTL time.Duration
	// AbsentTTL is how long "no code at this address" is kept.
	AbsentTTL time.Duration
	// BatchTokens is the number of contracts per JSON-RPC batch request.
	BatchTokens int
	// Parallel is the number of concurrent HTTP requests per call.
	Parallel int
}

// DefaultConfig is the configuration the flags default to.
//
// FailureTTL: a recovered node is used again within 10 s, while a dead one
// costs one CallTimeout (2 s) per contract every 10 s rather than per
// request, which keeps the processor's matcher, which waits for token
// answers, at work most of the time.
//
// AbsentTTL: a minute bounds how long an address asked about before its
// deployment (a CREATE2 counterfactual address, a deploy script polling)
// keeps answering 404 after it, while polling an empty address costs the
// node one batch of calls per minute and instance.
func DefaultConfig() Config {
	return Config{CacheSize: 100_000, CallTimeout: 2 * time.Second, FailureTTL: 10 * time.Second, AbsentTTL: time.Minute,
		BatchTokens: 50, Parallel: 4}
}

// Deps are the resolver's dependencies; all optional.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Subsystem names the service in the metric names ("processor" when
	// empty).
	Subsystem string
	// HTTP is the pools' HTTP client when New builds them (tests).
	HTTP *http.Client
	Now  func() time.Time
}

// Resolver resolves and caches token metadata. It is safe for concurrent use.
type Resolver struct {
	cfg    Config
	rpc    map[uint64]*rpc.Pool
	now    func() time.Time
	logger *slog.Logger
	lookup *prometheus.CounterVec

	tokenQ    question[*Token]
	contractQ question[*Contract]
}

type key struct {
	chain uint64
	addr  evm.Address
}

// New returns a resolver calling the given RPC URLs per chain id, through a
// pool per chain built with the defaults (no per-node limits): NewWithPools
// takes the chains' pools.
func New(cfg Config, rpcURLs map[uint64][]string, deps Deps) *Resolver {
	pools := make(map[uint64]*rpc.Pool, len(rpcURLs))
	m := rpc.NewMetrics(deps.Registerer)
	for id, urls := range rpcURLs {
		pc := rpc.PoolConfig{Chain: strconv.FormatUint(id, 10), HTTPClient: deps.HTTP, Logger: deps.Logger}
		for _, u := range urls {
			pc.Nodes = append(pc.Nodes, chains.Node{URL: u})
		}
		if p, err := rpc.NewPool(pc, m); err == nil {
			pools[id] = p
		}
	}
	return NewWithPools(cfg, pools, deps)
}

// NewWithPools returns a resolver calling each chain's nodes through its
// pool (rpc.NewPool(rpc.ForChain(ch), ...)).
func NewWithPools(cfg Config, pools map[uint64]*rpc.Pool, deps Deps) *Resolver {
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
	if cfg.AbsentTTL <= 0 {
		cfg.AbsentTTL = def.AbsentTTL
	}
	if cfg.BatchTokens <= 0 {
		cfg.BatchTokens = def.BatchTokens
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = def.Parallel
	}
	if deps.Subsystem == "" {
		deps.Subsystem = "processor"
	}
	r := &Resolver{cfg: cfg, rpc: pools, now: deps.Now, logger: deps.Logger,
		tokenQ: question[*Token]{cache: newCache[*Token](cfg.CacheSize), calls: tokenCalls, decode: decodeToken,
			answered: func(t *Token) bool { return t != nil }},
		contractQ: question[*Contract]{cache: newCache[*Contract](cfg.CacheSize), calls: contractCalls, decode: decodeContract,
			answered: func(c *Contract) bool { return c != nil && c.HasCode },
			absent:   func(c *Contract) bool { return c != nil && !c.HasCode }},
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	r.logger = r.logger.With("component", "tokenmeta")
	r.lookup = obs.NewMetrics(deps.Registerer, deps.Subsystem).CounterVec("token_metadata_lookups_total",
		"Token and contract metadata lookups by result: hit (cache), ok, no_answer, error (transport).", "result")
	for _, l := range []string{"hit", "ok", "no_answer", "error"} {
		r.lookup.WithLabelValues(l)
	}
	return r
}

// Resolve returns the metadata of tokens on chain: a token maps to nil when
// it does not answer, or when its node could not be asked in time (or was
// not, within FailureTTL of a failure). Its callers render a token without
// metadata either way, so the error is not returned; Describe returns it.
func (r *Resolver) Resolve(ctx context.Context, chain uint64, tokens []evm.Address) map[evm.Address]*Token {
	out, _ := resolve(ctx, r, r.tokenQ, chain, tokens)
	return out
}

// Len is the number of cached token metadata entries.
func (r *Resolver) Len() int { return r.tokenQ.cache.len() }

// question is one kind of thing the resolver asks contracts: the JSON-RPC
// calls per contract, how their results become the cached value, whether
// that value is an answer (for the lookups metric), and whether it says
// the address has no code yet (kept AbsentTTL; nil: never).
type question[V any] struct {
	cache    *cache[V]
	calls    func(evm.Address) []rpcCall
	decode   func(results []json.RawMessage) V
	answered func(V) bool
	absent   func(V) bool
}

// resolve answers addrs from q's cache, asking the chain's node for the
// missing ones in batches. err is non-nil when some addresses could not be
// asked (no node for the chain, transport failure or RPC error, or such a
// failure remembered from the last FailureTTL); they map to the zero V.
func resolve[V any](ctx context.Context, r *Resolver, q question[V], chain uint64, addrs []evm.Address) (map[evm.Address]V, error) {
	out := make(map[evm.Address]V, len(addrs))
	now := r.now()
	var (
		missing  []evm.Address
		firstErr error
	)
	seen := make(map[evm.Address]bool, len(addrs))
	for _, a := range addrs {
		if seen[a] {
			continue
		}
		seen[a] = true
		var zero V
		e, ok := q.cache.get(key{chain, a}, now)
		switch {
		case ok && e.err != nil:
			out[a] = zero
			firstErr = cmp.Or(firstErr, e.err)
			r.lookup.WithLabelValues("error").Inc()
		case ok:
			out[a] = e.val
			r.lookup.WithLabelValues("hit").Inc()
		default:
			out[a] = zero
			missing = append(missing, a)
		}
	}
	if len(missing) == 0 {
		return out, firstErr
	}
	pool := r.rpc[chain]
	if pool == nil {
		r.lookup.WithLabelValues("error").Add(float64(len(missing)))
		return out, fmt.Errorf("tokenmeta: no RPC URL for chain %d", chain)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	var mu sync.Mutex
	g := new(errgroup.Group)
	g.SetLimit(r.cfg.Parallel)
	for start := 0; start < len(missing); start += r.cfg.BatchTokens {
		chunk := missing[start:min(start+r.cfg.BatchTokens, len(missing))]
		g.Go(func() error {
			var reqs []rpcCall
			for _, a := range chunk {
				reqs = append(reqs, q.calls(a)...)
			}
			results, err := batch(ctx, pool, reqs)
			if err != nil {
				r.logger.Warn("contract metadata calls failed; answers lack these contracts until retried",
					"chain_id", chain, "contracts", len(chunk), "err", err)
				r.lookup.WithLabelValues("error").Add(float64(len(chunk)))
				if parent.Err() == nil {
					// The node failed (not the caller, who gave up): spare
					// it for FailureTTL.
					expires := r.now().Add(r.cfg.FailureTTL)
					var zero V
					for _, a := range chunk {
						q.cache.put(key{chain, a}, zero, err, expires)
					}
				}
				mu.Lock()
				firstErr = cmp.Or(firstErr, err)
				mu.Unlock()
				return nil
			}
			per := len(reqs) / len(chunk)
			vals := make([]V, len(chunk))
			for i, a := range chunk {
				vals[i] = q.decode(results[i*per : (i+1)*per])
				result := "no_answer"
				if q.answered(vals[i]) {
					result = "ok"
				}
				r.lookup.WithLabelValues(result).Inc()
				var expires time.Time
				if q.absent != nil && q.absent(vals[i]) {
					expires = r.now().Add(r.cfg.AbsentTTL)
				}
				q.cache.put(key{chain, a}, vals[i], nil, expires)
			}
			mu.Lock()
			for i, a := range chunk {
				out[a] = vals[i]
			}
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()
	return out, firstErr
}
