package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/obs"
)

// PoolConfig configures a Pool.
type PoolConfig struct {
	// Chain labels the metrics and logs (the decimal chain id).
	Chain string
	// Nodes are the chain's endpoints with their limits (chains.Chain.RPCNodes).
	Nodes []chains.Node
	// WSURL is a WebSocket endpoint whose newHeads announcements make Run
	// poll every node at once (optional: polling alone works).
	WSURL string
	// Timeout bounds one HTTP request (default 30s).
	Timeout time.Duration
	// PollInterval is the period of Run's eth_blockNumber poll of every node
	// (default 1s). A node whose poll fails is taken out until a poll
	// succeeds again: the poll is also the health check.
	PollInterval time.Duration
	// Attempts is how many times one call is sent, over all nodes, before
	// its error is returned (default 2 per node, at least 5).
	Attempts int
	// BackoffInitial and BackoffMax bound the pause once every node has
	// failed a call (defaults 100ms and 5s) and a failed node's cool-down
	// (which doubles with each consecutive failure, up to 30s).
	BackoffInitial, BackoffMax time.Duration
	// MaxConcurrency is the ceiling of the adaptive concurrency of a node
	// without a maxConcurrency of its own (default 16).
	MaxConcurrency int
	// MaxLag is how many blocks a node may be behind the best head and
	// still serve calls not pinned to a block (default 8); a node further
	// behind serves them only when no other node can.
	MaxLag uint64
	// HTTPClient is used when set (tests); otherwise one with pooled
	// keep-alive connections.
	HTTPClient *http.Client
	// Logger receives the nodes' state changes (default: discarded).
	Logger *slog.Logger
}

// ForChain is the PoolConfig of a chain from the chains file, with the
// defaults for everything else.
func ForChain(ch chains.Chain) PoolConfig {
	return PoolConfig{Chain: ch.EVMChainID, Nodes: ch.RPCNodes(), WSURL: ch.WSURL}
}

func (c *PoolConfig) defaults() {
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.Attempts <= 0 {
		c.Attempts = max(5, 2*len(c.Nodes))
	}
	if c.BackoffInitial <= 0 {
		c.BackoffInitial = 100 * time.Millisecond
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 5 * time.Second
	}
	if c.MaxConcurrency <= 0 {
		c.MaxConcurrency = 16
	}
	if c.MaxLag == 0 {
		c.MaxLag = 8
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// maxCoolDown bounds how long a failing node is left alone between tries
// (its head poll takes it back sooner once it answers).
const maxCoolDown = 30 * time.Second

// Pool sends a chain's JSON-RPC calls to the best of its nodes: among those
// that are up, have reached the block a call is about (AtBlock) and have
// room under their limits, the one expected to answer first (requests in
// flight × its latency per call), so that work spreads in proportion to
// what each node delivers. A call a node fails (transport error, timeout,
// HTTP error, 429, or an answer that it cannot serve that block) is sent
// to another node; a node that fails is cooled down, its requests in flight
// are cancelled and sent elsewhere, and its head poll takes it back once it
// answers. It is safe for concurrent use; Run tracks the nodes' heads.
type Pool struct {
	cfg     PoolConfig
	metrics *Metrics
	logger  *slog.Logger
	nodes   []*node

	mu sync.Mutex
	// changed is closed (and replaced) when a node frees capacity, changes
	// state or reports a new head.
	changed chan struct{}
	// headChanged is closed (and replaced) when Head changes.
	headChanged chan struct{}
	best        uint64 // Head's value
	bestKnown   bool
	tracking    bool // Run is polling heads
	subscribed  bool
	// seen is the recent head reports, oldest first (SeenAt).
	seen []headReport
}

// node is one endpoint and what the pool knows of it. Fields below client
// are guarded by Pool.mu.
type node struct {
	cfg    chains.Node
	client *Client
	poke   chan struct{} // asks its poller to poll now

	head      uint64
	headKnown bool
	up        bool
	fails     int // consecutive failures
	coolUntil time.Time
	// gone is closed when the node is marked down: its requests in flight
	// are cancelled and sent to other nodes.
	gone chan struct{}

	inflight int
	limit    float64 // adaptive concurrency limit, in [1, ceiling]
	ceiling  float64
	maxBatch int

	rps      float64 // 0: no rate limit
	tokens   float64
	tokensAt time.Time

	pollTook time.Duration // the last head poll's round trip
	perCall  float64       // EWMA of seconds per call of successful requests
	baseline float64       // the lowest recent perCall, slowly forgotten
	// excess is the EWMA of seconds per request beyond what baseline
	// predicts. A delay on our side (this process short of CPU) adds about
	// the same to every node's; a node queueing our requests adds to its
	// own only.
	excess float64
}

// NewPool builds the pool; it does no I/O. Run tracks the nodes' heads;
// without it every node is taken to have every block.
func NewPool(cfg PoolConfig, m *Metrics) (*Pool, error) {
	cfg.defaults()
	if len(cfg.Nodes) == 0 {
		return nil, fmt.Errorf("rpc: chain %s has no nodes", cfg.Chain)
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// Parallel fetchers keep several requests in flight to each node.
		tr.MaxIdleConnsPerHost = 64
		hc = &http.Client{Transport: tr}
	}
	p := &Pool{cfg: cfg, metrics: m, changed: make(chan struct{}), headChanged: make(chan struct{}),
		logger: cfg.Logger.With("component", "rpc", "chain_id", cfg.Chain)}
	for i, nc := range cfg.Nodes {
		if nc.Name == "" {
			nc.Name = strconv.Itoa(i)
		}
		ceiling := float64(cfg.MaxConcurrency)
		if nc.MaxConcurrency > 0 {
			ceiling = float64(nc.MaxConcurrency)
		}
		n := &node{
			cfg: nc,
			client: New(Config{URL: nc.URL, Chain: cfg.Chain, Node: nc.Name, Timeout: cfg.Timeout, Attempts: 1,
				HTTPClient: hc}, m),
			poke: make(chan struct{}, 1), up: true, gone: make(chan struct{}),
			limit: min(4, ceiling), ceiling: ceiling, maxBatch: nc.MaxBatch,
			rps: nc.RequestsPerSecond, tokens: max(nc.RequestsPerSecond, 1),
		}
		p.nodes = append(p.nodes, n)
		m.up.WithLabelValues(cfg.Chain, nc.Name).Set(1)
		m.limit.WithLabelValues(cfg.Chain, nc.Name).Set(n.limit)
		m.inflight.WithLabelValues(cfg.Chain, nc.Name).Set(0)
		m.Init(cfg.Chain, nc.Name, "eth_blockNumber")
	}
	return p, nil
}

// Chain is the chain id the pool serves.
func (p *Pool) Chain() string { return p.cfg.Chain }

// Option qualifies one Batch or Call.
type Option func(*options)

type options struct {
	atBlock uint64
	pinned  bool
	hedge   bool
	reuse   bool
	avoid   map[string]bool
}

// Avoid keeps the call off the named nodes (their answers for it failed a
// check of the caller's), unless no other node can take it.
func Avoid(names ...string) Option {
	return func(o *options) {
		if o.avoid == nil {
			o.avoid = map[string]bool{}
		}
		for _, n := range names {
			o.avoid[n] = true
		}
	}
}

// NodeNames lists the pool's node names, in configuration order.
func (p *Pool) NodeNames() []string {
	out := make([]string, len(p.nodes))
	for i, n := range p.nodes {
		out[i] = n.cfg.Name
	}
	return out
}

// AtBlock sends the call only to nodes whose head has reached n: a node is
// never asked for a block above its own head.
func AtBlock(n uint64) Option { return func(o *options) { o.atBlock, o.pinned = n, true } }

// Hedge sends a copy of the request to a second node when the first has
// not answered within three times its usual latency, and takes whichever
// answer comes first. It pays where latency matters more than the nodes'
// load: at the chain head, and for small reads.
func Hedge() Option { return func(o *options) { o.hedge = true } }

// Call sends one call (as a batch of one) and returns its result; a
// JSON-RPC error answer is returned as *Error.
func (p *Pool) Call(ctx context.Context, method string, params ...any) (json.RawMessage, error) {
	return p.CallWith(ctx, nil, method, params...)
}

// CallWith is Call with options (AtBlock, Hedge).
func (p *Pool) CallWith(ctx context.Context, opts []Option, method string, params ...any) (json.RawMessage, error) {
	r := &Request{Method: method, Params: params}
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if err := p.batch(ctx, []*Request{r}, o); err != nil {
		return nil, err
	}
	return r.Result, r.Err
}

// Batch sends reqs and fills each request's Result or Err, like
// Client.Batch: the error is non-nil only when no node answered (every
// unanswered request then carries it too). A batch larger than a node's
// maxBatch is split. Calls a node refused for rate limiting, or answered
// that it cannot serve that block (IsUnavailable), are sent to the chain's
// other nodes before their error is kept. Release reqs once their results
// are read.
func (p *Pool) Batch(ctx context.Context, reqs []*Request, opts ...Option) error {
	o := options{reuse: true}
	for _, opt := range opts {
		opt(&o)
	}
	return p.batch(ctx, reqs, o)
}

// Release hands the memory behind reqs' results back for later answers
// (Client.Release).
func (p *Pool) Release(reqs []*Request) { Release(reqs) }

func (p *Pool) batch(ctx context.Context, reqs []*Request, o options) error {
	size := len(reqs)
	for _, n := range p.nodes {
		if n.maxBatch > 0 {
			size = min(size, n.maxBatch)
		}
	}
	if size >= len(reqs) {
		return p.send(ctx, reqs, o)
	}
	// Split to the smallest maxBatch of the chain's nodes, so that any
	// node can take any part; the parts go out together.
	g, gctx := errgroup.WithContext(ctx)
	for i := 0; i < len(reqs); i += size {
		part := reqs[i:min(i+size, len(reqs))]
		g.Go(func() error { return p.send(gctx, part, o) })
	}
	return g.Wait()
}

// send is one batch's way through the nodes: the best node first, then, for
// what it failed, the others; a pause once every node has failed it.
func (p *Pool) send(ctx context.Context, reqs []*Request, o options) error {
	if len(reqs) == 0 {
		return nil
	}
	pending := reqs
	tried := map[*node]bool{}
	var lastErr error
	retry := obs.Retry{Initial: p.cfg.BackoffInitial, Max: p.cfg.BackoffMax}
	backoff := retry.Initial
	for attempt := 0; attempt < p.cfg.Attempts; attempt++ {
		n, err := p.acquire(ctx, len(pending), o, tried)
		if errors.Is(err, errAllTried) {
			// Every node failed this call: pause, then start over.
			if !obs.Sleep(ctx, backoff) {
				break
			}
			backoff = min(2*backoff, retry.Max)
			clear(tried)
			attempt--
			continue
		}
		if err != nil {
			lastErr = err
			break
		}
		tried[n] = true
		err = p.sendOn(ctx, n, pending, o)
		if err != nil {
			lastErr = err
			if !retryable(ctx, err) && !errors.Is(err, errNodeGone) {
				break
			}
			if ctx.Err() == nil {
				p.metrics.failovers.WithLabelValues(p.cfg.Chain, n.cfg.Name, resultLabel(err, nil)).Inc()
			}
			continue
		}
		// Answered. Calls refused for rate limiting, or for a block the
		// node cannot serve, go to another node.
		var again []*Request
		for _, r := range pending {
			switch {
			case r.Err == nil:
			case isRateLimited(r.Err):
				again = append(again, r)
			case IsUnavailable(r.Err):
				p.metrics.unavailable.WithLabelValues(p.cfg.Chain, n.cfg.Name).Inc()
				if !p.allTried(tried, o) {
					again = append(again, r)
				}
			}
		}
		if len(again) == 0 {
			return nil
		}
		lastErr = again[0].Err
		if IsUnavailable(lastErr) && !isRateLimited(lastErr) {
			p.metrics.failovers.WithLabelValues(p.cfg.Chain, n.cfg.Name, "rpc_error").Inc()
		} else {
			p.metrics.failovers.WithLabelValues(p.cfg.Chain, n.cfg.Name, "rate_limited").Inc()
		}
		pending = again
	}
	if lastErr == nil {
		lastErr = ctx.Err()
	}
	if ctx.Err() != nil && !errors.Is(lastErr, ctx.Err()) {
		lastErr = fmt.Errorf("%w (last error: %v)", ctx.Err(), lastErr)
	}
	for _, r := range pending {
		if r.Err == nil || (!isRateLimited(r.Err) && !IsUnavailable(r.Err)) {
			r.Err = lastErr
		}
	}
	var re *Error
	if errors.As(lastErr, &re) {
		return nil // the calls carry their own answers
	}
	return lastErr
}

// isRateLimited reports whether err is a node refusing for rate limiting:
// a JSON-RPC error saying so, or HTTP 429.
func isRateLimited(err error) bool {
	var re *Error
	var se *statusError
	return errors.As(err, &re) && re.rateLimited() || errors.As(err, &se) && se.code == http.StatusTooManyRequests
}

// allTried reports whether every node that could take a call (o) is in
// tried.
func (p *Pool) allTried(tried map[*node]bool, o options) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.nodes {
		if !tried[n] && p.eligible(n, o) {
			return false
		}
	}
	return true
}

var (
	// errAllTried: every eligible node has been tried for this call.
	errAllTried = errors.New("every node tried")
	// errNodeGone cancels a request whose node was marked down meanwhile.
	errNodeGone = errors.New("node marked down while the request was in flight")
)

// eligible reports whether n may be sent a call (ignoring its capacity):
// it has the block, if the call is about one. Called with p.mu held.
func (p *Pool) eligible(n *node, o options) bool {
	if o.pinned && p.tracking && (!n.headKnown || n.head < o.atBlock) {
		return false
	}
	return true
}

// acquire waits for the best node with room for a request of calls calls
// and takes a slot on it. Nodes in tried are skipped; errAllTried says
// every node that could take it is in tried. Nodes that are down or lag
// are taken only when no other node could take the call at all.
func (p *Pool) acquire(ctx context.Context, calls int, o options, tried map[*node]bool) (*node, error) {
	var waited time.Time
	for {
		p.mu.Lock()
		now := time.Now()
		var preferred, fallback []*node
		anyEligible := false
		for _, n := range p.nodes {
			if !p.eligible(n, o) {
				continue
			}
			anyEligible = true
			if tried[n] {
				continue
			}
			switch {
			case n.up && !p.lagging(n, o) && !o.avoid[n.cfg.Name]:
				preferred = append(preferred, n)
			case !n.up && now.Before(n.coolUntil):
				// Cooling down: only as a last resort.
				fallback = append(fallback, n)
			default:
				fallback = append(fallback, n)
			}
		}
		cands := preferred
		if len(cands) == 0 {
			cands = fallback
		}
		if len(cands) == 0 {
			p.mu.Unlock()
			if anyEligible {
				return nil, errAllTried
			}
			// No node has reached the block yet: wait for heads, a while.
			if waited.IsZero() {
				waited = now
			} else if now.Sub(waited) > p.cfg.Timeout {
				return nil, fmt.Errorf("%w: no node has reached block %d", ErrNoNode, o.atBlock)
			}
			if !p.wait(ctx, 100*time.Millisecond) {
				return nil, ctx.Err()
			}
			continue
		}
		var best *node
		bestScore := math.Inf(1)
		var nextToken time.Duration
		for _, n := range cands {
			n.refill(now)
			if float64(n.inflight) >= math.Floor(n.limit) {
				continue
			}
			if n.rps > 0 && n.tokens <= 0 {
				d := time.Duration(-n.tokens/n.rps*float64(time.Second)) + time.Millisecond
				if nextToken == 0 || d < nextToken {
					nextToken = d
				}
				continue
			}
			// Expected time to an answer: the requests ahead of this one
			// plus this one, at the node's pace. An unmeasured node scores
			// 0 and is tried first: that is how it gets measured.
			score := float64(n.inflight+1) * n.perCall * float64(calls)
			if score < bestScore {
				best, bestScore = n, score
			}
		}
		if best != nil {
			best.inflight++
			if best.rps > 0 {
				best.tokens -= float64(calls)
			}
			p.metrics.inflight.WithLabelValues(p.cfg.Chain, best.cfg.Name).Set(float64(best.inflight))
			p.mu.Unlock()
			return best, nil
		}
		p.mu.Unlock()
		if nextToken == 0 {
			nextToken = time.Second
		}
		if !p.wait(ctx, nextToken) {
			return nil, ctx.Err()
		}
	}
}

// wait blocks until the pool changes, d passes or ctx ends (false).
func (p *Pool) wait(ctx context.Context, d time.Duration) bool {
	p.mu.Lock()
	ch := p.changed
	p.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-ch:
	case <-t.C:
	}
	return true
}

// notify wakes the waiters of acquire. Called with p.mu held.
func (p *Pool) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// lagging reports whether n is too far behind the best head for a call not
// pinned to a block. Called with p.mu held.
func (p *Pool) lagging(n *node, o options) bool {
	return !o.pinned && p.tracking && p.bestKnown && (!n.headKnown || n.head+p.cfg.MaxLag < p.best)
}

// refill adds the rate limit's tokens earned since the last call (at most
// one second's worth). Called with p.mu held.
func (n *node) refill(now time.Time) {
	if n.rps <= 0 {
		return
	}
	if !n.tokensAt.IsZero() {
		n.tokens = min(n.tokens+now.Sub(n.tokensAt).Seconds()*n.rps, max(n.rps, 1))
	}
	n.tokensAt = now
}

// sendOn sends reqs to n (a slot taken by acquire), hedged on a second node
// when asked, and releases the slot.
func (p *Pool) sendOn(ctx context.Context, n *node, reqs []*Request, o options) error {
	if !o.hedge || len(p.nodes) < 2 {
		return p.roundTrip(ctx, n, reqs, o.reuse)
	}
	return p.hedged(ctx, n, reqs, o)
}

// roundTrip is one HTTP request to n, cancelled if n is marked down
// meanwhile; it releases n's slot and feeds what it saw into n's state.
func (p *Pool) roundTrip(ctx context.Context, n *node, reqs []*Request, reuse bool) error {
	p.mu.Lock()
	gone := n.gone
	p.mu.Unlock()
	rctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-gone:
			cancel(errNodeGone)
		case <-done:
		}
	}()
	start := time.Now()
	err := n.client.send(rctx, reqs, reuse)
	close(done)
	if err != nil && context.Cause(rctx) == errNodeGone && ctx.Err() == nil {
		err = fmt.Errorf("%w: %v", errNodeGone, err)
	}
	cancel(nil)
	p.observe(n, reqs, err, time.Since(start), ctx.Err() != nil)
	return err
}

// observe releases n's slot and updates its health, latency and adaptive
// limit from one round trip.
func (p *Pool) observe(n *node, reqs []*Request, err error, took time.Duration, cancelled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.notify()
	n.inflight--
	p.metrics.inflight.WithLabelValues(p.cfg.Chain, n.cfg.Name).Set(float64(n.inflight))
	defer func() { p.metrics.limit.WithLabelValues(p.cfg.Chain, n.cfg.Name).Set(n.limit) }()
	if cancelled || errors.Is(err, errNodeGone) {
		// Not the node's failure (or already counted); but a request
		// cancelled after d took at least d: a node whose requests are
		// always overtaken by hedges must not keep looking fast.
		if err != nil {
			n.perCall = max(n.perCall, took.Seconds()/float64(max(len(reqs), 1)))
		}
		return
	}
	limited := false
	var se *statusError
	var ra *retryAfterError
	switch {
	case err == nil:
		for _, r := range reqs {
			if r.Err != nil && isRateLimited(r.Err) {
				limited = true
			}
		}
	case errors.As(err, &se) && se.code == http.StatusTooManyRequests:
		limited = true
	default:
		p.markDown(n, err)
		return
	}
	if limited {
		// Multiplicative decrease: the node says it is over its limit.
		n.limit = max(1, n.limit/2)
		if errors.As(err, &ra) {
			n.coolUntil = time.Now().Add(min(ra.after, maxCoolDown))
		}
		return
	}
	n.fails = 0
	calls := float64(max(len(reqs), 1))
	per := took.Seconds() / calls
	if n.perCall == 0 {
		n.perCall, n.baseline = per, per
	} else {
		n.perCall += 0.2 * (per - n.perCall)
		// The baseline follows drops at once and rises slowly, so that a
		// node whose latency keeps rising under load is seen doing so.
		if per < n.baseline {
			n.baseline = per
		} else {
			n.baseline += 0.01 * (per - n.baseline)
		}
		n.excess += 0.2 * (max(0, took.Seconds()-n.baseline*calls) - n.excess)
	}
	if n.perCall > 2*n.baseline && n.perCall > 0.002 && !p.delayShared(n) {
		// Latency rising: the node is queueing our requests. Back off
		// gently.
		n.limit = max(1, n.limit*0.9)
	} else if float64(n.inflight+1) >= math.Floor(n.limit) {
		// Additive increase, while the limit is what holds us back.
		n.limit = min(n.ceiling, n.limit+1/n.limit)
	}
}

// delayShared reports whether another working node's requests take about
// as long beyond its own best as n's do: then the delay is ours (this
// process or its machine short of CPU), not n's queue, and lowering n's
// limit would only send its work to slower nodes. Called with p.mu held.
func (p *Pool) delayShared(n *node) bool {
	for _, m := range p.nodes {
		if m != n && m.up && m.perCall > 0 && n.excess < 2*m.excess {
			return true
		}
	}
	return false
}

// markDown takes n out after a failure: its requests in flight are
// cancelled (and sent to other nodes by their callers), and it rests for a
// cool-down that doubles with each consecutive failure. Called with p.mu
// held.
func (p *Pool) markDown(n *node, err error) {
	n.fails++
	cool := min(p.cfg.BackoffInitial*time.Duration(1<<min(n.fails+2, 20)), maxCoolDown)
	n.coolUntil = time.Now().Add(cool)
	n.limit = max(1, n.limit/2)
	if n.up {
		n.up = false
		close(n.gone)
		n.gone = make(chan struct{})
		p.metrics.up.WithLabelValues(p.cfg.Chain, n.cfg.Name).Set(0)
		p.logger.Warn("node failing; sending its work to the other nodes", "node", n.cfg.Name,
			"url", Redact(n.cfg.URL), "err", err)
		p.updateBest()
	}
}

// markUp takes n back after it answered its head poll. Called with p.mu
// held.
func (p *Pool) markUp(n *node) {
	n.fails = 0
	if !n.up {
		n.up = true
		p.metrics.up.WithLabelValues(p.cfg.Chain, n.cfg.Name).Set(1)
		p.logger.Info("node answering again; taking it back", "node", n.cfg.Name, "url", Redact(n.cfg.URL), "head", n.head)
		p.notify()
	}
}

// hedged sends reqs to n and, if n is slow, a copy to another node; the
// first answer wins and the other request is cancelled.
func (p *Pool) hedged(ctx context.Context, n *node, reqs []*Request, o options) error {
	p.mu.Lock()
	delay := time.Duration(3 * n.perCall * float64(len(reqs)) * float64(time.Second))
	p.mu.Unlock()
	if delay <= 0 {
		delay = 500 * time.Millisecond
	}
	delay = min(max(delay, 50*time.Millisecond), p.cfg.Timeout/2)

	// Each request works on its own copies of reqs: the loser may still be
	// writing its answer when the winner's is taken.
	clone := func() []*Request {
		c := make([]*Request, len(reqs))
		for i, r := range reqs {
			c[i] = &Request{Method: r.Method, Params: r.Params}
		}
		return c
	}
	type outcome struct {
		reqs  []*Request
		err   error
		hedge bool
	}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan outcome, 2)
	primary := clone()
	go func() { results <- outcome{primary, p.roundTrip(hctx, n, primary, o.reuse), false} }()
	timer := time.NewTimer(delay)
	defer timer.Stop()
	running := 1
	var first error
	for running > 0 {
		select {
		case <-timer.C:
			second := p.tryAcquire(len(reqs), o, n)
			if second == nil {
				continue
			}
			copies := clone()
			running++
			p.metrics.hedges.WithLabelValues(p.cfg.Chain, "sent").Inc()
			go func() { results <- outcome{copies, p.roundTrip(hctx, second, copies, o.reuse), true} }()
		case res := <-results:
			running--
			if res.err != nil {
				if first == nil {
					first = res.err
				}
				continue
			}
			cancel() // the other request is no longer wanted
			if res.hedge {
				p.metrics.hedges.WithLabelValues(p.cfg.Chain, "won").Inc()
			}
			for i, r := range reqs {
				r.Result, r.Err, r.Node, r.answer = res.reqs[i].Result, res.reqs[i].Err, res.reqs[i].Node, res.reqs[i].answer
			}
			// Wait for the loser so that its slot is released; its
			// answer, if any, is dropped.
			for ; running > 0; running-- {
				if l := <-results; l.err == nil {
					Release(l.reqs)
				}
			}
			return nil
		}
	}
	if first != nil {
		return first
	}
	return ctx.Err()
}

// tryAcquire takes a slot on the best node other than not, without
// waiting; nil if none has room.
func (p *Pool) tryAcquire(calls int, o options, not *node) *node {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	var best *node
	bestScore := math.Inf(1)
	for _, n := range p.nodes {
		if n == not || !n.up || !p.eligible(n, o) || p.lagging(n, o) || o.avoid[n.cfg.Name] || float64(n.inflight) >= math.Floor(n.limit) {
			continue
		}
		n.refill(now)
		if n.rps > 0 && n.tokens <= 0 {
			continue
		}
		if score := float64(n.inflight+1) * n.perCall; score < bestScore {
			best, bestScore = n, score
		}
	}
	if best != nil {
		best.inflight++
		if best.rps > 0 {
			best.tokens -= float64(calls)
		}
		p.metrics.inflight.WithLabelValues(p.cfg.Chain, best.cfg.Name).Set(float64(best.inflight))
	}
	return best
}
