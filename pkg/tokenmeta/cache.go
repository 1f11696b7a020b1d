package tokenmeta

import (
	"container/list"
	"sync"
	"time"
)

// cache is an LRU per (chain, contract) of answers, and of failures to get
// one. An entry with a zero expiry is kept until evicted; one with an
// expiry (an absence that may end, a failure) is served until then and
// asked again after. A failure entry holds the error, never a value, so a
// hit on it is a failure too.
type cache[V any] struct {
	size  int
	mu    sync.Mutex
	lru   *list.List // of *entry[V], most recent first
	index map[key]*list.Element
}

type entry[V any] struct {
	key     key
	val     V
	err     error
	expires time.Time
}

func newCache[V any](size int) *cache[V] {
	return &cache[V]{size: size, lru: list.New(), index: map[key]*list.Element{}}
}

// get returns a copy of the live entry of k: its value, or the failure
// it remembers (err).
func (c *cache[V]) get(k key, now time.Time) (entry[V], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.index[k]; ok {
		e := el.Value.(*entry[V])
		if e.expires.IsZero() || now.Before(e.expires) {
			c.lru.MoveToFront(el)
			return *e, true
		}
	}
	return entry[V]{}, false
}

func (c *cache[V]) put(k key, v V, err error, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.index[k]; ok {
		e := el.Value.(*entry[V])
		e.val, e.err, e.expires = v, err, expires
		c.lru.MoveToFront(el)
		return
	}
	c.index[k] = c.lru.PushFront(&entry[V]{key: k, val: v, err: err, expires: expires})
	for c.lru.Len() > c.size {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.index, old.Value.(*entry[V]).key)
	}
}

func (c *cache[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
