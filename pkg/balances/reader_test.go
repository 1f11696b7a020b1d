package balances

import (
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/testenv"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
	"github.com/moraine-data/moraine/schemas/record"
)

// testChain writes blocks as the sink does (blocks rows, level-0 deltas,
// the first block) and keeps what is canonical, to compute the expected
// balances from.
type testChain struct {
	t       *testing.T
	conn    driver.Conn
	chainID uint64
	version uint64
	// canonical is the canonical block of each number.
	canonical map[uint64]*record.Block
	// Rows not inserted yet, per INSERT statement (flush).
	pending map[string][][]any
}

func newTestChain(t *testing.T, conn driver.Conn, chainID uint64) *testChain {
	return &testChain{t: t, conn: conn, chainID: chainID, canonical: map[uint64]*record.Block{}, pending: map[string][][]any{}}
}

// exec queues rows for q; flush inserts them (one INSERT per statement:
// on 18.16 every INSERT costs tens of milliseconds).
func (c *testChain) exec(q string, rows [][]any) { c.pending[q] = append(c.pending[q], rows...) }

func (c *testChain) flush() {
	c.t.Helper()
	for q, rows := range c.pending {
		c.insert(q, rows)
	}
	clear(c.pending)
}

func (c *testChain) insert(q string, rows [][]any) {
	c.t.Helper()
	b, err := c.conn.PrepareBatch(c.t.Context(), q)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Append(r...); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		c.t.Fatal(q, err)
	}
}

// write writes b (a block of the chain) as canonical.
func (c *testChain) write(b *record.Block) {
	c.version++
	var rows Rows
	FromBlock(&rows, b)
	var deltas [][]any
	for _, d := range rows.Deltas {
		deltas = append(deltas, []any{string(d.Key[:]), d.Amount, c.version})
	}
	if len(deltas) > 0 {
		c.exec("INSERT INTO balances ("+BalanceColumns+")", deltas)
	}
	for _, d := range rows.Deltas {
		k := schema.PairKeyOf(&d.Key)
		c.exec("INSERT INTO balance_pairs (pair_key, version)", [][]any{{string(k[:]), c.version}})
	}
	for _, n := range rows.NFTs {
		c.exec("INSERT INTO nft_transfers (nft_key, entry, version)", [][]any{{string(n.Key[:]), string(n.Entry), c.version}})
	}
	c.exec("INSERT INTO balance_progress ("+ProgressColumns+")",
		[][]any{{c.chainID, schema.ProgressFirstBlock, b.Number, ProgressVersion(schema.ProgressFirstBlock, b.Number)}})
	c.exec("INSERT INTO blocks (chain_id, number, hash, removed, version)", [][]any{{c.chainID, b.Number, string(b.Hash), uint8(0), c.version}})
	c.canonical[b.Number] = b
}

// orphan marks the canonical block at number removed, as a reorg event does.
func (c *testChain) orphan(number uint64) {
	c.version++
	b := c.canonical[number]
	c.exec("INSERT INTO blocks (chain_id, number, hash, removed, version)", [][]any{{c.chainID, number, string(b.Hash), uint8(1), c.version}})
	delete(c.canonical, number)
}

// expected is what holder holds at block at, from the canonical blocks.
func (c *testChain) expected(holder evm.Address, at uint64, kinds []uint8) []string {
	sums := map[schema.BalancePair]*big.Int{}
	for n, b := range c.canonical {
		if n > at {
			continue
		}
		var rows Rows
		FromBlock(&rows, b)
		for _, d := range rows.Deltas {
			if d.Key.Holder() != holder || (len(kinds) > 0 && !slices.Contains(kinds, d.Key.Pair().Kind)) {
				continue
			}
			v, _ := new(big.Int).SetString(d.Amount, 10)
			if s, ok := sums[d.Key.Pair()]; ok {
				s.Add(s, v)
			} else {
				sums[d.Key.Pair()] = v
			}
		}
	}
	var out []string
	for p, v := range sums {
		if v.Sign() != 0 {
			out = append(out, describeHolding(Holding{BalancePair: p, Balance: v}))
		}
	}
	slices.Sort(out)
	return out
}

func describeHolding(h Holding) string {
	s := fmt.Sprintf("%d %x#%s %s", h.Kind, h.Token[19], evm.Decimal(h.TokenID[:]), h.Balance)
	if h.Partial {
		s += " partial"
	}
	return s
}

func describeResult(r Result) []string {
	var out []string
	for _, h := range r.Holdings {
		out = append(out, describeHolding(h))
	}
	slices.Sort(out)
	return out
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 2)) }

// sim makes blocks of random transfers among a few holders.
type sim struct {
	rng     *rand.Rand
	chainID uint64
	holders []evm.Address
}

func (s *sim) party() evm.Address {
	if s.rng.IntN(8) == 0 {
		return evm.Address{} // a mint or a burn
	}
	return s.holders[s.rng.IntN(len(s.holders))]
}

// block is a block at number with random transfers; salt tells apart
// blocks of one number on two branches.
func (s *sim) block(number uint64, salt byte) *record.Block {
	b := &record.Block{ChainId: s.chainID, Number: number, Hash: append(wordN(number)[:31], salt)}
	for range 1 + s.rng.IntN(3) {
		tx := &record.Transaction{Status: 1}
		if s.rng.IntN(10) == 0 {
			tx.Status = 0
		}
		for range 1 + s.rng.IntN(3) {
			from, to := s.party(), s.party()
			var l *record.Log
			switch s.rng.IntN(5) {
			case 0, 1:
				l = erc20Log([]evm.Address{usd, multi}[s.rng.IntN(2)], from, to, big.NewInt(s.rng.Int64N(1e6)+1))
			case 2:
				l = erc721Log(art, from, to, uint64(s.rng.IntN(6)))
			case 3:
				l = single1155Log([]evm.Address{items, multi}[s.rng.IntN(2)], alice, from, to, uint64(s.rng.IntN(3)), uint64(s.rng.IntN(50)))
			default:
				l = batch1155Log(items, bob, from, to, []uint64{0, 1, 2}, []uint64{uint64(s.rng.IntN(9)), 1, uint64(s.rng.IntN(9))})
			}
			l.LogIndex = uint32(len(tx.Logs))
			tx.Logs = append(tx.Logs, l)
		}
		b.Transactions = append(b.Transactions, tx)
	}
	return b
}

// Balances at any block equal the sum of the canonical transfers up to it,
// whichever levels the read takes them from: before any bucket is summed,
// with the rollups halfway, and with every settled bucket summed, across
// level-1 and level-2 bucket boundaries, through orphaned blocks and a
// block that became canonical again, and after everything is written twice.
func TestBalancesAtAnyBlockIntegration(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	ctx := t.Context()
	const chainID = 9
	c := newTestChain(t, conn, chainID)
	s := &sim{rng: rand.New(rand.NewPCG(1, 2)), chainID: chainID, holders: []evm.Address{alice, bob, carol}}

	// Block numbers: block 1 (the chain's first), dense runs across the
	// first level-1 buckets and across the first level-2 boundary, sparse
	// ones over three level-2 buckets, and a run at the head.
	numbers := []uint64{1}
	for n := uint64(2); n < 4200; n += 1 + uint64(s.rng.IntN(40)) {
		numbers = append(numbers, n)
	}
	for n := uint64(1<<20 - 3000); n < 1<<20+3000; n += 1 + uint64(s.rng.IntN(60)) {
		numbers = append(numbers, n)
	}
	for n := uint64(1<<20 + 5000); n < 3<<20; n += 1 + uint64(s.rng.IntN(40000)) {
		numbers = append(numbers, n)
	}
	head := uint64(3<<20 + 2000)
	for n := uint64(3 << 20); n <= head; n += 1 + uint64(s.rng.IntN(30)) {
		numbers = append(numbers, n)
	}
	var reorged []uint64
	written := time.Now()
	for i, n := range numbers {
		c.write(s.block(n, 0))
		switch {
		case i%17 == 5: // replaced by another block
			c.orphan(n)
			c.write(s.block(n, 1))
			reorged = append(reorged, n)
		case i%29 == 7: // replaced, then canonical again
			first := c.canonical[n]
			c.orphan(n)
			c.write(s.block(n, 1))
			c.orphan(n)
			c.write(first)
			reorged = append(reorged, n)
		case i == len(numbers)-3: // the head's last blocks: orphaned, no replacement yet
			c.orphan(n)
		}
	}
	c.flush()
	t.Logf("%d blocks up to %d, %d of them reorged, written in %s", len(numbers), head, len(reorged), time.Since(written))

	db := Conn{Conn: conn, Timeout: time.Minute}
	reader := NewReader(db, BlockTable{DB: db}, nil)
	var clock time.Time
	reader.now = func() time.Time { clock = clock.Add(progressTTL); return clock } // progress read each time
	remembering := NewReader(db, BlockTable{DB: db}, nil)
	remembering.now = reader.now
	remembering.Remember(1000, 100)
	// Points to read at: every holder, at the bucket boundaries, the
	// reorged blocks, and random blocks.
	at := []uint64{0, 1, 1023, 1024, 1025, 2047, 1<<20 - 1, 1 << 20, 1<<20 + 1, 2 << 20, head, head + 5}
	at = append(at, reorged[:5]...)
	for range 30 {
		at = append(at, s.rng.Uint64N(head+1))
	}
	check := func(stage string, at []uint64) {
		t.Helper()
		for _, b := range at {
			for _, h := range s.holders {
				got, err := reader.At(ctx, Query{ChainID: chainID, Holder: h, Block: b})
				if err != nil {
					t.Fatal(err)
				}
				if want := c.expected(h, b, nil); !slices.Equal(describeResult(got), want) {
					t.Fatalf("%s: holder %x at block %d:\n%s\nwant:\n%s", stage, h[19], b, strings.Join(describeResult(got), "\n"), strings.Join(want, "\n"))
				}
			}
		}
		// Pages of two listable holdings, each after the last, give the
		// listable holdings of the whole answer, for some holders and
		// blocks: with the directory read a window at a time, and
		// remembered (of every kind, or of one).
		pageAt := at[:min(len(at), 6)]
		for _, b := range at[min(len(at), 6):] {
			if b+3000 >= head { // past the summed buckets: from the holders' summed states
				pageAt = append(pageAt, b)
			}
		}
		for _, b := range pageAt {
			for _, h := range s.holders {
				for _, v := range []struct {
					r     *Reader
					kinds []uint8
				}{{reader, nil}, {remembering, nil}, {remembering, []uint8{3}}, {reader, []uint8{2}}} {
					whole, err := reader.At(ctx, Query{ChainID: chainID, Holder: h, Block: b, Kinds: v.kinds})
					if err != nil {
						t.Fatal(err)
					}
					var want, got []string
					for _, x := range whole.Holdings {
						if x.Listable() {
							want = append(want, describeHolding(x))
						}
					}
					q := Query{ChainID: chainID, Holder: h, Block: b, Kinds: v.kinds, Limit: 2}
					if v.r == remembering {
						q.Head = &Head{Number: head, Hash: [32]byte{byte(stage[0])}}
					}
					for pages := 0; ; pages++ {
						if pages > 100 {
							t.Fatal("paging does not end")
						}
						res, err := v.r.At(ctx, q)
						if err != nil {
							t.Fatal(err)
						}
						n := 0
						for _, x := range res.Holdings {
							if x.Listable() {
								got = append(got, describeHolding(x))
								n++
								last := x.BalancePair
								q.After = &last
							}
						}
						if n > 2 || (res.More && n != 2) {
							t.Fatalf("a page of %d listable holdings, more %v", n, res.More)
						}
						if !res.More {
							break
						}
					}
					if !slices.Equal(got, want) {
						t.Fatalf("%s: holder %x at %d, kinds %v, remembered %v, pages:\n%s\nwhole:\n%s", stage, h[19], b, v.kinds, v.r == remembering,
							strings.Join(got, "\n"), strings.Join(want, "\n"))
					}
				}
			}
		}
		t.Logf("%s: %d reads compared, pages too", stage, len(at)*len(s.holders))
		if slices.Max(at) < head {
			return
		}
		// Filters: kinds, and tokens.
		got, err := reader.At(ctx, Query{ChainID: chainID, Holder: bob, Block: head, Kinds: []uint8{3}, Tokens: []evm.Address{multi}})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, line := range c.expected(bob, head, []uint8{3}) {
			if strings.HasPrefix(line, fmt.Sprintf("3 %x#", multi[19])) {
				want = append(want, line)
			}
		}
		if !slices.Equal(describeResult(got), want) || len(want) == 0 {
			t.Fatalf("%s: bob's ERC-1155 multi: %v, want %v", stage, describeResult(got), want)
		}
	}
	// Before any sum, only the first blocks are within reach of one read.
	check("no sums", []uint64{0, 1, 5, 1023, 1024, 1025, 2047, 4000, reorged[0], reorged[1]})
	if _, err := reader.At(ctx, Query{ChainID: chainID, Holder: alice, Block: head}); !errors.Is(err, ErrBehind) {
		t.Fatalf("a read far past the sums: %v", err)
	}

	roller := NewRoller(db, RollerConfig{Settle: 100, ScanRows: 2000}, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), "test")
	start := time.Now()
	if err := roller.Roll(ctx, chainID, 1<<20+1500); err != nil {
		t.Fatal(err)
	}
	t.Logf("rolled halfway in %s", time.Since(start))
	p, err := ReadProgress(ctx, db, chainID)
	if err != nil || p.First != 1 || p.Buckets != (1<<20+1500+1-100)>>10 || p.Epochs != 1 {
		t.Fatalf("progress halfway: %+v, %v", p, err)
	}
	var halfway []uint64
	for _, b := range at {
		if b <= 1<<20+1500 {
			halfway = append(halfway, b)
		}
	}
	check("halfway", halfway)

	if err := roller.Roll(ctx, chainID, head); err != nil {
		t.Fatal(err)
	}
	if p, err = ReadProgress(ctx, db, chainID); err != nil || p.Buckets != (head+1-100)>>10 || p.Epochs != 3 {
		t.Fatalf("progress at the head: %+v, %v", p, err)
	}
	check("summed", at)
	// Some holders' states are read and taken; one of more rows than the
	// budget of 8 per remembered pair (800) reads windows instead.
	st := remembering.states
	if st.reads == 0 || st.hits == 0 {
		t.Fatalf("summed states: %d read, %d taken: the pages at the head did not read from them", st.reads, st.hits)
	}
	t.Logf("summed states: %d read, %d taken, %d reads of a holder's too large", st.reads, st.hits, st.wides)

	// Everything again: the same rows, the same sums (a redelivery, a
	// second roller after a rebalance).
	for n, b := range c.canonical {
		c.version--
		_ = n
		c.write(b)
	}
	c.flush()
	again := NewRoller(db, RollerConfig{Settle: 100, ScanRows: 2000}, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), "test")
	if err := again.rollBuckets(ctx, chainID, 0, 63); err != nil {
		t.Fatal(err)
	}
	if err := again.rollEpoch(ctx, chainID, 1); err != nil {
		t.Fatal(err)
	}
	check("written twice", at)
}
