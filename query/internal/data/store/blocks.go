package store

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// Window sizes of Blocks: the first range is the page times the chain's
// observed spacing (numbers per block: 1 on a live chain, 100 on a replay of
// every 100th block), with 50% and windowSlack to spare, so it usually
// holds the page. It is capped at firstWindowCap times a dense page, so a
// spacing learnt across one gap cannot make the next read of dense blocks
// scan far more rows than it needs. Each further range, needed below gaps,
// is windowGrowth times wider, so a gap of G numbers costs O(log G) queries.
const (
	windowSlack    = 16
	windowGrowth   = 8
	firstWindowCap = 256
	maxWindowRuns  = 40 // 8^21 > 2^64: reaching number 0 takes fewer
)

// Blocks returns up to limit canonical blocks with number <= cursor, newest
// first (the slice is shared: callers must not modify it). It reads bounded
// ranges [cursor-k+1, cursor], widening k below gaps, until it has limit
// rows or reaches block 0.
//
// Results are reused for HeadCacheTTL, and identical concurrent calls share
// one read: the first page of a busy chain (every client polling "latest
// blocks") costs one query per TTL, not one per request.
func (s *ClickHouse) Blocks(ctx context.Context, chainID, cursor uint64, limit int) ([]Block, error) {
	if limit <= 0 {
		return nil, nil
	}
	if s.cfg.HeadCacheTTL <= 0 {
		return s.readBlocks(ctx, chainID, cursor, limit)
	}
	key := rangeKey{chainID, cursor, limit}
	c := &s.ranges
	c.mu.Lock()
	e, found := c.m[key]
	if !found || (e.ready() && s.now().Sub(e.at) >= s.cfg.HeadCacheTTL) {
		if len(c.m) >= maxCachedRanges {
			for k, old := range c.m {
				if old.ready() {
					delete(c.m, k)
				}
			}
		}
		e = &rangeEntry{done: make(chan struct{})}
		c.m[key] = e
		c.mu.Unlock()
		// Detached from this request: the waiters must not fail because
		// the first caller went away. The query still has its deadline.
		rows, err := s.readBlocks(context.WithoutCancel(ctx), chainID, cursor, limit)
		c.mu.Lock()
		e.rows, e.err, e.at = rows, err, s.now()
		close(e.done)
		if err != nil && c.m[key] == e {
			delete(c.m, key) // errors are not cached
		}
		c.mu.Unlock()
		return rows, err
	}
	c.mu.Unlock()
	select {
	case <-e.done:
		return e.rows, e.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: blocks: %w", ErrUnavailable, ctx.Err())
	}
}

// maxCachedRanges bounds the Blocks cache; it is swept when full.
const maxCachedRanges = 4096

type rangeKey struct {
	chain, cursor uint64
	limit         int
}

type rangeEntry struct {
	done chan struct{}
	rows []Block
	err  error
	at   time.Time
}

func (e *rangeEntry) ready() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

type rangeCache struct {
	mu sync.Mutex
	m  map[rangeKey]*rangeEntry
}

func (s *ClickHouse) readBlocks(ctx context.Context, chainID, cursor uint64, limit int) ([]Block, error) {
	out := make([]Block, 0, limit)
	hi := cursor
	dense := uint64(2*limit + windowSlack)
	k := min(uint64(math.Ceil(float64(limit)*s.spacing(chainID)*1.5))+windowSlack, dense*firstWindowCap)
	for range maxWindowRuns {
		lo := uint64(0)
		if hi >= k {
			lo = hi - k + 1
		}
		got, err := s.blockRange(ctx, chainID, lo, hi, limit-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
		if len(out) >= limit || lo == 0 {
			break
		}
		hi = lo - 1
		if k > math.MaxUint64/windowGrowth {
			k = math.MaxUint64
		} else {
			k *= windowGrowth
		}
	}
	if len(out) >= 2 {
		s.setSpacing(chainID, float64(out[0].Number-out[len(out)-1].Number)/float64(len(out)-1))
	}
	return out, nil
}

// spacing is the chain's last observed numbers-per-block (1 until seen).
func (s *ClickHouse) spacing(chainID uint64) float64 {
	s.spacingMu.Lock()
	defer s.spacingMu.Unlock()
	if v, ok := s.spacings[chainID]; ok {
		return v
	}
	return 1
}

func (s *ClickHouse) setSpacing(chainID uint64, v float64) {
	v = max(1, min(v, 1e12))
	s.spacingMu.Lock()
	defer s.spacingMu.Unlock()
	if len(s.spacings) < 10000 || s.spacings[chainID] != 0 {
		s.spacings[chainID] = v
	}
}

// blockRange returns the newest limit canonical blocks in [lo, hi], newest
// first: from block_lookup, and from blocks for the numbers block_lookup has
// no row of. A range without gaps is one read; one with gaps (blocks written
// before migration 5, a range below a chain's first block, a sparse
// recording, the stretch a backfill has not reached) reads blocks too.
func (s *ClickHouse) blockRange(ctx context.Context, chainID, lo, hi uint64, limit int) ([]Block, error) {
	rows, done, err := s.query(ctx, "blocks_range", qLookupRange, chainID, lo, hi)
	if err != nil {
		return nil, err
	}
	var out []Block
	found := map[uint64]bool{}
	err = eachLookupRow("blocks_range", rows, chainID, found, func(b Block) { out = append(out, b) })
	done()
	if err != nil {
		return nil, err
	}
	if uint64(len(found)) <= hi-lo {
		// Numbers without a block_lookup row: blocks written before
		// migration 5, or none at all (below a chain's first indexed
		// block, a gap). The newest limit of them are among the newest
		// limit+len(found) rows of blocks in the range.
		older, err := s.blocksBeforeLookup(ctx, chainID, lo, hi, limit+len(found))
		if err != nil {
			return nil, err
		}
		for _, b := range older {
			if !found[b.Number] {
				out = append(out, b)
			}
		}
	}
	slices.SortFunc(out, func(a, b Block) int { return cmp.Compare(b.Number, a.Number) })
	return out[:min(len(out), limit)], nil
}

// eachLookupRow reads the block_lookup rows of chainID in rows (number, its
// newest header and removed flag), marking each number found and passing the
// canonical blocks (removed = 0) to add.
func eachLookupRow(name string, rows driver.Rows, chainID uint64, found map[uint64]bool, add func(Block)) error {
	return eachRow(name, rows, func() error {
		var (
			number  uint64
			header  string
			removed uint8
		)
		if err := rows.Scan(&number, &header, &removed); err != nil {
			return scanError(name, err)
		}
		found[number] = true
		if removed != 0 {
			return nil
		}
		b, err := parseHeader(chainID, number, header)
		if err != nil {
			return err
		}
		add(b)
		return nil
	})
}

// blocksBeforeLookup reads the canonical blocks in [lo, hi] from blocks, the
// newest limit of them.
func (s *ClickHouse) blocksBeforeLookup(ctx context.Context, chainID, lo, hi uint64, limit int) ([]Block, error) {
	rows, done, err := s.query(ctx, "blocks_range_before_lookup", qBlocksRange, chainID, lo, hi, limit)
	if err != nil {
		return nil, err
	}
	defer done()
	return scanBlocks("blocks_range_before_lookup", rows, limit)
}

func scanBlocks(name string, rows driver.Rows, limit int) ([]Block, error) {
	var out []Block
	err := eachRow(name, rows, func() error {
		var (
			b            Block
			hash, parent string
		)
		if err := rows.Scan(&b.ChainID, &b.Number, &hash, &parent, &b.Timestamp, &b.TimestampMs, &b.MinDelayExcess,
			&b.BaseFee, &b.GasUsed, &b.GasLimit, &b.GasCost, &b.FeesSpent, &b.TxCount, &b.CumulativeTransactions); err != nil {
			return scanError(name, err)
		}
		copy(b.Hash[:], hash)
		copy(b.ParentHash[:], parent)
		out = append(out, b)
		if len(out) > limit {
			return errStopRows
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// BlockByNumber returns the canonical block number of chainID: from
// block_lookup, or from blocks for rows written before block_lookup existed
// (CanonicalBlocks). Concurrent requests are read together (coalescer).
func (s *ClickHouse) BlockByNumber(ctx context.Context, chainID, number uint64) (Block, error) {
	b, ok, err := s.blockReads.get(ctx, blockKey{chainID: chainID, number: number})
	if err == nil && !ok {
		err = ErrNotFound
	}
	return b, err
}

// blockKey is a block by number, the key of coalesced block reads.
type blockKey struct{ chainID, number uint64 }

// readBlocksByNumber reads the canonical blocks of keys, all of one chain.
func (s *ClickHouse) readBlocksByNumber(ctx context.Context, keys []blockKey) (map[blockKey]Block, error) {
	numbers := make([]uint64, len(keys))
	for i, k := range keys {
		numbers[i] = k.number
	}
	blocks, err := s.CanonicalBlocks(ctx, keys[0].chainID, numbers)
	if err != nil {
		return nil, err
	}
	out := make(map[blockKey]Block, len(blocks))
	for n, b := range blocks {
		out[blockKey{chainID: keys[0].chainID, number: n}] = b
	}
	return out, nil
}

// parseHeader decodes block_lookup.header (see migration 5 for the layout).
func parseHeader(chainID, number uint64, header string) (Block, error) {
	f := strings.Split(header, "\t")
	if len(f) != 12 {
		return Block{}, fmt.Errorf("store: block_lookup: header of block %d has %d fields, want 12", number, len(f))
	}
	b := Block{ChainID: chainID, Number: number, BaseFee: f[5], GasCost: f[8], FeesSpent: f[9]}
	var errs []error
	dec := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			errs = append(errs, err)
		}
		return v
	}
	opt := func(s string) *uint64 {
		if s == "" {
			return nil
		}
		v := dec(s)
		return &v
	}
	for i, dst := range []*Hash{&b.Hash, &b.ParentHash} {
		if n, err := hex.Decode(dst[:], []byte(f[i])); err != nil || n != len(dst) {
			errs = append(errs, fmt.Errorf("hash %q", f[i]))
		}
	}
	b.Timestamp, b.TimestampMs, b.MinDelayExcess = dec(f[2]), opt(f[3]), opt(f[4])
	b.GasUsed, b.GasLimit = dec(f[6]), dec(f[7])
	b.TxCount, b.CumulativeTransactions = uint32(dec(f[10])), dec(f[11])
	if len(errs) > 0 {
		return Block{}, fmt.Errorf("store: block_lookup: header of block %d: %w", number, errors.Join(errs...))
	}
	return b, nil
}

// BlockNumberByHash returns the number of the block with hash h
// (block_hashes), canonical or not: the caller checks that the block at
// that number carries h (a hash orphaned by a reorg keeps its number, even
// before block_hashes marks it).
func (s *ClickHouse) BlockNumberByHash(ctx context.Context, chainID uint64, h Hash) (uint64, error) {
	rows, cancel, err := s.query(ctx, "block_hash", qHashToNumber, chainID, hex.EncodeToString(h[:]))
	if err != nil {
		return 0, err
	}
	defer cancel()
	var (
		number uint64
		found  bool
	)
	if err := eachRow("block_hash", rows, func() error {
		found = true
		return scanError("block_hash", rows.Scan(&number))
	}); err != nil {
		return 0, err
	}
	if !found {
		return 0, ErrNotFound
	}
	return number, nil
}

// BlockTransactions returns up to limit transactions of block b with index
// >= from, by index; limit <= 0 means all of them (capped by
// Config.MaxBlockTxs). A block without transactions is not read.
// Concurrent requests are read together (coalescer).
func (s *ClickHouse) BlockTransactions(ctx context.Context, b Block, from uint32, limit int) ([]Tx, error) {
	if b.TxCount == 0 {
		return nil, nil
	}
	p, _, err := s.blockTxReads.get(ctx, blockTxsKey{chainID: b.ChainID, number: b.Number, hash: b.Hash, from: from,
		limit: s.blockTxLimit(limit)})
	return p.txs, err
}

// SettledBlockTransactions returns the canonical block at number (its chain,
// number, hash and timestamps) with up to limit of its transactions from
// index from on, as BlockTransactions, in one read instead of two: from its
// block_transactions row alone, which the settled snapshot (settled.go) tells
// canonical without the block's header. A row written before the rows
// carried the block's fields is read with the block's header (two reads, as
// before). ok is false when the block is not settled or has no row (no
// transactions, or processed before migration 18); the caller then reads
// the block, then BlockTransactions.
func (s *ClickHouse) SettledBlockTransactions(ctx context.Context, chainID, number uint64, from uint32, limit int) (b Block, txs []Tx, ok bool, err error) {
	if !s.settled(ctx).settledNumber(chainID, number) {
		return Block{}, nil, false, nil
	}
	p, ok, err := s.blockTxReads.get(ctx, blockTxsKey{chainID: chainID, number: number, settled: true, from: from,
		limit: s.blockTxLimit(limit)})
	if err != nil || !ok {
		return Block{}, nil, false, err
	}
	if !p.headerless {
		return p.block, p.txs, true, nil
	}
	header, err := s.BlockByNumber(ctx, chainID, number)
	if errors.Is(err, ErrNotFound) || (err == nil && header.Hash != p.block.Hash) {
		return Block{}, nil, false, nil // the caller's reads tell
	}
	if err != nil {
		return Block{}, nil, false, err
	}
	return header, p.txs, true, nil
}

// blockTxLimit is the most transactions of a block a read returns for a
// request's limit (<= 0: all of them, up to Config.MaxBlockTxs).
func (s *ClickHouse) blockTxLimit(limit int) int {
	if limit <= 0 || limit > s.cfg.MaxBlockTxs {
		return s.cfg.MaxBlockTxs
	}
	return limit
}

// blockTxsKey is a page of a block's transactions, the key of coalesced
// transaction reads; the reads of one query share chain, from and limit. A
// settled key names its block by number alone: the one row at that number
// that the settled snapshot tells canonical.
type blockTxsKey struct {
	chainID, number uint64
	hash            Hash
	settled         bool
	from            uint32
	limit           int
}

// blockTxsPage is what a read of a blockTxsKey returns: the page, and for a
// settled key the block it found (chain, number, hash and timestamps).
type blockTxsPage struct {
	block Block
	txs   []Tx
	// headerless: the row was written before the rows carried the block's
	// fields, so block has no timestamps.
	headerless bool
}

// blockAt names a block by number and hash: the rows of an orphaned block at
// the same number are read too, and left out by their hash.
type blockAt struct {
	number uint64
	hash   Hash
}

// readBlockTxs reads the transactions of keys, which share chain, from and
// limit, from their blocks' block_transactions rows (migration 18); the
// blocks without one, processed before that migration, from
// transactions_by_block. A settled key without a usable row has no value.
func (s *ClickHouse) readBlockTxs(ctx context.Context, keys []blockTxsKey) (map[blockTxsKey]blockTxsPage, error) {
	want, byNumber, numbers := blocksOf(keys)
	var settled *settledSnapshot
	if len(byNumber) > 0 {
		settled = s.settled(ctx)
	}
	chainID := keys[0].chainID
	rows, done, err := s.query(ctx, "block_transactions", qBlockTxLists, chainID, clickhouse.GroupSet{Value: numbers})
	if err != nil {
		return nil, err
	}
	out := make(map[blockTxsKey]blockTxsPage, len(keys)) // a key without transactions is an empty page
	found := make(map[blockTxsKey]bool, len(keys))
	var twice []blockTxsKey // settled keys with two canonical-looking rows
	err = eachRow("block_transactions", rows, func() error {
		var (
			at               blockAt
			blockHash, entry string
		)
		if err := rows.Scan(&at.number, &blockHash, &entry); err != nil {
			return scanError("block_transactions", err)
		}
		copy(at.hash[:], blockHash)
		k, byHash := want[at]
		sk, bySettled := byNumber[at.number]
		bySettled = bySettled && settled.settledBlock(chainID, at.number, at.hash)
		if !byHash && !bySettled {
			return nil
		}
		l, err := codec.DecodeBlockTxList([]byte(entry))
		if err != nil {
			return fmt.Errorf("store: block_transactions: block %d: %w", at.number, err)
		}
		if byHash {
			found[k] = true
			out[k] = blockTxsPage{txs: listedPage(l, k.from, k.limit)}
		}
		if bySettled {
			if found[sk] {
				twice = append(twice, sk)
			}
			found[sk] = true
			p := blockTxsPage{block: Block{ChainID: chainID, Number: at.number, Hash: at.hash},
				txs: listedPage(l, sk.from, sk.limit), headerless: l.BlockTimestamp == nil}
			if !p.headerless {
				p.block.Timestamp, p.block.TimestampMs, p.block.MinDelayExcess = *l.BlockTimestamp,
					l.BlockTimestampMilliseconds, l.BlockMinDelayExcess
			}
			out[sk] = p
		}
		return nil
	})
	done()
	if err != nil {
		return nil, err
	}
	for _, k := range twice {
		// Cannot be while orphaned_blocks holds every orphan; the caller
		// then reads the block's header, which names the canonical one.
		delete(out, k)
	}
	var older []blockTxsKey
	for _, k := range keys {
		if !found[k] && !k.settled {
			older = append(older, k)
		}
	}
	if len(older) == 0 {
		return out, nil
	}
	rest, err := s.readBlockTxRows(ctx, older)
	if err != nil {
		return nil, err
	}
	for k, txs := range rest {
		out[k] = blockTxsPage{txs: txs}
	}
	return out, nil
}

// blocksOf indexes keys by their block (settled keys by number), and lists
// their block numbers as a query's IN set.
func blocksOf(keys []blockTxsKey) (want map[blockAt]blockTxsKey, settled map[uint64]blockTxsKey, numbers []any) {
	want = make(map[blockAt]blockTxsKey, len(keys))
	numbers = make([]any, len(keys))
	for i, k := range keys {
		if k.settled {
			if settled == nil {
				settled = map[uint64]blockTxsKey{}
			}
			settled[k.number] = k
		} else {
			want[blockAt{number: k.number, hash: k.hash}] = k
		}
		numbers[i] = k.number
	}
	return want, settled, numbers
}

// listedPage is the page of l from index from on, at most limit long.
func listedPage(l *record.BlockTxList, from uint32, limit int) []Tx {
	var page []Tx
	for _, lt := range l.Txs {
		if lt.Index < from {
			continue
		}
		if len(page) == limit {
			break
		}
		var h Hash
		copy(h[:], lt.Hash)
		page = append(page, txOf(lt.Index, h, lt.Detail, lt.InputLength))
	}
	return page
}

// txOf is the transaction at index of its block with hash h, from its stored
// detail d and the length of its input (d's may be cut to the selector).
func txOf(index uint32, h Hash, d *record.TxDetail, inputLen uint64) Tx {
	input := d.GetInput()
	return Tx{BlockIndex: index, Hash: h, Type: uint8(d.GetType()), From: d.GetFrom(), To: d.GetTo(),
		ContractAddress: d.GetContractAddress(), Value: d.GetValue(), Gas: d.GetGas(), GasPrice: d.GetGasPrice(),
		EffectiveGasPrice: d.GetEffectiveGasPrice(), Nonce: d.GetNonce(), Selector: input[:min(len(input), 4)],
		InputLen: inputLen, Status: uint8(d.GetStatus()), GasUsed: d.GetGasUsed()}
}

// readBlockTxRows reads the transactions of keys from transactions_by_block:
// the blocks processed before migration 18 have no block_transactions row.
func (s *ClickHouse) readBlockTxRows(ctx context.Context, keys []blockTxsKey) (map[blockTxsKey][]Tx, error) {
	k0 := keys[0]
	want, _, numbers := blocksOf(keys)
	rows, done, err := s.query(ctx, "block_transaction_rows", qBlockTxs, k0.chainID, clickhouse.GroupSet{Value: numbers}, k0.from, k0.limit)
	if err != nil {
		return nil, err
	}
	defer done()
	out := make(map[blockTxsKey][]Tx, len(keys))
	err = eachRow("block_transaction_rows", rows, func() error {
		var (
			t                                 Tx
			number                            uint64
			blockHash, hash, from, to, ca, in string
		)
		if err := rows.Scan(&number, &blockHash, &t.BlockIndex, &hash, &t.Type, &from, &to, &ca, &t.Value, &t.Gas,
			&t.GasPrice, &t.EffectiveGasPrice, &t.Nonce, &in, &t.InputLen, &t.Status, &t.GasUsed); err != nil {
			return scanError("block_transaction_rows", err)
		}
		at := blockAt{number: number}
		copy(at.hash[:], blockHash)
		k, ok := want[at]
		if !ok {
			return nil
		}
		copy(t.Hash[:], hash)
		t.From, t.To, t.ContractAddress = address(from), address(to), address(ca)
		t.Selector = []byte(in)
		out[k] = append(out[k], t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// address reads an address column: 20 raw bytes (the schema), or, leniently,
// 0x-prefixed hex text; empty stays empty.
func address(s string) []byte {
	switch {
	case len(s) == 20:
		return []byte(s)
	case len(s) == 42 && strings.HasPrefix(s, "0x"):
		if b, err := hex.DecodeString(s[2:]); err == nil {
			return b
		}
	}
	if s == "" {
		return nil
	}
	return []byte(s)
}
