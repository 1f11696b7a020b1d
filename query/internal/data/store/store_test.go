package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/data/storetest"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

const chain = 43112

func newStore(t *testing.T, conn driver.Conn, reg prometheus.Registerer) *store.ClickHouse {
	t.Helper()
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	cfg := store.DefaultConfig()
	cfg.HeadCacheTTL = 0
	s, err := store.New(cfg, store.Deps{Logger: testenv.Logger(t), Registerer: reg, ChainIDs: []uint64{chain, 4337}})
	require.NoError(t, err)
	s.SetConn(conn)
	return s
}

// queriesRun is how many queries named name the store behind reg has run.
// newWindowStore is a store of chain whose settled blocks are those at
// least window blocks below the indexed head (Config.ReorgWindow), with
// the registry of its metrics.
func newWindowStore(t *testing.T, conn driver.Conn, window int) (*store.ClickHouse, *prometheus.Registry) {
	t.Helper()
	cfg := store.DefaultConfig()
	cfg.ReorgWindow = window
	reg := prometheus.NewRegistry()
	s, err := store.New(cfg, store.Deps{Logger: testenv.Logger(t), Registerer: reg, ChainIDs: []uint64{chain}})
	require.NoError(t, err)
	s.SetConn(conn)
	return s, reg
}

func queriesRun(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "moraine_query_clickhouse_query_duration_seconds" && m.GetLabel()[0].GetValue() == name {
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func numbers(bs []store.Block) []uint64 {
	out := make([]uint64, len(bs))
	for i, b := range bs {
		out[i] = b.Number
	}
	return out
}

func TestBlocksRangeAndFields(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	reg := prometheus.NewRegistry()
	s := newStore(t, conn, reg)
	c := ctx(t)
	rows := storetest.Chain(chain, 0, 50, 1, "a")
	ms, q := uint64(1_700_000_100_123), uint64(7477290)
	rows[50].TimestampMs, rows[50].MinDelayExcess = &ms, &q
	require.NoError(t, storetest.InsertBlocks(c, conn, rows))

	got, err := s.Blocks(c, chain, 50, 5)
	require.NoError(t, err)
	require.Equal(t, []uint64{50, 49, 48, 47, 46}, numbers(got))
	b := got[0]
	require.Equal(t, rows[50].Hash, b.Hash)
	require.Equal(t, rows[50].Parent, b.ParentHash)
	require.Equal(t, ms, *b.TimestampMs)
	require.Equal(t, q, *b.MinDelayExcess)
	require.Nil(t, got[1].TimestampMs)
	require.Nil(t, got[1].MinDelayExcess)
	require.Equal(t, "25000000000", b.BaseFee)
	require.Equal(t, rows[50].CumulativeTransactions, b.CumulativeTransactions)

	// The cursor is inclusive and the chain start ends the list.
	got, err = s.Blocks(c, chain, 2, 10)
	require.NoError(t, err)
	require.Equal(t, []uint64{2, 1, 0}, numbers(got))
	// Other chains are not mixed in.
	got, err = s.Blocks(c, 4337, 50, 10)
	require.NoError(t, err)
	require.Empty(t, got)
	require.Greater(t, testutil.CollectAndCount(reg, "moraine_query_clickhouse_query_duration_seconds"), 0)
}

// Blocks 0-49 were written before migration 5 (no block_lookup row) and 50-99
// after it, block 95 orphaned since (a removed row, then a new branch's): the
// lists read them all, and read blocks only for ranges that reach below 50.
func TestBlocksWrittenBeforeBlockLookup(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	reg := prometheus.NewRegistry()
	s := newStore(t, conn, reg)
	c := ctx(t)
	all := storetest.Chain(chain, 0, 99, 1, "a")
	require.NoError(t, storetest.InsertBlocks(c, conn, all[:50]))
	require.NoError(t, conn.Exec(c, "TRUNCATE TABLE block_lookup"))
	require.NoError(t, storetest.InsertBlocks(c, conn, all[50:]))
	orphan := all[95]
	orphan.Removed, orphan.Version = true, 2
	require.NoError(t, storetest.InsertBlocks(c, conn, []storetest.Block{orphan}))
	replaced := storetest.Chain(chain, 95, 95, 1, "b")[0]
	replaced.Version = 3
	require.NoError(t, storetest.InsertBlocks(c, conn, []storetest.Block{replaced}))
	older := func() float64 { return queriesRun(t, reg, "blocks_range_before_lookup") }

	// A page of 20 reads the range 54-99.
	got, err := s.Blocks(c, chain, 99, 20)
	require.NoError(t, err)
	require.Equal(t, uint64(99), got[0].Number)
	require.Equal(t, uint64(80), got[19].Number)
	require.Equal(t, replaced.Hash, got[4].Hash, "block 95 of the new branch")
	require.Equal(t, all[99].Hash, got[0].Hash)
	require.Equal(t, 0.0, older(), "blocks 54-99 have block_lookup rows")

	got, err = s.Blocks(c, chain, 70, 40)
	require.NoError(t, err)
	var want []uint64
	for n := 70; n > 30; n-- {
		want = append(want, uint64(n))
	}
	require.Equal(t, want, numbers(got))
	require.Equal(t, all[40].Hash, got[30].Hash)
	require.Equal(t, all[40].CumulativeTransactions, got[30].CumulativeTransactions)
	require.Positive(t, older(), "blocks 31-49 are read from blocks")

	b, err := s.BlockByNumber(c, chain, 20)
	require.NoError(t, err)
	require.Equal(t, all[20].Hash, b.Hash)
}

func TestBlocksGaps(t *testing.T) {
	// A replayed chain: only every 100th block exists.
	_, conn := testenv.ClickHouse(t)
	reg := prometheus.NewRegistry()
	s := newStore(t, conn, reg)
	c := ctx(t)
	require.NoError(t, storetest.InsertBlocks(c, conn, storetest.Chain(chain, 100, 100_000, 100, "a")))
	// A range of a sparse chain is read from block_lookup, then from blocks
	// for the numbers between its blocks (blockRange).
	rangeQueries := func() float64 {
		return queriesRun(t, reg, "blocks_range") + queriesRun(t, reg, "blocks_range_before_lookup")
	}

	got, err := s.Blocks(c, chain, 100_000, 10)
	require.NoError(t, err)
	require.Equal(t, []uint64{100_000, 99_900, 99_800, 99_700, 99_600, 99_500, 99_400, 99_300, 99_200, 99_100}, numbers(got))
	// The chain's spacing is learnt: the next page is one range.
	before := rangeQueries()
	got, err = s.Blocks(c, chain, 99_000, 10)
	require.NoError(t, err)
	require.Equal(t, uint64(98_100), got[9].Number)
	require.Equal(t, before+2, rangeQueries())
	// A cursor inside a gap.
	got, err = s.Blocks(c, chain, 99_999, 2)
	require.NoError(t, err)
	require.Equal(t, []uint64{99_900, 99_800}, numbers(got))
	// The tail: fewer rows than asked, down to the first block.
	got, err = s.Blocks(c, chain, 450, 100)
	require.NoError(t, err)
	require.Equal(t, []uint64{400, 300, 200, 100}, numbers(got))
	// A huge gap above the data.
	got, err = s.Blocks(c, chain, 1<<62, 3)
	require.NoError(t, err)
	require.Equal(t, []uint64{100_000, 99_900, 99_800}, numbers(got))
}

func TestReorgRowsAreNotServed(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	s := newStore(t, conn, nil)
	c := ctx(t)
	old := storetest.Chain(chain, 0, 20, 1, "old")
	require.NoError(t, storetest.InsertBlocks(c, conn, old))

	// Reorg: blocks 15..18 replaced by a new branch (higher version), and
	// 19..20 orphaned with no replacement (removed rows), in separate parts
	// so FINAL has to collapse them at read time.
	var repl []storetest.Block
	for _, b := range storetest.Chain(chain, 15, 18, 1, "new") {
		b.Version = 3
		repl = append(repl, b)
	}
	var removed []storetest.Block
	for _, b := range old[15:] {
		b.Removed, b.Version = true, 2
		removed = append(removed, b)
	}
	// The orphaned hashes are marked removed in block_hashes too (15..20);
	// the blocks rows of 19..20 only carry removed.
	require.NoError(t, storetest.InsertBlocks(c, conn, removed))
	require.NoError(t, storetest.InsertBlocks(c, conn, repl))

	got, err := s.Blocks(c, chain, 20, 10)
	require.NoError(t, err)
	require.Equal(t, []uint64{18, 17, 16, 15, 14, 13, 12, 11, 10, 9}, numbers(got))
	for _, b := range got[:4] {
		require.Equal(t, storetest.HashOf(chain, b.Number, "new"), b.Hash, "block %d", b.Number)
	}

	// By number: the replacement; removed numbers are gone.
	b, err := s.BlockByNumber(c, chain, 16)
	require.NoError(t, err)
	require.Equal(t, storetest.HashOf(chain, 16, "new"), b.Hash)
	_, err = s.BlockByNumber(c, chain, 19)
	require.ErrorIs(t, err, store.ErrNotFound)

	// By hash: a marked orphan has no number; the canonical hashes have
	// theirs.
	numberOf := func(h store.Hash) uint64 {
		t.Helper()
		n, err := s.BlockNumberByHash(c, chain, h)
		require.NoError(t, err)
		return n
	}
	_, err = s.BlockNumberByHash(c, chain, storetest.HashOf(chain, 16, "old"))
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, uint64(16), numberOf(storetest.HashOf(chain, 16, "new")))
	require.Equal(t, uint64(3), numberOf(storetest.HashOf(chain, 3, "old")))

	// A hash whose block_hashes row is still live but whose number now
	// holds another block (the writer has not marked it yet): its number,
	// where the canonical block carries another hash (the API checks it).
	stale := storetest.Chain(chain, 14, 14, 1, "stale")
	stale[0].Version = 0 // loses to the canonical row in blocks
	require.NoError(t, storetest.InsertBlocks(c, conn, stale))
	require.Equal(t, uint64(14), numberOf(storetest.HashOf(chain, 14, "stale")))
	b, err = s.BlockByNumber(c, chain, 14)
	require.NoError(t, err)
	require.Equal(t, storetest.HashOf(chain, 14, "old"), b.Hash)

	// A removed block that comes back (reorg back) with a higher version.
	back := old[19:20]
	back[0].Version = 4
	require.NoError(t, storetest.InsertBlocks(c, conn, back))
	b, err = s.BlockByNumber(c, chain, 19)
	require.NoError(t, err)
	require.Equal(t, storetest.HashOf(chain, 19, "old"), b.Hash)
}

// TestBlockTransactions reads a block's transactions as the processor
// writes them (block_transactions, migration 18), as processors wrote them
// before migration 18 (transactions_by_block only), and as a deployment
// upgrading past migration 16 has them: written to transactions before,
// then copied by the upgrade statement (run twice, as an operator may).
func TestBlockTransactions(t *testing.T) {
	for name, insert := range map[string]func(context.Context, driver.Conn, []storetest.Tx) error{
		"written":                       storetest.InsertTxs,
		"processed before migration 18": storetest.InsertTxRows,
		"copied": func(c context.Context, conn driver.Conn, txs []storetest.Tx) error {
			if err := storetest.InsertTransactions(c, conn, txs); err != nil {
				return err
			}
			if err := conn.Exec(c, schema.CopyTransactions); err != nil {
				return err
			}
			return conn.Exec(c, schema.CopyTransactions)
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, conn := testenv.ClickHouse(t)
			reg := prometheus.NewRegistry()
			s := newStore(t, conn, reg)
			c := ctx(t)
			blocks := storetest.Chain(chain, 1, 2, 1, "a")
			require.NoError(t, storetest.InsertBlocks(c, conn, blocks))
			b := blocks[1]
			var txs []storetest.Tx
			for i := range 5 {
				txs = append(txs, storetest.Tx{
					ChainID: chain, BlockNumber: b.Number, BlockHash: b.Hash, BlockTimestamp: b.Timestamp,
					Index: uint32(4 - i), Hash: storetest.HashOf(chain, uint64(100+i), "tx"), Type: 2,
					From: storetest.Address(1), To: storetest.Address(2), Value: "1", Gas: 21000,
					GasPrice: "25000000000", Nonce: uint64(i), Input: []byte{0xa9, 0x05, 0x9c, 0xbb, 1, 2, 3},
					Status: 1, GasUsed: 21000, Version: 1,
				})
			}
			// A transaction of an orphaned block at the same number is never mixed in.
			orphan := txs[0]
			orphan.BlockHash, orphan.Index = storetest.HashOf(chain, b.Number, "orphan"), 9
			require.NoError(t, insert(c, conn, append(txs, orphan)))

			block := store.Block{ChainID: chain, Number: b.Number, Hash: b.Hash, TxCount: 5}
			got, err := s.BlockTransactions(c, block, 0, 0)
			require.NoError(t, err)
			require.Len(t, got, 5)
			for i, tx := range got {
				require.Equal(t, uint32(i), tx.BlockIndex)
				require.Equal(t, []byte{0xa9, 0x05, 0x9c, 0xbb}, tx.Selector)
				require.Equal(t, uint64(7), tx.InputLen)
				require.Equal(t, storetest.Address(1), tx.From)
				require.Empty(t, tx.ContractAddress)
			}
			got, err = s.BlockTransactions(c, block, 2, 2)
			require.NoError(t, err)
			require.Equal(t, []uint32{2, 3}, []uint32{got[0].BlockIndex, got[1].BlockIndex})
			got, err = s.BlockTransactions(c, block, 5, 2)
			require.NoError(t, err)
			require.Empty(t, got, "past the last index")
			// Only a block without a block_transactions row is read from
			// transactions_by_block.
			if rows := queriesRun(t, reg, "block_transaction_rows"); (name == "written") != (rows == 0) {
				t.Errorf("%v reads of transactions_by_block", rows)
			}
		})
	}
}

// A settled block's transactions by number are one read of its
// block_transactions row, which carries the block's fields: the canonical
// block's (an orphaned branch's row at the same number is left out), the
// same transactions as the two reads give; a row written before the rows
// carried the block's fields is read with the block's header. Whatever the
// row cannot tell is left to those two reads: a block within the reorg
// window, a block without a row (no transactions, or processed before
// migration 18), two rows not known orphaned at one number.
func TestSettledBlockTransactions(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	c := ctx(t)
	s, reg := newWindowStore(t, conn, 10)

	// Blocks 0-59, settled below 50; block 15 was first another branch's.
	blocks := storetest.Chain(chain, 0, 59, 1, "a")
	for i := range blocks {
		ms, excess := blocks[i].Timestamp*1000+250, uint64(i)
		blocks[i].TimestampMs, blocks[i].MinDelayExcess, blocks[i].TxCount = &ms, &excess, 3
	}
	orphan := storetest.Block{ChainID: chain, Number: 15, Hash: storetest.HashOf(chain, 15, "orphan"), Timestamp: 1, Version: 1}
	orphanRemoved := orphan
	orphanRemoved.Removed, orphanRemoved.Version = true, 2
	require.NoError(t, storetest.InsertBlocks(c, conn, []storetest.Block{orphan, orphanRemoved}))
	require.NoError(t, storetest.InsertBlocks(c, conn, blocks))
	require.NoError(t, storetest.SetHead(c, conn, blocks[59], 1))
	txsOf := func(b storetest.Block) []storetest.Tx {
		var txs []storetest.Tx
		for i := range 3 {
			txs = append(txs, storetest.Tx{ChainID: chain, BlockNumber: b.Number, BlockHash: b.Hash, BlockTimestamp: b.Timestamp,
				BlockTimestampMs: b.TimestampMs, BlockMinDelayExcess: b.MinDelayExcess, Index: uint32(i),
				Hash: storetest.HashOf(chain, b.Number, fmt.Sprint("tx", i, string(b.Hash[:1]))), From: storetest.Address(1),
				To: storetest.Address(2), Value: "1", Gas: 21000, GasPrice: "25000000000", Status: 1, GasUsed: 21000, Version: 1})
		}
		return txs
	}
	var written []storetest.Tx
	for _, n := range []int{12, 15, 20, 55} {
		written = append(written, txsOf(blocks[n])...)
	}
	written = append(written, txsOf(orphan)...)
	// A second row at 20 that no reorg marked orphaned.
	stray := blocks[20]
	stray.Hash = storetest.HashOf(chain, 20, "stray")
	written = append(written, txsOf(stray)...)
	require.NoError(t, storetest.InsertTxs(c, conn, written))
	require.NoError(t, storetest.InsertTxsWithoutBlockFields(c, conn, txsOf(blocks[30])))
	require.NoError(t, storetest.InsertTxRows(c, conn, txsOf(blocks[31])))

	reads := func() float64 { return storetest.Queries(t, reg, "block_transactions") }
	for _, n := range []uint64{12, 15} {
		before := reads()
		b, txs, ok, err := s.SettledBlockTransactions(c, chain, n, 0, 0)
		require.NoError(t, err)
		require.True(t, ok, "block %d", n)
		require.Equal(t, 1.0, reads()-before, "block %d: one read", n)
		want := blocks[n]
		require.Equal(t, store.Block{ChainID: chain, Number: n, Hash: want.Hash, Timestamp: want.Timestamp,
			TimestampMs: want.TimestampMs, MinDelayExcess: want.MinDelayExcess}, b)
		two, err := s.BlockTransactions(c, store.Block{ChainID: chain, Number: n, Hash: want.Hash, TxCount: 3}, 0, 0)
		require.NoError(t, err)
		require.Len(t, txs, 3)
		require.Equal(t, two, txs, "block %d: the transactions the header and listing reads give", n)
	}
	_, txs, ok, err := s.SettledBlockTransactions(c, chain, 12, 1, 1)
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, txs, 1)
	require.Equal(t, uint32(1), txs[0].BlockIndex)

	before := reads()
	_, _, ok, err = s.SettledBlockTransactions(c, chain, 55, 0, 0)
	require.NoError(t, err)
	require.False(t, ok, "within the reorg window")
	require.Zero(t, reads()-before, "not read")
	for _, n := range []uint64{20, 31, 40} {
		_, _, ok, err = s.SettledBlockTransactions(c, chain, n, 0, 0)
		require.NoError(t, err)
		require.False(t, ok, "block %d", n)
	}
	// A listing written before the rows carried the block's fields is
	// served with the block's header: two reads, as before.
	headers := func() float64 { return storetest.Queries(t, reg, "blocks_lookup") }
	before, beforeHeaders := reads(), headers()
	old, txs, ok, err := s.SettledBlockTransactions(c, chain, 30, 0, 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 1.0, reads()-before)
	require.Equal(t, 1.0, headers()-beforeHeaders)
	require.Equal(t, blocks[30].Hash, old.Hash)
	require.Equal(t, blocks[30].Timestamp, old.Timestamp)
	require.Equal(t, blocks[30].TimestampMs, old.TimestampMs)
	require.Len(t, txs, 3)

	// Read together with a request for the same block by its hash, both
	// are answered.
	byHash, b, txs, ok, err := store.ReadSettledWithBlock(c, s, store.Block{ChainID: chain, Number: 12, Hash: blocks[12].Hash})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, blocks[12].Hash, b.Hash)
	require.Len(t, byHash, 3)
	require.Equal(t, byHash, txs)
}

// TestBlocksReadTogether: the reads that serve concurrent requests in one
// query (coalesce.go) give each block its own header and transactions, and
// never another block's at the same number (orphaned by a reorg); under
// concurrent requests, every request gets its own block.
func TestBlocksReadTogether(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	cfg := store.DefaultConfig()
	cfg.HeadCacheTTL, cfg.PointReadConcurrency = 0, 1
	reg := prometheus.NewRegistry()
	s, err := store.New(cfg, store.Deps{Logger: testenv.Logger(t), Registerer: reg, ChainIDs: []uint64{chain}})
	require.NoError(t, err)
	s.SetConn(conn)
	c := ctx(t)

	blocks := storetest.Chain(chain, 1, 12, 1, "a")
	orphans := storetest.Chain(chain, 1, 12, 1, "orphan")
	for i := range orphans {
		orphans[i].Removed = true
	}
	for i := range blocks {
		blocks[i].TxCount = uint32(blocks[i].Number)
	}
	require.NoError(t, storetest.InsertBlocks(c, conn, blocks))
	var txs []storetest.Tx
	for _, b := range blocks {
		// Block n has n transactions; its orphaned sibling one more.
		for i := range b.Number + 1 {
			tx := storetest.Tx{
				ChainID: chain, BlockNumber: b.Number, BlockHash: b.Hash, BlockTimestamp: b.Timestamp,
				Index: uint32(i), Hash: storetest.HashOf(chain, b.Number*100+i, "tx"), Type: 2,
				From: storetest.Address(b.Number), To: storetest.Address(2), Value: "1", Gas: 21000,
				GasPrice: "1", Nonce: i, Status: 1, GasUsed: 21000, Version: 1,
			}
			if i == b.Number {
				tx.BlockHash = storetest.HashOf(chain, b.Number, "orphan")
			}
			txs = append(txs, tx)
		}
	}
	require.NoError(t, storetest.InsertTxs(c, conn, txs))

	check := func(b store.Block, got []store.Tx, from uint32, limit int) {
		t.Helper()
		want := min(int(b.Number)-int(from), limit)
		require.Len(t, got, max(want, 0), "block %d from %d", b.Number, from)
		for i, tx := range got {
			require.Equal(t, from+uint32(i), tx.BlockIndex, "block %d", b.Number)
			require.Equal(t, storetest.HashOf(chain, b.Number*100+uint64(from)+uint64(i), "tx"), tx.Hash, "block %d", b.Number)
			require.Equal(t, storetest.Address(b.Number), tx.From)
		}
	}
	// One query for several blocks, as the coalescer sends it.
	var all []store.Block
	var numbers []uint64
	for _, b := range blocks {
		all = append(all, store.Block{ChainID: chain, Number: b.Number, Hash: b.Hash})
		numbers = append(numbers, b.Number)
	}
	byNumber, err := store.ReadBlocksTogether(c, s, chain, append(numbers, 99))
	require.NoError(t, err)
	require.Len(t, byNumber, len(blocks), "block 99 does not exist")
	for _, b := range blocks {
		require.Equal(t, b.Hash, byNumber[b.Number].Hash)
		require.Equal(t, b.Timestamp, byNumber[b.Number].Timestamp)
	}
	for _, page := range []struct {
		from  uint32
		limit int
	}{{0, 100}, {0, 3}, {2, 4}} {
		got, err := store.ReadBlockTxsTogether(c, s, all, page.from, page.limit)
		require.NoError(t, err)
		for i, b := range all {
			check(b, got[i], page.from, page.limit)
		}
	}
	// A block and its orphaned sibling in one read (a request that resolved
	// the number just before a reorg): each gets its own rows.
	sibling := store.Block{ChainID: chain, Number: 5, Hash: storetest.HashOf(chain, 5, "orphan")}
	got, err := store.ReadBlockTxsTogether(c, s, []store.Block{all[4], sibling}, 0, 100)
	require.NoError(t, err)
	check(all[4], got[0], 0, 100)
	require.Len(t, got[1], 1)
	require.Equal(t, storetest.HashOf(chain, 505, "tx"), got[1][0].Hash)

	// Concurrent requests, one read at a time: each gets its own.
	var wg sync.WaitGroup
	errs := make(chan error, 4*len(all))
	for range 4 {
		for _, want := range all {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, err := s.BlockByNumber(c, chain, want.Number)
				if err == nil && b.Hash != want.Hash {
					err = fmt.Errorf("block %d: hash %x, want %x", want.Number, b.Hash, want.Hash)
				}
				if err != nil {
					errs <- err
					return
				}
				got, err := s.BlockTransactions(c, b, 0, 100)
				if err == nil && len(got) != int(b.Number) {
					err = fmt.Errorf("block %d: %d transactions, want %d", b.Number, len(got), b.Number)
				}
				for i, tx := range got {
					if tx.Hash != storetest.HashOf(chain, b.Number*100+uint64(i), "tx") {
						err = fmt.Errorf("block %d: transaction %d is another block's", b.Number, i)
					}
				}
				if err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestHeads(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	cfg := store.DefaultConfig()
	cfg.HeadCacheTTL = time.Minute
	s, err := store.New(cfg, store.Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(),
		ChainIDs: []uint64{chain, 4337}, Now: clock})
	require.NoError(t, err)
	c := ctx(t)

	// Not connected: unavailable.
	_, err = s.Heads(c)
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.ErrorIs(t, s.Ready(c), store.ErrUnavailable)
	s.SetConn(conn)
	require.NoError(t, s.Ready(c))

	heads, err := s.Heads(c)
	require.NoError(t, err)
	require.False(t, heads[chain].Exists)
	require.False(t, heads[4337].Exists)

	blocks := storetest.Chain(chain, 0, 9, 1, "a")
	require.NoError(t, storetest.SetHead(c, conn, blocks[8], 1))
	require.NoError(t, storetest.SetHead(c, conn, blocks[9], 2))
	// Cached for the TTL.
	heads, err = s.Heads(c)
	require.NoError(t, err)
	require.False(t, heads[chain].Exists)

	now = now.Add(2 * time.Minute)
	heads, err = s.Heads(c)
	require.NoError(t, err)
	h := heads[chain]
	require.True(t, h.Exists)
	require.Equal(t, uint64(9), h.Number)
	require.Equal(t, blocks[9].Hash, h.Hash)
	require.Equal(t, now, h.AdvancedAt)
	require.False(t, heads[4337].Exists)
	require.Equal(t, time.Unix(1000, 0), heads[4337].AdvancedAt)

	// Unchanged head: AdvancedAt stays.
	now = now.Add(2 * time.Minute)
	heads, err = s.Heads(c)
	require.NoError(t, err)
	require.Equal(t, now.Add(-2*time.Minute), heads[chain].AdvancedAt)
}

func TestUnavailable(t *testing.T) {
	// A server that does not listen: every read is ErrUnavailable, never a
	// bug or a hang.
	cfg := store.DefaultConfig()
	cfg.QueryTimeout = 2 * time.Second
	s, err := store.New(cfg, store.Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(), ChainIDs: []uint64{chain}})
	require.NoError(t, err)
	conn := deadConn(t)
	s.SetConn(conn)
	c := ctx(t)
	_, err = s.Blocks(c, chain, 10, 10)
	require.True(t, errors.Is(err, store.ErrUnavailable), "%v", err)
	_, err = s.BlockByNumber(c, chain, 1)
	require.ErrorIs(t, err, store.ErrUnavailable)
	_, err = s.Heads(c)
	require.ErrorIs(t, err, store.ErrUnavailable)
}

func TestBlocksCache(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	now := time.Unix(1000, 0)
	reg := prometheus.NewRegistry()
	cfg := store.DefaultConfig()
	cfg.HeadCacheTTL = time.Second
	s, err := store.New(cfg, store.Deps{Logger: testenv.Logger(t), Registerer: reg, ChainIDs: []uint64{chain},
		Now: func() time.Time { return now }})
	require.NoError(t, err)
	s.SetConn(conn)
	c := ctx(t)
	require.NoError(t, storetest.InsertBlocks(c, conn, storetest.Chain(chain, 0, 30, 1, "a")))
	queries := func() int {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if mf.GetName() == "moraine_query_clickhouse_query_duration_seconds" && m.GetLabel()[0].GetValue() == "blocks_range" {
					return int(m.GetHistogram().GetSampleCount())
				}
			}
		}
		return 0
	}

	// Concurrent identical reads share one query.
	errs := make(chan error, 20)
	for range 20 {
		go func() {
			bs, err := s.Blocks(c, chain, 30, 11)
			if err == nil && len(bs) != 11 {
				err = errors.New("short page")
			}
			errs <- err
		}()
	}
	for range 20 {
		require.NoError(t, <-errs)
	}
	require.Equal(t, 1, queries())

	// Within the TTL a reorg is not seen yet; after it, it is.
	r := storetest.Chain(chain, 30, 30, 1, "b")
	r[0].Version = 2
	require.NoError(t, storetest.InsertBlocks(c, conn, r))
	bs, err := s.Blocks(c, chain, 30, 11)
	require.NoError(t, err)
	require.Equal(t, storetest.HashOf(chain, 30, "a"), bs[0].Hash)
	now = now.Add(2 * time.Second)
	bs, err = s.Blocks(c, chain, 30, 11)
	require.NoError(t, err)
	require.Equal(t, storetest.HashOf(chain, 30, "b"), bs[0].Hash)
	require.Equal(t, 2, queries())
	// Another cursor or size is another entry.
	_, err = s.Blocks(c, chain, 29, 11)
	require.NoError(t, err)
	require.Equal(t, 3, queries())
}

// TestBlocksBetween: the first and last block of a time range (the export
// jobs' date ranges), none for a range without blocks.
func TestBlocksBetween(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	s := newStore(t, conn, prometheus.NewRegistry())
	// Timestamps 1_700_000_000 + 2n.
	require.NoError(t, storetest.InsertBlocks(t.Context(), conn, storetest.Chain(43114, 1, 100, 1, "between")))
	lo, hi, ok, err := s.BlocksBetween(t.Context(), 43114, 1_700_000_020, 1_700_000_041)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, [2]uint64{10, 20}, [2]uint64{lo, hi})
	_, _, ok, err = s.BlocksBetween(t.Context(), 43114, 1_800_000_000, 1_800_000_100)
	require.NoError(t, err)
	require.False(t, ok)
}
