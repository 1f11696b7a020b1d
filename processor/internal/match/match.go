package match

import (
	"bytes"
	"slices"
	"strings"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/processor/internal/watchlist"
	"github.com/moraine-data/moraine/schemas/record"
)

// Match is one (webhook, transaction) to notify.
type Match struct {
	// Tx is the index of the transaction in the block's Transactions.
	Tx int
	// Webhook is the settings snapshot the match was made with.
	Webhook *watchlist.Webhook
}

// candidate is a webhook slot a transaction touched; direct is false while
// the only contact is an internal call.
type candidate struct {
	slot   uint32
	direct bool
}

// Matcher joins blocks against a watch table. It keeps scratch buffers
// between calls and is not safe for concurrent use; use one per goroutine.
type Matcher struct {
	table *watchlist.Table
	buf   []uint32
	cands []candidate
	hooks []*watchlist.Webhook
	seen  []seenAddr
}

// seenAddr is an address already looked up for the current transaction:
// the same router, token or pair appears in many roles, and a repeated
// lookup in a million-entry map is a cache miss; scanning a few recent
// addresses is not.
type seenAddr struct {
	a      evm.Address
	direct bool
}

// maxSeen bounds the per-transaction memo; beyond it lookups just repeat.
const maxSeen = 32

// New returns a matcher reading table.
func New(table *watchlist.Table) *Matcher { return &Matcher{table: table} }

// Block appends to out the matches of every transaction of b, in
// transaction order and, within a transaction, by webhook id, and returns
// it. The table is read under its read lock for the whole block, so one
// block sees one state of the table.
func (m *Matcher) Block(b *record.Block, out []Match) []Match {
	m.table.Read(func(v watchlist.View) {
		cv := v.Chain(b.GetChainId())
		if cv.Empty() {
			return
		}
		for i, tx := range b.GetTransactions() {
			out = m.tx(v, cv, b.GetChainId(), i, tx, out)
		}
	})
	return out
}

func (m *Matcher) tx(v watchlist.View, cv watchlist.ChainView, chain uint64, i int, tx *record.Transaction, out []Match) []Match {
	m.cands = m.cands[:0]
	m.seen = m.seen[:0]
	m.visit(cv, tx.GetFrom(), true)
	m.visit(cv, tx.GetTo(), true)
	m.visit(cv, tx.GetContractAddress(), true)
	for _, l := range tx.GetLogs() {
		m.visit(cv, l.GetAddress(), true)
		if from, to, ok := evm.TransferParties(l.GetTopics(), l.GetData()); ok {
			m.visitAddr(cv, from, true)
			m.visitAddr(cv, to, true)
		}
	}
	for _, it := range tx.GetInternalTransactions() {
		m.visit(cv, it.GetFrom(), false)
		m.visit(cv, it.GetTo(), false)
	}
	if len(m.cands) == 0 {
		return out
	}
	m.hooks = m.hooks[:0]
	for _, c := range m.cands {
		w := v.Webhook(c.slot)
		switch {
		case w == nil, !w.Active, w.ChainID != chain:
		case !c.direct && !w.IncludeInternalTxs:
			// Internal-call parties count only for webhooks that include
			// internal transactions.
		case len(w.EventSignatures) > 0 && !hasTopic0(tx, w.EventSignatures):
		default:
			m.hooks = append(m.hooks, w)
		}
	}
	slices.SortFunc(m.hooks, func(a, b *watchlist.Webhook) int { return strings.Compare(a.ID, b.ID) })
	for _, w := range m.hooks {
		out = append(out, Match{Tx: i, Webhook: w})
	}
	return out
}

func (m *Matcher) visit(cv watchlist.ChainView, b []byte, direct bool) {
	if a, ok := evm.AddressFrom(b); ok {
		m.visitAddr(cv, a, direct)
	}
}

func (m *Matcher) visitAddr(cv watchlist.ChainView, a evm.Address, direct bool) {
	for i := range m.seen {
		if m.seen[i].a == a {
			if m.seen[i].direct || !direct {
				return
			}
			m.seen[i].direct = true
			goto lookup
		}
	}
	if len(m.seen) < maxSeen {
		m.seen = append(m.seen, seenAddr{a: a, direct: direct})
	}
lookup:
	m.buf = cv.Lookup(a, m.buf[:0])
next:
	for _, slot := range m.buf {
		for j := range m.cands {
			if m.cands[j].slot == slot {
				m.cands[j].direct = m.cands[j].direct || direct
				continue next
			}
		}
		m.cands = append(m.cands, candidate{slot: slot, direct: direct})
	}
}

// hasTopic0 reports whether a log of tx has a topic0 among sigs. Signatures
// are bytes (the API parsed their hex, in any case), so the comparison is
// case-insensitive by construction.
func hasTopic0(tx *record.Transaction, sigs [][]byte) bool {
	for _, l := range tx.GetLogs() {
		if len(l.GetTopics()) == 0 {
			continue
		}
		for _, s := range sigs {
			if bytes.Equal(l.GetTopics()[0], s) {
				return true
			}
		}
	}
	return false
}
