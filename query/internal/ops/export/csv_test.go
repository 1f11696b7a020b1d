package export

import (
	"context"
	"encoding/csv"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/query/internal/data/store"
)

// fakeHistory serves address lists from memory: rows of (chain, address)
// in list order. gate, when set, is waited on before every page.
type fakeHistory struct {
	mu    sync.Mutex
	rows  map[string][]store.IndexRow
	heads map[uint64]store.Head
	gate  chan struct{}
	pages int
}

func key(chain uint64, a store.Address) string { return fmt.Sprint(chain, a) }

func (f *fakeHistory) Heads(context.Context) (map[uint64]store.Head, error) { return f.heads, nil }

func (f *fakeHistory) BlocksBetween(_ context.Context, chain, from, to uint64) (lo, hi uint64, ok bool, err error) {
	lo = ^uint64(0)
	for k, rs := range f.rows {
		if !strings.HasPrefix(k, fmt.Sprint(chain)+" ") {
			continue
		}
		for _, r := range rs {
			if r.Block.Timestamp >= from && r.Block.Timestamp < to {
				lo, hi, ok = min(lo, r.Block.Number), max(hi, r.Block.Number), true
			}
		}
	}
	return lo, hi, ok, nil
}

func (f *fakeHistory) AddressList(ctx context.Context, r store.ListRequest) (store.ListPage, error) {
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return store.ListPage{}, ctx.Err()
		}
	}
	f.mu.Lock()
	f.pages++
	f.mu.Unlock()
	var out []store.IndexRow
	for _, row := range f.rows[key(r.ChainID, r.Address)] {
		if row.Block.Number < r.Lo || row.Block.Number > r.Hi || r.Start != nil && row.Seek.Compare(*r.Start) < 0 {
			continue
		}
		if len(out) == r.Limit {
			break
		}
		out = append(out, row)
	}
	return store.ListPage{Rows: out}, nil
}

// day0 is 2026-03-01.
var day0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func addr(n byte) store.Address {
	var a store.Address
	a[19] = n
	return a
}

// tx is a transaction of chain at block n, at offset from day0, touching
// the addresses.
func (f *fakeHistory) tx(chain, n uint64, at time.Duration, idx uint32, addrs ...store.Address) {
	b := store.Block{ChainID: chain, Number: n, Timestamp: uint64(day0.Add(at).Unix()), Hash: store.Hash{byte(n)}}
	for _, a := range addrs {
		f.rows[key(chain, a)] = append(f.rows[key(chain, a)], store.IndexRow{Seek: store.Seek{Block: n, TxIndex: idx}, Block: b,
			BlockHash: b.Hash, TxHash: store.Hash{byte(n), byte(idx)}, From: addrs[0][:], To: a[:], Value: "1", GasPrice: "25",
			GasUsed: 21000, Gas: 30000, Status: 1, TxType: 2})
		if h := f.heads[chain]; n > h.Number {
			f.heads[chain] = store.Head{ChainID: chain, Exists: true, Number: n}
		}
	}
}

func newFake() *fakeHistory {
	return &fakeHistory{rows: map[string][]store.IndexRow{}, heads: map[uint64]store.Head{}}
}

// export runs an export of s and returns its parts.
func export(t *testing.T, h History, s spec) (outcome, []string) {
	t.Helper()
	var parts []string
	x := &exporter{h: h, s: s, tick: func(context.Context) {}, put: func(_ context.Context, part uint32, data []byte) error {
		require.Equal(t, uint32(len(parts)), part)
		parts = append(parts, string(data))
		return nil
	}}
	o, err := x.run(t.Context())
	require.NoError(t, err)
	return o, parts
}

func lines(t *testing.T, parts []string) [][]string {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(strings.Join(parts, ""))).ReadAll()
	require.NoError(t, err)
	return recs
}

func TestExportMergesInTimeOrder(t *testing.T) {
	f := newFake()
	a, b := addr(0xa), addr(0xb)
	f.tx(43114, 10, 1*time.Hour, 0, a)
	f.tx(43114, 20, 2*time.Hour, 3, a, b) // both: listed once
	f.tx(43113, 5, 90*time.Minute, 0, b)  // another chain, in between
	f.tx(43114, 30, 25*time.Hour, 0, b)   // the next day
	f.tx(43114, 40, 49*time.Hour, 0, a)   // after lastDate
	f.tx(43114, 2, -time.Hour, 0, a)      // before firstDate
	s := spec{Addresses: []string{"0x" + fmt.Sprintf("%040x", 0xa), "0x" + fmt.Sprintf("%040x", 0xb)}, Chains: []string{"43114", "43113"},
		First: "2026-03-01", Last: "2026-03-02", Limit: 100}
	o, parts := export(t, f, s)
	require.Equal(t, uint64(4), o.rows)
	require.Empty(t, o.nextDate)
	recs := lines(t, parts)
	require.Equal(t, csvHeader, recs[0])
	var got []string
	for _, r := range recs[1:] {
		got = append(got, r[0]+"/"+r[1]+" "+r[3]+" "+r[19])
	}
	ca, cb := "0x000000000000000000000000000000000000000A", "0x000000000000000000000000000000000000000b"
	require.Equal(t, []string{
		"43114/10 2026-03-01T01:00:00Z " + ca,
		"43113/5 2026-03-01T01:30:00Z " + cb,
		"43114/20 2026-03-01T02:00:00Z " + ca + ";" + cb,
		"43114/30 2026-03-02T01:00:00Z " + cb,
	}, got)
	first := recs[1]
	require.Equal(t, []string{"43114", "10"}, first[:2])
	require.Equal(t, "525000", first[14], "fee = gasUsed x gasPrice")
	// The header, then one part per day.
	require.Equal(t, uint32(3), o.parts)
	require.Equal(t, uint64(len(strings.Join(parts, ""))), o.bytes)
}

func TestExportStopsAtADay(t *testing.T) {
	f := newFake()
	a := addr(0xa)
	for d := range 3 {
		for i := range 3 {
			f.tx(43114, uint64(100*d+i+1), time.Duration(d)*24*time.Hour+time.Duration(i)*time.Minute, 0, a)
		}
	}
	s := spec{Addresses: []string{"0x" + fmt.Sprintf("%040x", 0xa)}, Chains: []string{"43114"}, First: "2026-03-01", Last: "2026-03-03"}
	// 7 fit: days 1 and 2 (6), not day 3.
	s.Limit = 7
	o, parts := export(t, f, s)
	require.Equal(t, "2026-03-03", o.nextDate)
	require.False(t, o.firstDayTooBig)
	require.Equal(t, uint64(6), o.rows)
	require.Len(t, lines(t, parts[:o.parts]), 7, "the header and two days")
	require.Equal(t, uint64(len(strings.Join(parts[:o.parts], ""))), o.bytes)
	// Exactly the limit: complete.
	s.Limit = 9
	o, _ = export(t, f, s)
	require.Empty(t, o.nextDate)
	require.Equal(t, uint64(9), o.rows)
	// The first day alone is too big.
	s.Limit = 2
	o, _ = export(t, f, s)
	require.True(t, o.firstDayTooBig)
	require.Equal(t, "2026-03-01", o.nextDate)
	// Nothing in the range: the header only.
	s.First, s.Last = "2026-02-01", "2026-02-02"
	o, parts = export(t, f, s)
	require.Equal(t, uint64(0), o.rows)
	require.Equal(t, [][]string{csvHeader}, lines(t, parts))
}
