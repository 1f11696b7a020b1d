package watch

import (
	"hash/maphash"
	"sync"
)

// Locks serialise, within one process, every change of one webhook (or one
// account) from its ClickHouse write to the end of its produce, and the
// reconciler's republishing of the same keys. So records of one key reach
// the topic in the order of their versions, and a read-modify-write (add
// addresses under a plan cap) sees the previous change.
//
// Striped: two keys may share a stripe, which only costs a little
// parallelism. Accounts and webhooks have separate stripes, and the only
// nesting is account, then webhook (a create), so stripes cannot deadlock.
type Locks struct {
	seed     maphash.Seed
	accounts [64]sync.Mutex
	webhooks [256]sync.Mutex
}

// NewLocks returns unlocked stripes.
func NewLocks() *Locks { return &Locks{seed: maphash.MakeSeed()} }

// Webhook locks a webhook's stripe and returns the unlock function.
func (l *Locks) Webhook(id string) (unlock func()) {
	m := &l.webhooks[maphash.String(l.seed, id)%uint64(len(l.webhooks))]
	m.Lock()
	return m.Unlock
}

// Account locks an account's stripe and returns the unlock function. Take
// it before a webhook's lock, never after.
func (l *Locks) Account(id string) (unlock func()) {
	m := &l.accounts[maphash.String(l.seed, id)%uint64(len(l.accounts))]
	m.Lock()
	return m.Unlock
}
