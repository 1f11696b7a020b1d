package tokenmeta

import (
	"container/list"
	"sync"
	"time"
)

// cache is an LRU of answers per (chain, contract). An entry with a zero
// expiry is definitive; one with an expiry (a transport failure) is served
// until then and asked again after.
type cache[V any] struct {
	size  int
	mu    sync.Mutex
	lru   *list.List // of *entry[V], most recent first
	index map[key]*list.Element
}

type entry[V any] struct {
	key     key
	val     V
	expires time.Time
}

func newCache[V any](size int) *cache[V] {
	return &cache[V]{size: size, lru: list.New(), index: map[key]*list.Element{}}
}

func (c *cache[V]) get(k key, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.index[k]; ok {
		e := el.Value.(*entry[V])
		if e.expires.IsZero() || now.Before(e.expires) {
			c.lru.MoveToFront(el)
			return e.val, true
		}
	}
	var zero V
	return zero, false
}

func (c *cache[V]) put(k key, v V, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.index[k]; ok {
		e := el.Value.(*entry[V])
		e.val, e.expires = v, expires
		c.lru.MoveToFront(el)
		return
	}
	c.index[k] = c.lru.PushFront(&entry[V]{key: k, val: v, expires: expires})
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
