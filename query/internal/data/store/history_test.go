package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/data/storetest"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
	"github.com/moraine-data/moraine/schemas/record"
)

// historyEnv is a chain of 2,000 blocks with an address index: a busy
// address with two transactions in every block (one of them a transfer
// only), a quiet one with five transactions, and rows of an orphaned block.
type historyEnv struct {
	s          *store.ClickHouse
	reg        *prometheus.Registry
	busy, calm store.Address
	blocks     []storetest.Block
}

const historyBlocks = 2000

func newHistoryEnv(t *testing.T, scanRows int) *historyEnv {
	return newHistoryEnvVia(t, scanRows, storetest.InsertIndex)
}

// newHistoryEnvVia writes the index rows with insert.
func newHistoryEnvVia(t *testing.T, scanRows int, insert func(context.Context, driver.Conn, []storetest.IndexRow) error) *historyEnv {
	_, conn := testenv.ClickHouse(t)
	c := ctx(t)
	reg := prometheus.NewRegistry()
	cfg := store.DefaultConfig()
	cfg.HeadCacheTTL = 0
	cfg.AddressScanRows = scanRows
	s, err := store.New(cfg, store.Deps{Logger: testenv.Logger(t), Registerer: reg, ChainIDs: []uint64{chain}})
	require.NoError(t, err)
	s.SetConn(conn)
	e := &historyEnv{s: s, reg: reg}
	copy(e.busy[:], storetest.Address(1))
	copy(e.calm[:], storetest.Address(2))
	e.blocks = storetest.Chain(chain, 0, historyBlocks-1, 1, "a")
	require.NoError(t, storetest.InsertBlocks(c, conn, e.blocks))
	var rows []storetest.IndexRow
	row := func(a store.Address, b storetest.Block, idx uint32, roles uint8) storetest.IndexRow {
		return storetest.IndexRow{ChainID: chain, Address: a[:], List: schema.ListTransactions, Block: b.Number, TxIndex: idx,
			BlockHash: b.Hash, TxHash: storetest.HashOf(chain, b.Number*100+uint64(idx), "tx"), Roles: roles,
			From: a[:], To: storetest.Address(9), Value: "1", Gas: 21000, GasPrice: "25", Status: 1, Version: 1}
	}
	for _, b := range e.blocks {
		rows = append(rows, row(e.busy, b, 0, schema.RoleSender), row(e.busy, b, 3, schema.RoleTransferParty))
	}
	for _, n := range []uint64{3, 500, 501, 1500, 1999} {
		rows = append(rows, row(e.calm, e.blocks[n], 1, schema.RoleRecipient))
	}
	// Block 1000 of another branch: its rows must never be served.
	orphan := storetest.Block{ChainID: chain, Number: 1000, Hash: storetest.HashOf(chain, 1000, "orphan")}
	rows = append(rows, row(e.busy, orphan, 7, schema.RoleSender), row(e.calm, orphan, 1, schema.RoleRecipient),
		// and at the same positions as canonical rows (every read order
		// must keep the canonical one).
		row(e.busy, orphan, 0, schema.RoleSender), row(e.busy, orphan, 3, schema.RoleTransferParty))
	// Every row twice, as a redelivered batch writes them.
	require.NoError(t, insert(c, conn, rows))
	require.NoError(t, insert(c, conn, rows))
	return e
}

func seeks(rows []store.IndexRow) []store.Seek {
	out := make([]store.Seek, len(rows))
	for i, r := range rows {
		out[i] = r.Seek
	}
	return out
}

// walk pages through a list, pageSize at a time, the way the API does
// (pageSize+1 rows; the extra one is the next page's start), and returns
// every row once, with the number of pages and the window hints.
func (e *historyEnv) walk(t *testing.T, r store.ListRequest, pageSize int) (all []store.IndexRow, pages int, windows []uint64) {
	t.Helper()
	r.Limit = pageSize + 1
	for pages = 1; pages < 10_000; pages++ {
		p, err := e.s.AddressList(ctx(t), r)
		require.NoError(t, err)
		windows = append(windows, p.Window)
		if len(p.Rows) <= pageSize {
			return append(all, p.Rows...), pages, windows
		}
		all = append(all, p.Rows[:pageSize]...)
		next := p.Rows[pageSize].Seek
		r.Start, r.Window = &next, p.Window
	}
	t.Fatal("no end")
	return
}

func TestAddressListQuietAddress(t *testing.T) {
	e := newHistoryEnv(t, 16384)
	r := store.ListRequest{ChainID: chain, Address: e.calm, List: schema.ListTransactions, Lo: 0, Hi: historyBlocks - 1}
	all, pages, _ := e.walk(t, r, 2)
	require.Equal(t, []store.Seek{{Block: 1999, TxIndex: 1}, {Block: 1500, TxIndex: 1}, {Block: 501, TxIndex: 1},
		{Block: 500, TxIndex: 1}, {Block: 3, TxIndex: 1}}, seeks(all), "newest first, no orphan, no copies")
	require.Equal(t, 3, pages)
	require.Equal(t, e.blocks[1500].Hash, all[1].Block.Hash)
	require.Equal(t, e.blocks[1500].Timestamp, all[1].Block.Timestamp)
	require.Equal(t, storetest.Address(9), all[0].To)

	r.Asc = true
	all, _, _ = e.walk(t, r, 10)
	require.Equal(t, []store.Seek{{Block: 3, TxIndex: 1}, {Block: 500, TxIndex: 1}, {Block: 501, TxIndex: 1},
		{Block: 1500, TxIndex: 1}, {Block: 1999, TxIndex: 1}}, seeks(all))

	// A block range: [500, 1500] inclusive (the API's endBlock is exclusive).
	r.Lo, r.Hi = 500, 1500
	all, _, _ = e.walk(t, r, 10)
	require.Equal(t, []uint64{500, 501, 1500}, blockNumbers(all))
	// A role filter.
	r = store.ListRequest{ChainID: chain, Address: e.calm, List: schema.ListTransactions, Hi: historyBlocks - 1, Roles: schema.RoleSender}
	all, _, _ = e.walk(t, r, 10)
	require.Empty(t, all)
}

func blockNumbers(rows []store.IndexRow) []uint64 {
	out := make([]uint64, len(rows))
	for i, r := range rows {
		out[i] = r.Block.Number
	}
	return out
}

func TestAddressListBusyAddressInWindows(t *testing.T) {
	// A budget of 64 rows: the busy address (4,000 rows) is read in windows.
	e := newHistoryEnv(t, 64)
	r := store.ListRequest{ChainID: chain, Address: e.busy, List: schema.ListTransactions, Hi: historyBlocks - 1}
	all, pages, windows := e.walk(t, r, 25)
	require.Len(t, all, 2*historyBlocks, "every row once, the orphan's excluded")
	require.Equal(t, 160, pages)
	for i := 1; i < len(all); i++ {
		require.Equal(t, -1, all[i].Seek.Compare(all[i-1].Seek), "strictly newest first at %d", i)
	}
	// After the first page, one read per page: the hint covers a page.
	for _, w := range windows[:len(windows)-1] {
		require.Greater(t, w, uint64(0))
		require.Less(t, w, uint64(40))
	}
	// Oldest first, roles filter: the transfer-only rows (index 3).
	r.Asc, r.Roles = true, schema.RoleTransferParty
	all, _, _ = e.walk(t, r, 100)
	require.Len(t, all, historyBlocks)
	require.Equal(t, store.Seek{Block: 0, TxIndex: 3}, all[0].Seek)
	require.Equal(t, store.Seek{Block: historyBlocks - 1, TxIndex: 3}, all[len(all)-1].Seek)
}

// A deployment upgrading past migration 8 copies its address_index rows
// into address_lists with the upgrade statement (run twice here, as an
// operator may): the lists read as if the processor had written them.
func TestAddressListAfterUpgradeCopy(t *testing.T) {
	e := newHistoryEnvVia(t, 64, func(c context.Context, conn driver.Conn, rows []storetest.IndexRow) error {
		if err := storetest.InsertAddressIndex(c, conn, rows); err != nil {
			return err
		}
		return conn.Exec(c, schema.CopyAddressIndex)
	})
	r := store.ListRequest{ChainID: chain, Address: e.busy, List: schema.ListTransactions, Hi: historyBlocks - 1}
	all, _, _ := e.walk(t, r, 25)
	require.Len(t, all, 2*historyBlocks, "every row once, the orphan's excluded")
	for i := 1; i < len(all); i++ {
		require.Equal(t, -1, all[i].Seek.Compare(all[i-1].Seek), "strictly newest first at %d", i)
	}
	require.Equal(t, storetest.HashOf(chain, (historyBlocks-1)*100+3, "tx"), all[0].TxHash)
	require.Equal(t, e.blocks[historyBlocks-1].Hash, all[0].Block.Hash)
	r.Asc, r.Roles = true, schema.RoleTransferParty
	all, _, _ = e.walk(t, r, 100)
	require.Len(t, all, historyBlocks)
	r = store.ListRequest{ChainID: chain, Address: e.calm, List: schema.ListTransactions, Hi: historyBlocks - 1}
	all, _, _ = e.walk(t, r, 2)
	require.Equal(t, []uint64{1999, 1500, 501, 500, 3}, blockNumbers(all))
	require.Equal(t, storetest.Address(9), all[0].To)
	active, err := e.s.HasActivity(ctx(t), chain, e.calm)
	require.NoError(t, err)
	require.True(t, active)
}

// Deep pages cost what the first does: the same number of ClickHouse reads.
func TestAddressListDeepPageReads(t *testing.T) {
	e := newHistoryEnv(t, 64)
	r := store.ListRequest{ChainID: chain, Address: e.busy, List: schema.ListTransactions, Hi: historyBlocks - 1, Limit: 11}
	reads := func() float64 {
		return storetest.Queries(t, e.reg, "address_list") + storetest.Queries(t, e.reg, "blocks_lookup")
	}
	var deep store.ListRequest
	for page := 0; page < 150; page++ {
		p, err := e.s.AddressList(ctx(t), r)
		require.NoError(t, err)
		next := p.Rows[10].Seek
		r.Start, r.Window = &next, p.Window
		if page == 100 {
			deep = r
		}
	}
	start := reads()
	_, err := e.s.AddressList(ctx(t), deep)
	require.NoError(t, err)
	require.Equal(t, 2.0, reads()-start, "page 101: one index read and one block read")
}

func TestTxByHashAndLatest(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	c := ctx(t)
	cfg := store.DefaultConfig()
	cfg.HeadCacheTTL = 0
	cfg.LatestScanBlocks = 40
	s, err := store.New(cfg, store.Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(), ChainIDs: []uint64{chain}})
	require.NoError(t, err)
	s.SetConn(conn)
	blocks := storetest.Chain(chain, 0, 99, 1, "a")
	require.NoError(t, storetest.InsertBlocks(c, conn, blocks))
	var txs []storetest.Tx
	var hashes []storetest.TxLookupRow
	for _, b := range blocks {
		for i := range b.TxCount {
			tx := storetest.Tx{ChainID: chain, BlockNumber: b.Number, BlockHash: b.Hash, Index: i, Hash: storetest.HashOf(chain, b.Number*10+uint64(i), "tx"),
				From: storetest.Address(1), To: storetest.Address(2), Value: "1", Status: uint8((b.Number + uint64(i)) % 2),
				Input: []byte{0xa9, 0x05, 0x9c, 0xbb, 7}, Version: 1}
			txs = append(txs, tx)
			hashes = append(hashes, storetest.TxLookupRow{ChainID: chain, Hash: tx.Hash, BlockHash: b.Hash, Block: b.Number, TxIndex: i,
				Detail: &record.TxDetail{From: tx.From, To: tx.To, Value: tx.Value, Input: tx.Input, Status: uint32(tx.Status),
					Transfers: []*record.TokenTransfer{{Kind: 1, Token: storetest.Address(7), From: tx.From, To: tx.To, LogIndex: 3, Value: "9"}}},
				Version: 1})
		}
	}
	// A transaction first mined in an orphaned block 50, then in block 52.
	moved := storetest.HashOf(chain, 52*10+0, "tx")
	orphan := storetest.HashOf(chain, 50, "orphan")
	hashes = append(hashes, storetest.TxLookupRow{ChainID: chain, Hash: moved, BlockHash: orphan, Block: 50, TxIndex: 0,
		Detail: &record.TxDetail{Value: "orphaned"}, Version: 1})
	txs = append(txs, storetest.Tx{ChainID: chain, BlockNumber: 50, BlockHash: orphan, Index: 0, Hash: moved, Status: 1, Version: 1})
	// Every row twice (a redelivery).
	require.NoError(t, storetest.InsertTxs(c, conn, append(txs, txs...)))
	require.NoError(t, storetest.InsertTxLookup(c, conn, append(hashes, hashes...)))

	ref, full, err := s.Transaction(c, chain, moved)
	require.NoError(t, err)
	require.Equal(t, uint64(52), ref.Block.Number)
	require.Equal(t, blocks[52].Hash, ref.Block.Hash)
	require.Equal(t, moved, full.Hash)
	require.Equal(t, "1", full.Value, "the canonical placement's detail, not the orphan's")
	require.Equal(t, []byte{0xa9, 0x05, 0x9c, 0xbb, 7}, full.Input)
	require.Equal(t, []byte{0xa9, 0x05, 0x9c, 0xbb}, full.Selector)
	require.Equal(t, []store.Transfer{{Kind: 1, Token: storetest.Address(7), From: storetest.Address(1), To: storetest.Address(2), LogIndex: 3, Value: "9"}},
		full.Transfers)
	_, _, err = s.Transaction(c, chain, storetest.HashOf(chain, 1, "nope"))
	require.ErrorIs(t, err, store.ErrNotFound)
	// Several hashes in one read, as concurrent requests are read: each gets
	// the blocks that included it, the moved one both, the unknown none.
	placed, err := store.ReadTxsTogether(c, s, chain, []store.Hash{txs[0].Hash, moved, storetest.HashOf(chain, 1, "nope"), txs[5].Hash})
	require.NoError(t, err)
	require.Equal(t, [][]uint64{{txs[0].BlockNumber}, {50, 52}, nil, {txs[5].BlockNumber}}, placed)

	// Latest: newest first from an inclusive position, no orphan, no copy.
	got, resume, err := s.LatestTxs(c, chain, store.Seek{Block: 99, TxIndex: ^uint32(0)}, 5, store.StatusAny)
	require.NoError(t, err)
	require.Nil(t, resume)
	var pos []string
	for _, x := range got {
		pos = append(pos, fmt.Sprintf("%d/%d", x.Block.Number, x.Tx.BlockIndex))
	}
	require.Equal(t, []string{"98/1", "98/0", "97/0", "95/1", "95/0"}, pos)
	got, _, err = s.LatestTxs(c, chain, store.Seek{Block: 95, TxIndex: 0}, 3, store.StatusAny)
	require.NoError(t, err)
	require.Equal(t, "95/0", fmt.Sprintf("%d/%d", got[0].Block.Number, got[0].Tx.BlockIndex))
	all, _, err := s.LatestTxs(c, chain, store.Seek{Block: 60, TxIndex: ^uint32(0)}, 1000, store.StatusAny)
	require.NoError(t, err)
	require.Len(t, blockNumbersOf(all), 39, "stops at LatestScanBlocks (blocks 60..21: 39 transactions) with what it found")
	_, resume, err = s.LatestTxs(c, chain, store.Seek{Block: 60, TxIndex: ^uint32(0)}, 1000, store.StatusAny)
	require.NoError(t, err)
	require.Equal(t, &store.Seek{Block: 20, TxIndex: ^uint32(0)}, resume)
	failed, _, err := s.LatestTxs(c, chain, store.Seek{Block: 99, TxIndex: ^uint32(0)}, 4, store.StatusFailed)
	require.NoError(t, err)
	for _, x := range failed {
		require.Equal(t, uint8(0), x.Tx.Status)
	}
	require.Len(t, failed, 4)
	for _, x := range all {
		require.NotEqual(t, orphan, x.Block.Hash)
	}
}

func blockNumbersOf(txs []store.LatestTx) []uint64 {
	out := make([]uint64, len(txs))
	for i, x := range txs {
		out[i] = x.Block.Number
	}
	return out
}

// Rows of an orphaned block at the same positions as canonical ones: a read
// that stops between them must not lose the canonical row, whatever the
// page size and order.
func TestAddressListBranchesAtOnePosition(t *testing.T) {
	e := newHistoryEnv(t, 16384)
	for _, asc := range []bool{false, true} {
		for size := 1; size <= 4; size++ {
			r := store.ListRequest{ChainID: chain, Address: e.busy, List: schema.ListTransactions, Lo: 995, Hi: 1004, Asc: asc}
			all, _, _ := e.walk(t, r, size)
			require.Len(t, all, 20, "asc %v, page size %d", asc, size)
			for _, x := range all {
				require.Equal(t, e.blocks[x.Block.Number].Hash, x.BlockHash)
			}
		}
	}
}

// An address whose rows read first are all in orphaned blocks is still
// found active by its canonical ones; one with only orphaned rows is not.
func TestHasActivityPastOrphanedBlocks(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	c := ctx(t)
	cfg := store.DefaultConfig()
	cfg.HeadCacheTTL = 0
	reg := prometheus.NewRegistry()
	s, err := store.New(cfg, store.Deps{Logger: testenv.Logger(t), Registerer: reg, ChainIDs: []uint64{chain}})
	require.NoError(t, err)
	s.SetConn(conn)
	blocks := storetest.Chain(chain, 0, 99, 1, "a")
	require.NoError(t, storetest.InsertBlocks(c, conn, blocks))
	var active, orphanOnly, idle store.Address
	copy(active[:], storetest.Address(1))
	copy(orphanOnly[:], storetest.Address(2))
	copy(idle[:], storetest.Address(3))
	row := func(a store.Address, number uint64, hash store.Hash) storetest.IndexRow {
		return storetest.IndexRow{ChainID: chain, Address: a[:], List: schema.ListTransactions, Block: number, BlockHash: hash,
			TxHash: storetest.HashOf(chain, number, "tx"), Roles: schema.RoleSender, From: a[:], Value: "1", Status: 1, Version: 1}
	}
	// 40 orphaned blocks below the one canonical row, in one insert: one
	// part, read in key order, so the orphans come first.
	var rows []storetest.IndexRow
	for n := uint64(1); n <= 40; n++ {
		orphan := storetest.HashOf(chain, n, "orphan")
		rows = append(rows, row(active, n, orphan), row(orphanOnly, n, orphan))
	}
	rows = append(rows, row(active, 90, blocks[90].Hash))
	require.NoError(t, storetest.InsertIndex(c, conn, rows))

	for _, tc := range []struct {
		name string
		a    store.Address
		want bool
	}{{"canonical row after 40 orphaned blocks", active, true}, {"orphaned rows only", orphanOnly, false}, {"no rows", idle, false}} {
		got, err := s.HasActivity(c, chain, tc.a)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}
}

// A run of empty blocks longer than LatestScanBlocks: pages stop at the
// scan bound with fewer transactions (none, inside the run) and a resume
// position, each page moves LatestScanBlocks further down, and the list
// ends at the chain's first block with every transaction served once.
//
// Blocks 0-9 were processed before migration 18 (no block_transactions row):
// their transactions are read from transactions_by_block, the others' are
// not.
func TestLatestTxsThroughEmptyBlocks(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	c := ctx(t)
	cfg := store.DefaultConfig()
	cfg.HeadCacheTTL = 0
	cfg.LatestScanBlocks = 40
	reg := prometheus.NewRegistry()
	s, err := store.New(cfg, store.Deps{Logger: testenv.Logger(t), Registerer: reg, ChainIDs: []uint64{chain}})
	require.NoError(t, err)
	s.SetConn(conn)
	blocks := storetest.Chain(chain, 0, 199, 1, "a")
	var older, newer []storetest.Tx
	want := 0
	for i := range blocks {
		b := &blocks[i]
		if b.Number >= 10 && b.Number < 190 {
			b.TxCount = 0
		}
		for j := range b.TxCount {
			tx := storetest.Tx{ChainID: chain, BlockNumber: b.Number, BlockHash: b.Hash, Index: j,
				Hash: storetest.HashOf(chain, b.Number*10+uint64(j), "tx"), Status: 1, Version: 1}
			if b.Number < 10 {
				older = append(older, tx)
			} else {
				newer = append(newer, tx)
			}
			want++
		}
	}
	require.NoError(t, storetest.InsertBlocks(c, conn, blocks))
	require.NoError(t, storetest.InsertTxRows(c, conn, older))
	require.NoError(t, storetest.InsertTxs(c, conn, newer))

	const size = 5
	start := store.Seek{Block: 199, TxIndex: ^uint32(0)}
	seen := map[store.Hash]bool{}
	var sizes []int
	for pages := 0; ; pages++ {
		require.Less(t, pages, 20, "the list does not end")
		got, resume, err := s.LatestTxs(c, chain, start, size+1, store.StatusAny)
		require.NoError(t, err)
		var next *store.Seek
		switch {
		case len(got) > size:
			next = &store.Seek{Block: got[size].Block.Number, TxIndex: got[size].Tx.BlockIndex}
			got = got[:size]
		case resume != nil:
			require.Less(t, resume.Block, start.Block, "a resume position moves down")
			next = resume
		}
		sizes = append(sizes, len(got))
		for _, x := range got {
			require.False(t, seen[x.Tx.Hash], "served twice")
			seen[x.Tx.Hash] = true
		}
		if next == nil {
			break
		}
		start = *next
	}
	require.Len(t, seen, want)
	require.Contains(t, sizes, 0, "a page inside the run of empty blocks is empty and continues")
	require.Equal(t, 2.0, queriesRun(t, reg, "block_transaction_rows"), "only the two pages of blocks 0-9 read transactions_by_block")
}

// Rows of blocks deeper than the reorg window that carry their block's
// timestamps are served without reading their blocks, unless the block was
// ever orphaned (orphaned_blocks, filled from blocks by migration 7's view):
// an orphaned branch's rows never appear, a block that became canonical
// again is checked and served, and rows within the window are checked.
func TestAddressListSettledRows(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	c := ctx(t)
	s, reg := newWindowStore(t, conn, 10)

	// Blocks 0-99; block 15 was first another branch's (orphaned), block 17
	// was orphaned and then became canonical again. Versions follow the
	// order the sink writes them in.
	blocks := storetest.Chain(chain, 0, 99, 1, "a")
	for i := range blocks {
		ms, excess := blocks[i].Timestamp*1000+250, uint64(i)
		blocks[i].Version, blocks[i].TimestampMs, blocks[i].MinDelayExcess = 10, &ms, &excess
		blocks[i].BaseFee = fmt.Sprint(25_000_000_000 + i)
	}
	orphan := storetest.Block{ChainID: chain, Number: 15, Hash: storetest.HashOf(chain, 15, "orphan"), Timestamp: 1, Version: 1}
	orphanRemoved := orphan
	orphanRemoved.Removed, orphanRemoved.Version = true, 2
	back := blocks[17]
	back.Removed, back.Version = true, 5
	require.NoError(t, storetest.InsertBlocks(c, conn, []storetest.Block{orphan, orphanRemoved, back}))
	require.NoError(t, storetest.InsertBlocks(c, conn, blocks))
	require.NoError(t, storetest.SetHead(c, conn, blocks[99], 1))

	var a store.Address
	copy(a[:], storetest.Address(1))
	row := func(b storetest.Block, withTime bool) storetest.IndexRow {
		r := storetest.IndexRow{ChainID: chain, Address: a[:], List: schema.ListTransactions, Block: b.Number, BlockHash: b.Hash,
			TxHash: storetest.HashOf(chain, b.Number, "tx"+string(b.Hash[:1])), Roles: schema.RoleSender, From: a[:], Value: "1",
			Status: 1, Version: 1}
		if withTime {
			ts := b.Timestamp
			r.BlockTime = &ts
		}
		return r
	}
	var rows []storetest.IndexRow
	for n := 10; n < 20; n++ {
		rows = append(rows, row(blocks[n], true))
	}
	rows = append(rows, row(orphan, true), row(blocks[95], true), row(blocks[96], true))
	require.NoError(t, storetest.InsertIndex(c, conn, rows))

	list := func(lo, hi uint64) []store.IndexRow {
		p, err := s.AddressList(c, store.ListRequest{ChainID: chain, Address: a, List: schema.ListTransactions, Lo: lo, Hi: hi, Limit: 100})
		require.NoError(t, err)
		return p.Rows
	}
	reads := func() float64 { return storetest.Queries(t, reg, "blocks_lookup") }

	before := reads()
	got := list(10, 19)
	require.Equal(t, 1.0, reads()-before, "one read, of blocks 15 (for the orphaned branch's row) and 17 (orphaned once)")
	require.Len(t, got, 10, "block 15's canonical row, not the orphaned branch's; block 17's row")
	for _, r := range got {
		b := blocks[r.Block.Number]
		require.Equal(t, b.Hash, r.BlockHash)
		require.Equal(t, b.Hash, r.Block.Hash)
		require.Equal(t, b.Timestamp, r.Block.Timestamp)
		require.Equal(t, uint64(chain), r.Block.ChainID)
	}

	before = reads()
	got = list(90, 99)
	require.Equal(t, 1.0, reads()-before, "blocks within the window are read")
	require.Len(t, got, 2)

	// A row without the block's timestamps is read even when settled.
	require.NoError(t, storetest.InsertIndex(c, conn, []storetest.IndexRow{row(blocks[30], false)}))
	before = reads()
	got = list(30, 30)
	require.Equal(t, 1.0, reads()-before)
	require.Len(t, got, 1)
	require.Equal(t, blocks[30].Timestamp, got[0].Block.Timestamp)

	// Transactions by hash take the same path: a settled row whose detail
	// carries its block's fields is served from the row alone.
	lookup := func(b storetest.Block, h store.Hash, withBlock bool) storetest.TxLookupRow {
		d := &record.TxDetail{From: a[:], Value: "1", Status: 1}
		if withBlock {
			ts := b.Timestamp
			d.BlockTimestamp, d.BlockTimestampMilliseconds, d.BlockMinDelayExcess, d.BlockBaseFee = &ts, b.TimestampMs, b.MinDelayExcess, b.BaseFee
		}
		return storetest.TxLookupRow{ChainID: chain, Hash: h, BlockHash: b.Hash, Block: b.Number, TxIndex: 2, Detail: d, Version: 1}
	}
	moved, again, recent, copied := storetest.HashOf(chain, 1, "moved"), storetest.HashOf(chain, 2, "again"),
		storetest.HashOf(chain, 3, "recent"), storetest.HashOf(chain, 4, "copied")
	require.NoError(t, storetest.InsertTxLookup(c, conn, []storetest.TxLookupRow{lookup(orphan, moved, true),
		lookup(blocks[16], moved, true), lookup(blocks[17], again, true), lookup(blocks[95], recent, true)}))
	// A row written before migration 9, copied by the upgrade statement: no
	// block fields in its detail.
	require.NoError(t, storetest.InsertTransactionLookup(c, conn, []storetest.TxLookupRow{lookup(blocks[30], copied, false)}))
	require.NoError(t, conn.Exec(c, schema.CopyTransactionLookup))
	for _, tc := range []struct {
		hash  store.Hash
		block uint64
		reads float64
	}{{moved, 16, 0}, {again, 17, 1}, {recent, 95, 1}, {copied, 30, 1}} {
		before = reads()
		ref, full, err := s.Transaction(c, chain, tc.hash)
		require.NoError(t, err)
		require.Equal(t, tc.reads, reads()-before, "block reads for the transaction of block %d", tc.block)
		b := blocks[tc.block]
		require.Equal(t, uint32(2), ref.Index)
		require.Equal(t, "1", full.Value)
		require.Equal(t, store.Block{ChainID: chain, Number: b.Number, Hash: b.Hash, Timestamp: b.Timestamp, TimestampMs: b.TimestampMs,
			MinDelayExcess: b.MinDelayExcess, BaseFee: b.BaseFee}, store.Block{ChainID: ref.Block.ChainID, Number: ref.Block.Number,
			Hash: ref.Block.Hash, Timestamp: ref.Block.Timestamp, TimestampMs: ref.Block.TimestampMs,
			MinDelayExcess: ref.Block.MinDelayExcess, BaseFee: ref.Block.BaseFee}, "what the route renders of the block")
	}
	// The orphaned branch's row alone is not served.
	gone := storetest.HashOf(chain, 5, "gone")
	require.NoError(t, storetest.InsertTxLookup(c, conn, []storetest.TxLookupRow{lookup(orphan, gone, true)}))
	_, _, err := s.Transaction(c, chain, gone)
	require.ErrorIs(t, err, store.ErrNotFound)
}
