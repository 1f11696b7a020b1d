package api

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/server/pagetoken"
)

// Page tokens of the transaction-history lists: pagetoken.Envelope (signed,
// versioned, expiring, keyed like the block lists' tokens) under the domain
// "moraine-history-page-token", whose body holds uvarints and raw bytes:
//
//	historyAddressList: chain id, list, roles, address (20 bytes), order
//	                    (0 desc, 1 asc), startBlock+1, endBlock+1 (0: absent),
//	                    next row (block, tx index, position, sub-index),
//	                    window hint (blocks)
//	historyLatest:      chain id, status filter, next transaction (block, index)
//	historyAllLatest:   network filter, status filter, count, then per chain
//	                    (chain id, block, index) of its next transaction
//
// A token carries the position of the next row to serve, not an offset:
// rows appended meanwhile never shift a later page. It is bound to its list
// and every filter of the request that made it (another combination gets a
// 400).
type historyKind uint8

const (
	historyAddressList historyKind = 1
	historyLatest      historyKind = 2
	historyAllLatest   historyKind = 3
)

// maxTokenChains bounds the positions of an all-chains token.
const maxTokenChains = 1000

var errHistoryToken = errors.New("api: invalid page token")

// historyToken is the decoded body of a history list token.
type historyToken struct {
	kind historyKind

	// historyAddressList
	chainID    uint64
	list       uint8
	roles      uint8
	address    store.Address
	asc        bool
	blockRange blockRange
	next       store.Seek
	window     uint64

	// historyLatest, historyAllLatest
	status    uint8
	network   uint8
	positions []txPosition
}

// txPosition is a chain's next transaction in a latest-transactions list.
type txPosition struct {
	chainID uint64
	block   uint64
	index   uint32
}

type historyTokens struct {
	env *pagetoken.Envelope
}

func newHistoryTokens(codec *pagetoken.Codec) *historyTokens {
	return &historyTokens{env: codec.Envelope("moraine-history-page-token")}
}

func optional(v uint64, present bool) uint64 {
	if !present {
		return 0
	}
	return v + 1
}

func (c *historyTokens) encode(t historyToken) string {
	var b []byte
	u := func(v uint64) { b = binary.AppendUvarint(b, v) }
	switch t.kind {
	case historyAddressList:
		u(t.chainID)
		b = append(b, t.list, t.roles)
		b = append(b, t.address[:]...)
		order := byte(0)
		if t.asc {
			order = 1
		}
		b = append(b, order)
		u(optional(t.blockRange.start, t.blockRange.hasStart))
		u(optional(t.blockRange.end, t.blockRange.hasEnd))
		u(t.next.Block)
		u(uint64(t.next.TxIndex))
		u(uint64(t.next.Position))
		u(uint64(t.next.Sub))
		u(t.window)
	case historyLatest:
		u(t.chainID)
		b = append(b, t.status)
		u(t.next.Block)
		u(uint64(t.next.TxIndex))
	case historyAllLatest:
		b = append(b, t.network, t.status)
		u(uint64(len(t.positions)))
		for _, p := range t.positions {
			u(p.chainID)
			u(p.block)
			u(uint64(p.index))
		}
	}
	return c.env.Seal(uint8(t.kind), b)
}

func (c *historyTokens) decode(s string, want historyKind) (historyToken, error) {
	r, _, err := c.env.Open(s, uint8(want))
	if err != nil {
		return historyToken{}, errHistoryToken
	}
	t := historyToken{kind: want}
	bad := false
	u32 := func() uint32 {
		v := r.Uvarint()
		if v > math.MaxUint32 {
			bad = true
		}
		return uint32(v)
	}
	switch want {
	case historyAddressList:
		t.chainID = r.Uvarint()
		t.list, t.roles = r.Byte(), r.Byte()
		r.Fixed(t.address[:])
		t.asc = r.Byte() == 1
		if s := r.Uvarint(); s > 0 {
			t.blockRange.start, t.blockRange.hasStart = s-1, true
		}
		if e := r.Uvarint(); e > 0 {
			t.blockRange.end, t.blockRange.hasEnd = e-1, true
		}
		t.next.Block = r.Uvarint()
		t.next.TxIndex, t.next.Position, t.next.Sub = u32(), u32(), u32()
		t.window = r.Uvarint()
	case historyLatest:
		t.chainID = r.Uvarint()
		t.status = r.Byte()
		t.next.Block = r.Uvarint()
		t.next.TxIndex = u32()
	case historyAllLatest:
		t.network, t.status = r.Byte(), r.Byte()
		n := r.Uvarint()
		if n > maxTokenChains {
			return historyToken{}, errHistoryToken
		}
		for range n {
			t.positions = append(t.positions, txPosition{chainID: r.Uvarint(), block: r.Uvarint(), index: u32()})
		}
	default:
		return historyToken{}, errHistoryToken
	}
	if bad || r.Done() != nil {
		return historyToken{}, errHistoryToken
	}
	return t, nil
}
