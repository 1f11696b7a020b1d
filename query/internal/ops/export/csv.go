package export

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/hex"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/query/internal/data/store"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// History is what an export reads; *store.ClickHouse implements it.
type History interface {
	Heads(ctx context.Context) (map[uint64]store.Head, error)
	AddressList(ctx context.Context, r store.ListRequest) (store.ListPage, error)
	BlocksBetween(ctx context.Context, chainID, from, to uint64) (lo, hi uint64, ok bool, err error)
}

// csvHeader are the export's columns: one row per transaction (once, however
// many of the addresses took part), in time order; addresses names those of
// the request that took part. Amounts are wei in decimal; fee is gasUsed x
// gasPrice; blockTimestamp is Unix seconds, blockTime the same in RFC 3339
// (UTC); to is empty for a contract creation, which names the contract in
// contractAddress; methodId is the input's first four bytes.
var csvHeader = []string{"chainId", "blockNumber", "blockTimestamp", "blockTime", "blockHash", "txHash", "txIndex", "from", "to",
	"contractAddress", "value", "gasLimit", "gasUsed", "gasPrice", "fee", "status", "type", "nonce", "methodId", "addresses"}

// partSize is the size at which a part of the file is written.
const partSize = 1 << 20

// streamPage is how many rows each (chain, address) stream reads at a time.
const streamPage = 200

// outcome is what an export produced.
type outcome struct {
	parts       uint32
	rows, bytes uint64
	// nextDate is set when the export stopped before that day (the plan's
	// limit); firstDayTooBig when that was its first day with transactions.
	nextDate       string
	firstDayTooBig bool
}

// exporter runs one export.
type exporter struct {
	h    History
	s    spec
	put  func(ctx context.Context, part uint32, data []byte) error
	tick func(ctx context.Context) // called as it reads (progress)
}

// stream is one (chain, address)'s transactions, oldest first.
type stream struct {
	chain   uint64
	address string // the request's, checksummed
	req     store.ListRequest
	buf     []store.IndexRow
	done    bool
}

func (s *stream) head(ctx context.Context, h History) (*store.IndexRow, error) {
	if len(s.buf) == 0 && !s.done {
		req := s.req
		req.Limit = streamPage + 1
		page, err := h.AddressList(ctx, req)
		if err != nil {
			return nil, err
		}
		s.buf = page.Rows
		s.req.Window = page.Window
		if len(s.buf) > streamPage {
			next := s.buf[streamPage].Seek
			s.req.Start = &next
			s.buf = s.buf[:streamPage]
		} else {
			s.done = true
		}
	}
	if len(s.buf) == 0 {
		return nil, nil
	}
	return &s.buf[0], nil
}

// before orders rows of the merged export: time, chain, block, position.
func before(a *store.IndexRow, ca uint64, b *store.IndexRow, cb uint64) bool {
	switch {
	case a.Block.Timestamp != b.Block.Timestamp:
		return a.Block.Timestamp < b.Block.Timestamp
	case ca != cb:
		return ca < cb
	case a.Block.Number != b.Block.Number:
		return a.Block.Number < b.Block.Number
	}
	return a.TxIndex < b.TxIndex
}

// run exports s: every stream merged in time order, cut into parts at
// partSize and at every day's start, so that a day that does not fit the
// limit is left out whole.
func (x *exporter) run(ctx context.Context) (outcome, error) {
	first, _ := time.Parse(time.DateOnly, x.s.First)
	last, _ := time.Parse(time.DateOnly, x.s.Last)
	end := last.AddDate(0, 0, 1)
	heads, err := x.h.Heads(ctx)
	if err != nil {
		return outcome{}, err
	}
	var streams []*stream
	for _, c := range x.s.Chains {
		id, _ := strconv.ParseUint(c, 10, 64)
		head := heads[id]
		if !head.Exists {
			continue
		}
		lo, hi, ok, err := x.h.BlocksBetween(ctx, id, uint64(first.Unix()), uint64(end.Unix()))
		if err != nil {
			return outcome{}, err
		}
		if !ok || lo > head.Number {
			continue
		}
		hi = min(hi, head.Number)
		for _, a := range x.s.Addresses {
			addr, _ := store.ParseAddress(a)
			streams = append(streams, &stream{chain: id, address: evm.Address(addr).Checksum(), req: store.ListRequest{
				ChainID: id, Address: addr, List: schema.ListTransactions, Asc: true, Lo: lo, Hi: hi}})
		}
	}

	var o outcome
	var cur bytes.Buffer
	w := csv.NewWriter(&cur)
	_ = w.Write(csvHeader)
	flush := func() error {
		w.Flush()
		if cur.Len() == 0 {
			return nil
		}
		if err := x.put(ctx, o.parts, cur.Bytes()); err != nil {
			return err
		}
		o.parts++
		o.bytes += uint64(cur.Len())
		cur.Reset()
		return nil
	}
	day, firstDay := "", ""
	var dayStart outcome
	for {
		// The next transaction: the earliest head, with every stream that
		// holds it (the same transaction of several addresses).
		var next *store.IndexRow
		var chain uint64
		for _, s := range streams {
			r, err := s.head(ctx, x.h)
			if err != nil {
				return outcome{}, err
			}
			if r != nil && (next == nil || before(r, s.chain, next, chain)) {
				next, chain = r, s.chain
			}
		}
		if next == nil {
			break
		}
		row := *next
		var addrs []string
		for _, s := range streams {
			if r, _ := s.head(ctx, x.h); r != nil && s.chain == chain && r.Block.Number == row.Block.Number && r.TxIndex == row.TxIndex {
				addrs = append(addrs, s.address)
				s.buf = s.buf[1:]
			}
		}
		x.tick(ctx)
		t := time.Unix(int64(row.Block.Timestamp), 0).UTC()
		if t.Before(first) || !t.Before(end) {
			continue // the block range is a superset of the days
		}
		if d := t.Format(time.DateOnly); d != day {
			if err := flush(); err != nil {
				return outcome{}, err
			}
			day, dayStart = d, o
			if firstDay == "" {
				firstDay = d
			}
		}
		if o.rows+1 > uint64(x.s.Limit) {
			dayStart.nextDate, dayStart.firstDayTooBig = day, day == firstDay
			return dayStart, nil
		}
		sort.Strings(addrs)
		if err := w.Write(csvRecord(chain, &row, t, addrs)); err != nil {
			return outcome{}, err
		}
		o.rows++
		if cur.Len() >= partSize {
			if err := flush(); err != nil {
				return outcome{}, err
			}
		}
	}
	if err := flush(); err != nil {
		return outcome{}, err
	}
	return o, nil
}

// csvRecord is one CSV line.
func csvRecord(chain uint64, r *store.IndexRow, t time.Time, addrs []string) []string {
	addr := func(b []byte) string {
		a, ok := evm.AddressFrom(b)
		if !ok {
			return ""
		}
		return a.Checksum()
	}
	fee := ""
	if p, ok := new(big.Int).SetString(r.GasPrice, 10); ok {
		fee = p.Mul(p, new(big.Int).SetUint64(r.GasUsed)).String()
	}
	method := ""
	if len(r.Selector) == 4 && len(r.To) > 0 { // a call, not a creation
		method = "0x" + hex.EncodeToString(r.Selector)
	}
	return []string{
		strconv.FormatUint(chain, 10), strconv.FormatUint(r.Block.Number, 10), strconv.FormatUint(r.Block.Timestamp, 10),
		t.Format(time.RFC3339), r.BlockHash.Hex(), r.TxHash.Hex(), strconv.FormatUint(uint64(r.TxIndex), 10),
		addr(r.From), addr(r.To), addr(r.Contract), r.Value, strconv.FormatUint(r.Gas, 10), strconv.FormatUint(r.GasUsed, 10),
		r.GasPrice, fee, strconv.Itoa(int(r.Status)), strconv.Itoa(int(r.TxType)), strconv.FormatUint(r.Nonce, 10), method,
		strings.Join(addrs, ";"),
	}
}
