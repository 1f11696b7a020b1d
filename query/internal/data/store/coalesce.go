package store

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// coalescer reads concurrent point lookups of one kind (a block by number,
// a block's transactions, a transaction by hash) together. At most limit
// reads of the kind run at once; a request that arrives while they all run
// waits, and the next read to start takes every waiting request that fits
// one query.
//
// Why: ClickHouse 18.16 charges about a millisecond of server CPU for any
// query, whatever it reads (a thread per query, handing every block
// across), and a few keys more add little to it. On the 30,000-block corpus
// a block_lookup read costs the server about 0.95 ms for one block, 1.2 ms
// for four and 1.6 ms for sixteen; a block's transactions 2.2 ms for one
// block and 3.6 ms for four (bench/history.md, "Coalesced point reads").
// While a backfill keeps the cores busy, reads slow down, more of them are
// in flight at once, and they then cost the server a fraction of what each
// would alone: the read load shrinks exactly when the cores are short. A
// lone request is read at once, as before.
type coalescer[K comparable, V any] struct {
	// name is the query's name in metrics and errors.
	name string
	// limit is the most reads of this kind running at once.
	limit int
	// maxKeys is the most distinct keys one read takes.
	maxKeys int
	// together reports whether two keys can be read by one query.
	together func(a, b K) bool
	// read reads keys (distinct, every pair together) in one query; a key
	// missing from the result has no value.
	read func(ctx context.Context, keys []K) (map[K]V, error)
	// keys observes how many keys each read took.
	keys prometheus.Observer
	// wait bounds a request from its arrival to its answer, whether it
	// waits for a read or is in one: the store's Config.QueryTimeout, so a
	// request queued behind reads that hang fails when one read alone would
	// have.
	wait time.Duration

	mu      sync.Mutex
	waiting []*pointRead[K, V]
	running int
}

// newCoalescer is s's coalescer of the reads named name (its metric label
// and error prefix), at most maxKeys keys a read, at most
// Config.PointReadConcurrency reads at once, each request answered within
// Config.QueryTimeout.
func newCoalescer[K comparable, V any](s *ClickHouse, name string, maxKeys int,
	read func(ctx context.Context, keys []K) (map[K]V, error), together func(a, b K) bool) *coalescer[K, V] {
	return &coalescer[K, V]{name: name, limit: s.cfg.PointReadConcurrency, maxKeys: maxKeys, together: together,
		read: read, keys: s.metrics.pointReadKeys.WithLabelValues(name), wait: s.cfg.QueryTimeout}
}

// pointRead is one request waiting for its key.
type pointRead[K comparable, V any] struct {
	ctx  context.Context
	key  K
	val  V
	ok   bool
	err  error
	done chan struct{}
}

// get returns key's value; ok is false when the read found none.
func (c *coalescer[K, V]) get(ctx context.Context, key K) (val V, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	p := &pointRead[K, V]{ctx: ctx, key: key, done: make(chan struct{})}
	c.mu.Lock()
	c.waiting = append(c.waiting, p)
	if c.running < c.limit {
		c.running++
		go c.drain()
	}
	c.mu.Unlock()
	select {
	case <-p.done:
		return p.val, p.ok, p.err
	case <-ctx.Done():
		// The read goes on for the others that wait with this request; a
		// request still waiting is dropped by the next take.
		return val, false, classify(c.name, ctx.Err())
	}
}

// drain runs reads until nothing waits.
func (c *coalescer[K, V]) drain() {
	for {
		c.mu.Lock()
		batch, keys := c.take()
		if len(batch) == 0 {
			c.running--
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.run(batch, keys)
	}
}

// take removes the requests of the next read from waiting: the oldest
// request's and every later one that can be read with it, up to maxKeys
// distinct keys, which it returns too. Requests whose callers have gone are
// dropped. The caller holds mu.
func (c *coalescer[K, V]) take() (batch []*pointRead[K, V], keys []K) {
	var (
		seen = map[K]struct{}{}
		rest = c.waiting[:0]
	)
	for _, p := range c.waiting {
		switch {
		case p.ctx.Err() != nil:
			continue
		case len(batch) > 0 && !c.together(batch[0].key, p.key):
			rest = append(rest, p)
			continue
		}
		if _, dup := seen[p.key]; !dup {
			if len(keys) == c.maxKeys {
				rest = append(rest, p)
				continue
			}
			seen[p.key] = struct{}{}
			keys = append(keys, p.key)
		}
		batch = append(batch, p)
	}
	clear(c.waiting[len(rest):])
	c.waiting = rest
	return batch, keys
}

// run reads keys, the distinct keys of batch, in one query and answers each
// request.
func (c *coalescer[K, V]) run(batch []*pointRead[K, V], keys []K) {
	c.keys.Observe(float64(len(keys)))
	// The read serves every request of the batch, so no one caller's end
	// cancels it; the store's deadline (Config.QueryTimeout) bounds it.
	vals, err := c.read(context.WithoutCancel(batch[0].ctx), keys)
	for _, p := range batch {
		if err != nil {
			p.err = err
		} else {
			p.val, p.ok = vals[p.key]
		}
		close(p.done)
	}
}
