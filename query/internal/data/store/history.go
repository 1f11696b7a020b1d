package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/chclient"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// Reads of the address lists (address_lists, ordered by list_key: chain,
// address, list, then block number and position). ClickHouse 18.16 cannot read a
// key range in order and stop at a LIMIT: it reads every row of the range,
// then sorts. So a page never reads "all rows below the cursor" of an
// address with millions of them; it reads a window of blocks below the
// cursor that should hold the page:
//
//   - An address with few rows (most of them) is read in one query over the
//     whole remaining range, under a row budget (max_rows_to_read,
//     Config.AddressScanRows): ClickHouse checks the budget against the
//     granules its index selects before reading anything, so an address
//     over budget costs one refused query, about a millisecond.
//   - Over budget, reads go window by window: the first spans
//     listFirstWindowPerRow blocks per wanted row, each next one (past an
//     exhausted window) listWindowGrowth times more.
//   - The page token carries twice the span of blocks the page took (the
//     Window hint), so the next page of a busy address starts with a window
//     that holds it: the 1,000th page costs what the first does, one read
//     of the index and one of the canonical blocks.
const (
	listFirstWindowPerRow = 4
	listWindowGrowth      = 16
	maxListReads          = 64
)

// listBound is where an address list read starts: a row position and block
// hash, inclusive or not, in the list's order.
type listBound struct {
	seek      Seek
	hash      Hash
	inclusive bool
}

var (
	hashMin = Hash{}
	hashMax = func() (h Hash) {
		for i := range h {
			h[i] = 0xff
		}
		return h
	}()
	seekMax = Seek{TxIndex: math.MaxUint32, Position: math.MaxUint32, Sub: math.MaxUint32}
)

// AddressList returns a page of an address list: up to r.Limit canonical
// rows from r.Start (or the start of the range) on, in list order. Rows of
// orphaned blocks are skipped.
func (s *ClickHouse) AddressList(ctx context.Context, r ListRequest) (ListPage, error) {
	if r.Limit <= 0 || r.Lo > r.Hi {
		return ListPage{}, nil
	}
	// Every row at or past bound (in list order) is still to read.
	var bound listBound
	switch {
	case r.Start != nil && r.Asc:
		bound = listBound{seek: *r.Start, hash: hashMin, inclusive: true}
	case r.Start != nil:
		bound = listBound{seek: *r.Start, hash: hashMax, inclusive: true}
	case r.Asc:
		bound = listBound{seek: Seek{Block: r.Lo}, hash: hashMin, inclusive: true}
	default:
		top := seekMax
		top.Block = r.Hi
		bound = listBound{seek: top, hash: hashMax, inclusive: true}
	}
	window := r.Window
	page := make([]IndexRow, 0, r.Limit)
	for reads := 0; reads < maxListReads && len(page) < r.Limit; reads++ {
		lo, hi := max(r.Lo, bound.seek.Block), r.Hi
		if !r.Asc {
			lo, hi = r.Lo, min(r.Hi, bound.seek.Block)
		}
		if lo > hi {
			break
		}
		if window > 0 && hi-lo >= window {
			if r.Asc {
				hi = lo + window - 1
			} else {
				lo = hi - window + 1
			}
		}
		want := r.Limit - len(page)
		rows, err := s.listRead(ctx, r, lo, hi, bound, want, window == 0)
		if window == 0 && chclient.TooManyRows(err) {
			window = uint64(listFirstWindowPerRow * r.Limit)
			continue
		}
		if err != nil {
			return ListPage{}, err
		}
		canon, err := s.keepCanonical(ctx, r.ChainID, rows)
		if err != nil {
			return ListPage{}, err
		}
		page = append(page, canon...)
		if len(rows) == want {
			// The read stopped at its LIMIT: the window may hold more, after
			// the last row read (some rows were not canonical).
			last := rows[len(rows)-1]
			bound = listBound{seek: last.Seek, hash: last.BlockHash}
			continue
		}
		// The window is exhausted.
		if r.Asc {
			if hi == r.Hi {
				break
			}
			bound = listBound{seek: Seek{Block: hi + 1}, hash: hashMin, inclusive: true}
		} else {
			if lo == r.Lo {
				break
			}
			next := seekMax
			next.Block = lo - 1
			bound = listBound{seek: next, hash: hashMax, inclusive: true}
		}
		if window > 0 {
			window = min(window*listWindowGrowth, math.MaxUint64/listWindowGrowth)
		}
	}
	out := ListPage{Rows: page}
	if window > 0 && len(page) > 1 {
		// Twice the blocks this page spanned: the next page's rows are
		// about as dense, and a window that falls short costs a second
		// query, while one twice too wide costs a few more rows.
		first, last := page[0].Block.Number, page[len(page)-1].Block.Number
		span := max(first, last) - min(first, last) + 1
		out.Window = 2*span + 1
	}
	return out, nil
}

// listRead reads up to limit rows of r's list in blocks [lo, hi] from
// bound on, deduplicated by key; withBudget makes ClickHouse refuse the
// read (TOO_MANY_ROWS) when its index selects more than
// Config.AddressScanRows rows.
func (s *ClickHouse) listRead(ctx context.Context, r ListRequest, lo, hi uint64, bound listBound, limit int, withBudget bool) ([]IndexRow, error) {
	var q string
	switch {
	case r.Asc && r.Roles != 0:
		q = qListAscRoles
	case r.Asc:
		q = qListAsc
	case r.Roles != 0:
		q = qListDescRoles
	default:
		q = qListDesc
	}
	var settings clickhouse.Settings
	if withBudget {
		settings = clickhouse.Settings{"max_rows_to_read": s.cfg.AddressScanRows} // read_overflow_mode is "throw" by default
	}
	from, to := listRange(r, lo, hi, bound)
	args := []any{hex.EncodeToString(from[:]), hex.EncodeToString(to[:])}
	if r.Roles != 0 {
		args = append(args, r.Roles)
	}
	rows, done, err := s.queryWith(ctx, "address_list", settings, q, append(args, limit)...)
	if err != nil {
		return nil, err
	}
	defer done()
	return scanIndexRows("address_list", rows, r.List)
}

// listRange is the list_key range [from, to] of r's rows in blocks [lo, hi]
// at or past bound (in r's order).
func listRange(r ListRequest, lo, hi uint64, bound listBound) (from, to schema.ListKey) {
	key := func(at Seek, h Hash) schema.ListKey {
		return schema.NewListKey(r.ChainID, r.Address, r.List,
			schema.ListPosition{Block: at.Block, TxIndex: at.TxIndex, Position: at.Position, Sub: at.Sub, BlockHash: h})
	}
	top := seekMax
	top.Block = hi
	from, to = key(Seek{Block: lo}, hashMin), key(top, hashMax)
	b := key(bound.seek, bound.hash)
	switch {
	case r.Asc && !bound.inclusive:
		b = b.Next()
	case !r.Asc && !bound.inclusive:
		b = b.Prev()
	}
	if r.Asc && bytes.Compare(b[:], from[:]) > 0 {
		from = b
	} else if !r.Asc && bytes.Compare(b[:], to[:]) < 0 {
		to = b
	}
	return from, to
}

// scanIndexRows reads list_key, roles and entry, decoding each row's detail
// by list.
func scanIndexRows(name string, rows driver.Rows, list uint8) ([]IndexRow, error) {
	var out []IndexRow
	err := eachRow(name, rows, func() error {
		var (
			r          IndexRow
			key, entry string
		)
		if err := rows.Scan(&key, &r.Roles, &entry); err != nil {
			return scanError(name, err)
		}
		if err := r.setKey(key); err != nil {
			return fmt.Errorf("store: %s: %w", name, err)
		}
		if len(entry) < schema.EntryHashLen {
			return fmt.Errorf("store: %s: entry of %d bytes at block %d, index %d", name, len(entry), r.Block.Number, r.TxIndex)
		}
		copy(r.TxHash[:], entry)
		if err := decodeDetail(&r, list, []byte(entry[schema.EntryHashLen:])); err != nil {
			return fmt.Errorf("store: %s: row of block %d, index %d: %w", name, r.Block.Number, r.TxIndex, err)
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// setKey sets r's position and block from its list_key.
func (r *IndexRow) setKey(key string) error {
	k, err := schema.ParseListKey(key)
	if err != nil {
		return err
	}
	p := k.Position()
	r.Seek = Seek{Block: p.Block, TxIndex: p.TxIndex, Position: p.Position, Sub: p.Sub}
	r.Block.Number, r.BlockHash = p.Block, p.BlockHash
	return nil
}

// decodeDetail fills r from the detail of an address_lists entry of the given list.
func decodeDetail(r *IndexRow, list uint8, detail []byte) error {
	switch list {
	case schema.ListTransactions:
		d, err := codec.DecodeTxDetail(detail)
		if err != nil {
			return err
		}
		r.TxType, r.From, r.To, r.Contract, r.Value = uint8(d.Type), d.From, d.To, d.ContractAddress, d.Value
		r.Gas, r.GasPrice, r.Nonce, r.Selector, r.Status, r.GasUsed = d.Gas, d.GasPrice, d.Nonce, d.Input, uint8(d.Status), d.GasUsed
		r.Transfers, r.Internals = transfersOf(d.Transfers), internalsOf(d.InternalTransactions)
		r.setBlockTime(d.BlockTimestamp, d.BlockTimestampMilliseconds)
	case schema.ListInternal:
		var c record.CallDetail
		if err := c.UnmarshalVT(detail); err != nil {
			return err
		}
		r.Internal = internalsOf([]*record.CallDetail{&c})[0]
		r.setBlockTime(c.BlockTimestamp, c.BlockTimestampMilliseconds)
	case schema.ListDeployments, schema.ListCreation:
		var d record.Deployment
		if err := d.UnmarshalVT(detail); err != nil {
			return err
		}
		r.Deployment = Deployment{Contract: d.Contract, Deployer: d.Deployer, Creator: d.Creator}
		r.setBlockTime(d.BlockTimestamp, d.BlockTimestampMilliseconds)
	default:
		var t record.TokenTransfer
		if err := t.UnmarshalVT(detail); err != nil {
			return err
		}
		r.Transfer = transfersOf([]*record.TokenTransfer{&t})[0]
		r.setBlockTime(t.BlockTimestamp, t.BlockTimestampMilliseconds)
	}
	return nil
}

// setBlockTime takes the block's timestamps from a detail that has them.
func (r *IndexRow) setBlockTime(ts, ms *uint64) {
	if ts != nil {
		r.Block.Timestamp, r.Block.TimestampMs, r.blockTime = *ts, ms, true
	}
}

func transfersOf(ts []*record.TokenTransfer) []Transfer {
	out := make([]Transfer, len(ts))
	for i, t := range ts {
		out[i] = Transfer{Kind: uint8(t.Kind), Token: t.Token, From: t.From, To: t.To, LogIndex: t.LogIndex, Value: t.Value, TokenID: t.TokenId}
	}
	return out
}

func internalsOf(cs []*record.CallDetail) []Internal {
	out := make([]Internal, len(cs))
	for i, c := range cs {
		out[i] = Internal{Type: c.Type, From: c.From, To: c.To, Value: c.Value, Gas: c.Gas, GasUsed: c.GasUsed, Reverted: c.Reverted}
	}
	return out
}

// keepCanonical returns the rows whose block is canonical, with their
// block filled in: rows of settled blocks from the snapshot (settled.go),
// the others by reading their blocks.
func (s *ClickHouse) keepCanonical(ctx context.Context, chainID uint64, rows []IndexRow) ([]IndexRow, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	settled := s.settled(ctx)
	known := make([]bool, len(rows)) // canonical by the snapshot
	var numbers []uint64
	for i := range rows {
		r := &rows[i]
		if known[i] = settled.canonical(chainID, r); known[i] {
			continue
		}
		// Rows come in list order: one block's rows are adjacent.
		if n := len(numbers); n == 0 || numbers[n-1] != r.Block.Number {
			numbers = append(numbers, r.Block.Number)
		}
	}
	blocks, err := s.CanonicalBlocks(ctx, chainID, numbers)
	if err != nil {
		return nil, err
	}
	out := rows[:0]
	for i, r := range rows {
		if known[i] {
			r.Block.ChainID, r.Block.Hash = chainID, r.BlockHash
			out = append(out, r)
		} else if b, ok := blocks[r.Block.Number]; ok && b.Hash == r.BlockHash {
			r.Block = b
			out = append(out, r)
		}
	}
	return out, nil
}

// CanonicalBlocks returns the canonical block of each number that has one:
// from block_lookup, or from blocks for blocks written before block_lookup
// existed.
func (s *ClickHouse) CanonicalBlocks(ctx context.Context, chainID uint64, numbers []uint64) (map[uint64]Block, error) {
	out := make(map[uint64]Block, len(numbers))
	if len(numbers) == 0 {
		return out, nil
	}
	set := make([]any, len(numbers))
	for i, n := range numbers {
		set[i] = n
	}
	rows, done, err := s.query(ctx, "blocks_lookup", qBlocksLookup, chainID, clickhouse.GroupSet{Value: set})
	if err != nil {
		return nil, err
	}
	found := make(map[uint64]bool, len(numbers))
	err = eachLookupRow("blocks_lookup", rows, chainID, found, func(b Block) { out[b.Number] = b })
	done()
	if err != nil {
		return nil, err
	}
	var missing []any
	for _, n := range numbers {
		if !found[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	rows, done, err = s.query(ctx, "blocks_by_numbers", qBlocksByNumbers, chainID, clickhouse.GroupSet{Value: missing})
	if err != nil {
		return nil, err
	}
	defer done()
	bs, err := scanBlocks("blocks_by_numbers", rows, len(missing))
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		out[b.Number] = b
	}
	return out, nil
}

// activityBlocks is how many blocks of an address one activity read
// returns.
const activityBlocks = 16

// HasActivity reports whether the address took part in a canonical
// transaction of the chain. Each read returns some blocks the address has
// rows in; when none of them is canonical, the next read excludes them, so
// an address whose first rows found are all orphaned is still found by
// its canonical ones. Orphaned blocks are few (a reorg replaces a
// handful), so this rarely takes a second read.
func (s *ClickHouse) HasActivity(ctx context.Context, chainID uint64, a Address) (bool, error) {
	lo, hi := schema.ListKeyRange(chainID, a, schema.ListTransactions)
	from, to := hex.EncodeToString(lo[:]), hex.EncodeToString(hi[:])
	var orphaned []any // (block number, hex block hash) of blocks read and not canonical
	for {
		var (
			rows driver.Rows
			done func()
			err  error
		)
		if len(orphaned) == 0 {
			rows, done, err = s.query(ctx, "address_activity", qActivity, from, to, activityBlocks)
		} else {
			rows, done, err = s.query(ctx, "address_activity", qActivityExcept, from, to, clickhouse.GroupSet{Value: orphaned}, activityBlocks)
		}
		if err != nil {
			return false, err
		}
		var found []IndexRow
		for rows.Next() {
			var (
				r   IndexRow
				key string
			)
			err := rows.Scan(&key)
			if err == nil {
				err = r.setKey(key)
			}
			if err != nil {
				rows.Close()
				done()
				return false, fmt.Errorf("store: address_activity: scan: %w", err)
			}
			found = append(found, r)
		}
		rows.Close()
		err = rows.Err()
		done()
		if err != nil {
			return false, classify("address_activity", err)
		}
		for _, r := range found {
			var number [8]byte
			binary.BigEndian.PutUint64(number[:], r.Block.Number)
			orphaned = append(orphaned, clickhouse.GroupSet{Value: []any{strings.ToUpper(hex.EncodeToString(number[:])),
				strings.ToUpper(hex.EncodeToString(r.BlockHash[:]))}})
		}
		canon, err := s.keepCanonical(ctx, chainID, found)
		if err != nil || len(canon) > 0 {
			return len(canon) > 0, err
		}
		if len(found) < activityBlocks {
			return false, nil // every block of the address was read
		}
	}
}

// Transaction finds a canonical transaction by hash (transactions_by_hash)
// with its detail; ErrNotFound when no canonical block holds it. A row of a
// settled block whose detail carries the block's fields (settled.go) needs
// no block read. Concurrent requests are read together (coalescer).
func (s *ClickHouse) Transaction(ctx context.Context, chainID uint64, h Hash) (TxRef, FullTx, error) {
	found, _, err := s.txReads.get(ctx, txKey{chainID: chainID, hash: h})
	if err != nil {
		return TxRef{}, FullTx{}, err
	}
	// A transaction is in at most one canonical block.
	var (
		at      = -1
		block   Block
		numbers []uint64
		settled = s.settled(ctx)
	)
	for i, p := range found {
		if d := p.detail; d.BlockTimestamp != nil && settled.settledBlock(chainID, p.number, p.hash) {
			at, block = i, Block{ChainID: chainID, Number: p.number, Hash: p.hash, Timestamp: *d.BlockTimestamp,
				TimestampMs: d.BlockTimestampMilliseconds, MinDelayExcess: d.BlockMinDelayExcess, BaseFee: d.BlockBaseFee}
			break
		}
		numbers = append(numbers, p.number)
	}
	if at < 0 {
		blocks, err := s.CanonicalBlocks(ctx, chainID, numbers)
		if err != nil {
			return TxRef{}, FullTx{}, err
		}
		at = slices.IndexFunc(found, func(p txPlacement) bool { b, ok := blocks[p.number]; return ok && b.Hash == p.hash })
		if at < 0 {
			return TxRef{}, FullTx{}, ErrNotFound
		}
		block = blocks[found[at].number]
	}
	p, d := found[at], found[at].detail
	full := FullTx{
		Tx:    txOf(p.index, h, d, uint64(len(d.Input))),
		Input: d.Input, MaxFeePerGas: d.MaxFeePerGas, MaxPriorityFeePerGas: d.MaxPriorityFeePerGas,
		Transfers: transfersOf(d.Transfers), Internals: internalsOf(d.InternalTransactions),
	}
	return TxRef{Block: block, Index: p.index}, full, nil
}

// txKey is a transaction by hash, the key of coalesced transaction reads.
type txKey struct {
	chainID uint64
	hash    Hash
}

// txPlacement is a row of transactions_by_hash: a block that included the
// transaction, its index there and its detail.
type txPlacement struct {
	number uint64
	hash   Hash
	index  uint32
	detail *record.TxDetail
}

// readTxs reads the rows of keys' hashes in one query.
func (s *ClickHouse) readTxs(ctx context.Context, keys []txKey) (map[txKey][]txPlacement, error) {
	args := make([]any, 0, 2*len(keys)+1)
	for _, k := range keys {
		from, to := schema.TxKeyRange(k.chainID, k.hash)
		args = append(args, hex.EncodeToString(from[:]), hex.EncodeToString(to[:]))
	}
	rows, done, err := s.query(ctx, "tx_lookup", txLookupQuery(len(keys)), append(args, 64*len(keys))...)
	if err != nil {
		return nil, err
	}
	defer done()
	out := make(map[txKey][]txPlacement, len(keys))
	err = eachRow("tx_lookup", rows, func() error {
		var key, entry string
		if err := rows.Scan(&key, &entry); err != nil {
			return scanError("tx_lookup", err)
		}
		if len(key) != schema.TxKeyLen {
			return fmt.Errorf("store: tx_lookup: tx_key of %d bytes", len(key))
		}
		k := txKey{chainID: binary.BigEndian.Uint64([]byte(key[:8]))}
		copy(k.hash[:], key[8:schema.TxPrefixLen])
		var p txPlacement
		copy(p.hash[:], key[schema.TxPrefixLen:])
		number, index, detail, err := schema.ParseTxEntry([]byte(entry))
		if err != nil {
			return fmt.Errorf("store: tx_lookup: %w", err)
		}
		if p.detail, err = codec.DecodeTxDetail(detail); err != nil {
			return fmt.Errorf("store: tx_lookup: %w", err)
		}
		p.number, p.index = number, index
		out[k] = append(out[k], p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Transaction status filters of LatestTxs.
const (
	StatusFailed  uint8 = 0
	StatusSuccess uint8 = 1
	StatusAny     uint8 = 2
)

// latestBlocksPerRead is how many canonical blocks LatestTxs takes at a time.
const latestBlocksPerRead = 64

// LatestTxs returns up to limit canonical transactions of a chain, newest
// first, from position start on (inclusive: block start.Block, index
// start.TxIndex and below), with the given status (StatusAny: all). It
// looks at no more than Config.LatestScanBlocks blocks: when it stops
// there, resume is where a next call continues (nil when the chain's
// start was reached or the page is full).
func (s *ClickHouse) LatestTxs(ctx context.Context, chainID uint64, start Seek, limit int, status uint8) (txs []LatestTx, resume *Seek, err error) {
	cursor, firstTx := start.Block, start.TxIndex
	scanned := 0
	for len(txs) < limit {
		if scanned >= s.cfg.LatestScanBlocks {
			return txs, &Seek{Block: cursor, TxIndex: firstTx}, nil
		}
		blocks, err := s.Blocks(ctx, chainID, cursor, min(latestBlocksPerRead, s.cfg.LatestScanBlocks-scanned))
		if err != nil {
			return nil, nil, err
		}
		if len(blocks) == 0 {
			return txs, nil, nil
		}
		// Enough blocks for the page when every transaction counts; all of
		// them under a status filter.
		take, count := 0, 0
		for take < len(blocks) && (status != StatusAny || count < limit-len(txs)) {
			count += int(blocks[take].TxCount)
			take++
		}
		picked := blocks[:take]
		got, err := s.newestFirst(ctx, chainID, picked, status)
		if err != nil {
			return nil, nil, err
		}
		for _, t := range got {
			if t.Block.Number == start.Block && t.Tx.BlockIndex > firstTx {
				continue // served by the previous page
			}
			txs = append(txs, t)
			if len(txs) == limit {
				return txs, nil, nil
			}
		}
		scanned += take
		lo := picked[len(picked)-1].Number
		if lo == 0 {
			return txs, nil, nil
		}
		cursor, firstTx = lo-1, math.MaxUint32
	}
	return txs, nil, nil
}

// newestFirst returns the transactions of blocks (canonical, newest first)
// with the given status, newest first: from their block_transactions rows,
// as a block's own listing reads them, so a page of latest transactions reads
// one column per block.
func (s *ClickHouse) newestFirst(ctx context.Context, chainID uint64, blocks []Block, status uint8) ([]LatestTx, error) {
	keys := make([]blockTxsKey, 0, len(blocks))
	of := make([]Block, 0, len(blocks))
	for _, b := range blocks {
		if b.TxCount > 0 {
			keys = append(keys, blockTxsKey{chainID: chainID, number: b.Number, hash: b.Hash, limit: math.MaxInt32})
			of = append(of, b)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	byKey, err := s.readBlockTxs(ctx, keys)
	if err != nil {
		return nil, err
	}
	var out []LatestTx
	for i, k := range keys {
		txs := byKey[k].txs
		for j := len(txs) - 1; j >= 0; j-- {
			if status == StatusAny || txs[j].Status == status {
				out = append(out, LatestTx{Block: of[i], Tx: txs[j]})
			}
		}
	}
	return out, nil
}
