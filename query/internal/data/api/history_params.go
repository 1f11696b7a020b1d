package api

import (
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/server/queryparam"
)

var (
	addressParam = regexp.MustCompile(`^0[xX][0-9a-fA-F]{40}$`)
	txHashParam  = regexp.MustCompile(`^0[xX][0-9a-fA-F]{64}$`)
)

// Enum values of the transaction routes' query parameters (OpenAPI
// SortOrder, TransactionStatus, CurrencyCode).
var (
	sortOrders = []string{"asc", "desc"}
	txStatuses = []string{"failed", "success"}
	currencies = []string{"usd", "eur", "aud", "cad", "chf", "clp", "cny", "czk", "dkk", "gbp", "hkd", "huf", "jpy", "nzd"}
)

// msgAddress is the hosted service's message for a malformed address, the
// one the webhook routes use too.
const msgAddress = "Invalid address format"

// address reads the address path parameter (0x + 40 hex digits, any case).
func (p *params) address() store.Address {
	raw := p.c.Param("address")
	if !addressParam.MatchString(raw) {
		p.fail(msgAddress)
		return store.Address{}
	}
	a, _ := store.ParseAddress(raw)
	return a
}

// txHash reads the txHash path parameter.
func (p *params) txHash() store.Hash {
	raw := p.c.Param("txHash")
	if !txHashParam.MatchString(raw) {
		p.fail("txHash must be a 0x-prefixed 32-byte transaction hash")
		return store.Hash{}
	}
	h, _ := store.ParseHash("0x" + raw[2:])
	return h
}

// blockRange is the startBlock (inclusive) and endBlock (exclusive) query
// parameters.
type blockRange struct {
	start, end       uint64
	hasStart, hasEnd bool
}

// blockRange reads startBlock and endBlock ("number" in the spec: a
// non-negative integer, in JavaScript's Number form). endBlock must be
// above startBlock when both are given.
func (p *params) blockRange() blockRange {
	var r blockRange
	r.start, r.hasStart = p.blockNumber("startBlock")
	r.end, r.hasEnd = p.blockNumber("endBlock")
	if r.hasStart && r.hasEnd && r.end <= r.start {
		p.fail("endBlock must be greater than startBlock")
	}
	return r
}

// maxBlockNumber is the largest startBlock and endBlock accepted, the
// largest int64 (the documented bound of the messages below).
const maxBlockNumber = 1<<63 - 1

func (p *params) blockNumber(name string) (uint64, bool) {
	raw, ok := p.c.GetQuery(name)
	if !ok {
		return 0, false
	}
	// A plain decimal integer is read exactly: as a float64 (Number()),
	// 9223372036854775807 rounds up to 2^63 and was refused as greater
	// than itself.
	if t := strings.TrimSpace(raw); t != "" && strings.Trim(t, "0123456789") == "" {
		n, err := strconv.ParseUint(t, 10, 64)
		if err != nil || n > maxBlockNumber {
			p.fail("%s must not be greater than %d", name, uint64(maxBlockNumber))
			return 0, false
		}
		return n, true
	}
	v := queryparam.Number(raw)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0) || v != math.Trunc(v):
		p.fail("%s must be an integer number", name)
	case v < 0:
		p.fail("%s must not be less than 0", name)
	case v > maxBlockNumber:
		p.fail("%s must not be greater than %d", name, uint64(maxBlockNumber))
	default:
		return uint64(v), true
	}
	return 0, false
}

// bounds turns the range into the inclusive block bounds of a list read on
// a chain whose head is head; ok is false when the range holds no block.
func (r blockRange) bounds(head uint64) (lo, hi uint64, ok bool) {
	hi = head
	if r.hasEnd {
		if r.end == 0 {
			return 0, 0, false
		}
		hi = min(hi, r.end-1)
	}
	if r.hasStart {
		lo = r.start
	}
	return lo, hi, lo <= hi
}
