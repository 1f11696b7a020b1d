// Package sink writes blocks-topic events to ClickHouse: the block tables
// (blocks, block_hashes, chain_heads, transactions_by_block,
// block_transactions, logs, internal_transactions) and, unless turned off
// (--processor.address-index), the transaction-history tables the Data
// API's address and transaction endpoints read (transactions_by_hash and
// address_lists; index.go, migrations 8 and 9), and unless turned off
// (--processor.balances) the balance tables the balance and NFT routes read
// (balances level 0, nft_transfers, balance_progress; balances.go, migration
// 12), whose settled buckets its roller (pkg/balances.Roller) sums once each
// chain's written head is past them.
//
// Guarantees:
//   - Idempotent: every row carries version = the Kafka offset of the event
//     that wrote it, and every table is a ReplacingMergeTree(version) keyed so
//     that a redelivered event rewrites identical rows. Redelivery after a
//     crash or rebalance therefore never doubles rows, and readers use FINAL.
//   - Children first: transactions, logs, internal transactions and the
//     history rows of a batch are inserted before the block rows, and the
//     chain head last, so a reader that finds a block also finds its
//     contents.
//   - Reorgs: a Reorg event writes removed=1 rows for each orphaned block
//     (blocks and block_hashes) with a newer version, so they stop being
//     served; the replacing blocks follow with still newer versions. Child
//     rows are keyed by block hash, so orphaned children are never joined to
//     a canonical block.
//
// Version = offset assumes a chain's events stay on one partition, which the
// blocks topic guarantees by keying on chain id; do not add partitions to it.
//
// # The consumer: at-least-once
//
// Offsets are committed only after the batch they cover is in ClickHouse. A
// crash in between redelivers the batch, and the sink's idempotent rows
// absorb the repeat.
//
// A batch goes in two steps: its child rows (transactions, logs, call
// frames), then its blocks, hashes and chain head, written by a second
// goroutine while the next batch's children go in. Readers never see a
// block without its children, nor a head ahead of its blocks
// (the processor's TestSinkCrashIntegration checks both while it kills
// the sink).
//
// # Serving first
//
// With the write budget on (package budget, --processor.read-latency-target
// and --processor.head-latency-target), a batch holding backfill waits after
// its inserts while reads or head blocks are slow;
// what arrives meanwhile is held for the next batch, except the records of
// a chain at its head, which go at once with their partition's held records
// before them (pace.go). Offsets are still committed only for written
// records, partition by partition in order.
//
// # Metrics
//
//	moraine_processor_records_consumed_total{topic}
//	moraine_processor_blocks_written_total
//	moraine_processor_transactions_written_total
//	moraine_processor_batch_duration_seconds{stage}       decode|insert (children)|insert_blocks (blocks, hashes, heads)|commit
//	moraine_processor_batch_rows
//	moraine_processor_decode_errors_total
//	moraine_processor_last_written_block{chain}
//	moraine_processor_last_written_block_timestamp_seconds{chain}  its timestamp (time() - it: the indexed chain's lag)
//
// and the roller's (pkg/balances): moraine_processor_balance_buckets_summed_total{level},
// _balance_rollup_duration_seconds{level}, _balance_summed_block{chain},
// _balance_rollup_errors_total.
//
// Every 30 s while it writes, the sink logs an "indexed" line per chain: the
// highest block written, its age (lag), and blocks and transactions per
// second over the interval.
package sink

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"golang.org/x/sync/errgroup"

	"github.com/moraine-data/moraine/pkg/balances"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// Event is a decoded blocks-topic event with the offset that versions it.
type Event struct {
	Offset int64
	Event  *record.ChainEvent
}

// Batch accumulates the rows of many events, one slice per table.
type Batch struct {
	blocks []blockRow
	hashes []hashRow
	heads  map[uint64]headRow
	txs    []*txRow
	// txLists are the block_transactions rows, one per block with
	// transactions.
	txLists  []txListRow
	logs     []logRow
	internal []internalRow
	// noInternalIO: internal's rows go in without input and output.
	noInternalIO bool
	// indexed: the batch also holds the transaction-history rows
	// (transactions_by_hash from txs, and index).
	indexed bool
	index   []indexRow
	parties parties // scratch of addIndex
	// withBalances: the batch also holds the balance tables' rows (balances
	// level 0, nft_transfers) and, per chain, its lowest block, which
	// balance_progress keeps the lowest of.
	withBalances bool
	balances     balances.Rows
	// deltaVersions and nftVersions are the versions of balances.Deltas
	// and balances.NFTs, row by row.
	deltaVersions, nftVersions []uint64
	firstBlocks                map[uint64]uint64
	// Blocks and Txs count what the batch holds, for metrics.
	Blocks, Txs int
}

type blockRow struct {
	b       *record.Block
	removed uint8
	version uint64
}

type hashRow struct {
	chainID, number uint64
	hash            []byte
	removed         uint8
	version         uint64
}

type headRow struct {
	b       *record.Block
	version uint64
}

type txRow struct {
	b       *record.Block
	tx      *record.Transaction
	version uint64
	// lookup is the transactions_by_hash detail (indexed batches).
	lookup []byte
}

// txListRow is a block's row of block_transactions: entry is its
// transactions' BlockTxList.
type txListRow struct {
	b       *record.Block
	entry   []byte
	version uint64
}

type logRow struct {
	tx      *txRow
	l       *record.Log
	version uint64
}

type internalRow struct {
	tx      *txRow
	it      *record.InternalTransaction
	version uint64
}

// Tables says which tables beyond the block tables a batch writes.
type Tables struct {
	// Index: the transaction-history tables (index.go).
	Index bool
	// Balances: the balance tables (balances level 0, nft_transfers,
	// balance_progress; package balances).
	Balances bool
	// NoInternalInputOutput: internal_transactions rows are written with
	// an empty input and output (--processor.internal-input-output=false).
	NoInternalInputOutput bool
}

// NewBatch returns the batch of events for the block tables and, with
// index, the transaction-history tables.
func NewBatch(events []Event, index bool) (*Batch, error) {
	return NewBatchOf(events, Tables{Index: index})
}

// NewBatchOf returns the batch of events for the block tables and the
// tables t names, its row slices allocated at their final size: grown by
// appending, the call frames' rows alone (about 200,000 in a backfill
// batch) were copied several times over.
func NewBatchOf(events []Event, t Tables) (*Batch, error) {
	index := t.Index
	var blocks, txs, logs, internal int
	for _, e := range events {
		switch ev := e.Event.GetEvent().(type) {
		case *record.ChainEvent_Block:
			blocks++
			txs += len(ev.Block.Transactions)
			for _, tx := range ev.Block.Transactions {
				logs += len(tx.Logs)
				internal += len(tx.InternalTransactions)
			}
		case *record.ChainEvent_Reorg:
			blocks += len(ev.Reorg.Orphaned)
		}
	}
	b := &Batch{
		heads:    map[uint64]headRow{},
		blocks:   make([]blockRow, 0, blocks),
		hashes:   make([]hashRow, 0, blocks),
		txs:      make([]*txRow, 0, txs),
		txLists:  make([]txListRow, 0, blocks),
		logs:     make([]logRow, 0, logs),
		internal: make([]internalRow, 0, internal),
		indexed:  index,

		noInternalIO: t.NoInternalInputOutput,

		withBalances: t.Balances,
	}
	if t.Balances {
		b.firstBlocks = map[uint64]uint64{}
	}
	if index {
		// A guess, not a bound: about four parties per transaction and
		// three rows per transfer log; a batch outgrowing it grows once or
		// twice.
		b.index = make([]indexRow, 0, 4*txs+3*logs)
	}
	for _, e := range events {
		if err := b.add(e); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Len is the number of rows the batch would insert.
func (b *Batch) Len() int {
	n := len(b.blocks) + len(b.hashes) + len(b.txs) + len(b.txLists) + len(b.logs) + len(b.internal)
	if b.indexed {
		n += len(b.txs) + len(b.index)
	}
	if b.withBalances {
		n += 2*len(b.balances.Deltas) + len(b.balances.NFTs) + len(b.firstBlocks)
	}
	return n
}

// add appends the rows of one event.
func (b *Batch) add(e Event) error {
	v := uint64(e.Offset)
	switch ev := e.Event.GetEvent().(type) {
	case *record.ChainEvent_Block:
		blk := ev.Block
		b.Blocks++
		b.blocks = append(b.blocks, blockRow{b: blk, version: v})
		b.hashes = append(b.hashes, hashRow{chainID: blk.ChainId, number: blk.Number, hash: blk.Hash, version: v})
		if h, ok := b.heads[blk.ChainId]; !ok || blk.Number >= h.b.Number {
			b.heads[blk.ChainId] = headRow{b: blk, version: v}
		}
		if b.withBalances {
			b.addBalances(blk, v)
		}
		if err := b.addTxList(blk, v); err != nil {
			return err
		}
		for _, tx := range blk.Transactions {
			b.Txs++
			tr := &txRow{b: blk, tx: tx, version: v}
			b.txs = append(b.txs, tr)
			if b.indexed {
				if err := b.addIndex(tr); err != nil {
					return err
				}
			}
			for _, l := range tx.Logs {
				b.logs = append(b.logs, logRow{tx: tr, l: l, version: v})
			}
			for _, it := range tx.InternalTransactions {
				b.internal = append(b.internal, internalRow{tx: tr, it: it, version: v})
			}
		}
	case *record.ChainEvent_Reorg:
		r := ev.Reorg
		for _, o := range r.Orphaned {
			b.blocks = append(b.blocks, blockRow{
				b:       &record.Block{ChainId: r.ChainId, Number: o.Number, Hash: o.Hash},
				removed: 1, version: v,
			})
			b.hashes = append(b.hashes, hashRow{chainID: r.ChainId, number: o.Number, hash: o.Hash, removed: 1, version: v})
		}
	}
	return nil
}

// addTxList appends the block_transactions row of a block with
// transactions, with the block's fields its transactions render.
func (b *Batch) addTxList(blk *record.Block, version uint64) error {
	if len(blk.Transactions) == 0 {
		return nil
	}
	ts := blk.Timestamp
	l := &record.BlockTxList{Txs: make([]*record.ListedTx, len(blk.Transactions)), BlockTimestamp: &ts,
		BlockTimestampMilliseconds: blk.TimestampMilliseconds, BlockMinDelayExcess: blk.MinDelayExcess}
	details := make([]record.TxDetail, len(blk.Transactions))
	for i, tx := range blk.Transactions {
		details[i] = listedDetail(tx)
		l.Txs[i] = &record.ListedTx{Index: tx.Index, Hash: tx.Hash, Detail: &details[i], InputLength: uint64(len(tx.Input))}
	}
	entry, err := codec.EncodeBlockTxList(l)
	if err != nil {
		return fmt.Errorf("sink: block %d: %w", blk.Number, err)
	}
	b.txLists = append(b.txLists, txListRow{b: blk, entry: entry, version: version})
	return nil
}

// addBalances appends the balance tables' rows of one block.
func (b *Batch) addBalances(blk *record.Block, version uint64) {
	balances.FromBlock(&b.balances, blk)
	for len(b.deltaVersions) < len(b.balances.Deltas) {
		b.deltaVersions = append(b.deltaVersions, version)
	}
	for len(b.nftVersions) < len(b.balances.NFTs) {
		b.nftVersions = append(b.nftVersions, version)
	}
	if f, ok := b.firstBlocks[blk.ChainId]; !ok || blk.Number < f {
		b.firstBlocks[blk.ChainId] = blk.Number
	}
}

// Writer inserts batches.
type Writer struct {
	conn    driver.Conn
	timeout time.Duration
}

// NewWriter returns a writer on conn (which uses moraine's database). Each
// insert gets timeout: FIELD-NOTES warns that a stuck insert otherwise hangs.
func NewWriter(conn driver.Conn, timeout time.Duration) *Writer {
	return &Writer{conn: conn, timeout: timeout}
}

// WriteChildren inserts the child tables of b (transactions, logs, call
// frames, and the transaction-history tables when b has them), one
// concurrent INSERT each. Until WriteBlocks has also
// succeeded, the rows are not served: readers find children through their
// block. The processor writes the next batch's children while this batch's
// blocks go in.
//
// A large table's rows go in one INSERT, not several concurrent ones:
// every INSERT makes its own part (two files per column), so splitting
// costs ClickHouse more writing for parallelism the CPUs already spend on
// the other tables (bench/history.md).
func (w *Writer) WriteChildren(ctx context.Context, b *Batch) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.insertTxs(gctx, b.txs) })
	g.Go(func() error { return w.insertTxLists(gctx, b.txLists) })
	g.Go(func() error { return w.insertLogs(gctx, b.logs) })
	g.Go(func() error { return w.insertInternal(gctx, b.internal, !b.noInternalIO) })
	if b.indexed {
		g.Go(func() error { return w.insertTxLookup(gctx, b.txs) })
		g.Go(func() error { return w.insertIndex(gctx, b.index) })
	}
	if b.withBalances {
		g.Go(func() error { return w.insertBalances(gctx, b) })
	}
	return g.Wait()
}

// WriteBlocks inserts the blocks and hashes of b, then its chain heads,
// each step only once the one before has succeeded: called after
// WriteChildren has succeeded, a reader that finds a block also finds its
// contents, and a chain head is never ahead of its blocks.
func (w *Writer) WriteBlocks(ctx context.Context, b *Batch) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return w.insertBlocks(gctx, b.blocks) })
	g.Go(func() error { return w.insertHashes(gctx, b.hashes) })
	if err := g.Wait(); err != nil {
		return err
	}
	return w.insertHeads(ctx, b.heads)
}

// send inserts n rows into table, appendRow appending row i.
func (w *Writer) send(ctx context.Context, table, columns string, n int, appendRow func(batch driver.Batch, i int) error) error {
	return w.sendBlocks(ctx, table, columns, n, func(batch driver.Batch, lo, hi int) error {
		for i := lo; i < hi; i++ {
			if err := appendRow(batch, i); err != nil {
				return err
			}
		}
		return nil
	})
}

// sendBlocks inserts n rows into table as one INSERT sent in blocks of
// flushRows, appendBlock appending rows [lo, hi) before each block goes.
func (w *Writer) sendBlocks(ctx context.Context, table, columns string, n int, appendBlock func(batch driver.Batch, lo, hi int) error) error {
	if n == 0 {
		return nil
	}
	batch, err := w.conn.PrepareBatch(ctx, "INSERT INTO "+table+" ("+columns+")")
	if err != nil {
		return fmt.Errorf("prepare insert %s: %w", table, err)
	}
	for lo := 0; lo < n; lo += flushRows {
		hi := min(lo+flushRows, n)
		if err := appendBlock(batch, lo, hi); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("append %s rows: %w", table, err)
		}
		if hi < n {
			if err := batch.Flush(); err != nil {
				_ = batch.Abort()
				return fmt.Errorf("insert %d rows into %s: %w", n, table, err)
			}
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert %d rows into %s: %w", n, table, err)
	}
	return nil
}

const blockColumns = "chain_id, number, hash, parent_hash, timestamp, timestamp_ms, min_delay_excess, base_fee, gas_used, gas_limit, gas_cost, ext_data_gas_used, fees_spent, tx_count, cumulative_transactions, miner, state_root, receipts_root, transactions_root, size, extra_data, removed, version"

func (w *Writer) insertBlocks(ctx context.Context, rows []blockRow) error {
	return w.send(ctx, "blocks", blockColumns, len(rows), func(batch driver.Batch, i int) error {
		r := rows[i]
		b := r.b
		return batch.Append(b.ChainId, b.Number, fixed32(b.Hash), fixed32(b.ParentHash), b.Timestamp,
			b.TimestampMilliseconds, b.MinDelayExcess, b.BaseFee, b.GasUsed, b.GasLimit, b.BlockGasCost,
			b.ExtDataGasUsed, b.FeesSpent, uint32(len(b.Transactions)), b.CumulativeTransactions,
			view(b.Miner), fixed32(b.StateRoot), fixed32(b.ReceiptsRoot), fixed32(b.TransactionsRoot),
			b.Size, view(b.ExtraData), r.removed, r.version)
	})
}

func (w *Writer) insertHashes(ctx context.Context, rows []hashRow) error {
	return w.send(ctx, "block_hashes", "chain_id, hash, number, removed, version", len(rows), func(batch driver.Batch, i int) error {
		r := rows[i]
		return batch.Append(r.chainID, fixed32(r.hash), r.number, r.removed, r.version)
	})
}

func (w *Writer) insertHeads(ctx context.Context, heads map[uint64]headRow) error {
	rows := make([]headRow, 0, len(heads))
	for _, h := range heads {
		rows = append(rows, h)
	}
	return w.send(ctx, "chain_heads", "chain_id, number, hash, timestamp, cumulative_transactions, version", len(rows), func(batch driver.Batch, i int) error {
		b := rows[i].b
		return batch.Append(b.ChainId, b.Number, fixed32(b.Hash), b.Timestamp, b.CumulativeTransactions, rows[i].version)
	})
}

const txColumns = "chain_id, block_number, block_hash, block_timestamp, tx_index, hash, type, from_address, to_address, value, gas, gas_price, max_fee_per_gas, max_priority_fee_per_gas, nonce, input, status, gas_used, cumulative_gas_used, effective_gas_price, contract_address, access_list, version"

// The three large inserts (transactions, logs, call frames) append column
// by column: one typed slice per column, reused for every block of
// flushRows, instead of boxing every value of every row into the driver's
// row Append. The small ones (blocks, hashes, heads) go row by row.

func (w *Writer) insertTxs(ctx context.Context, rows []*txRow) error {
	n := min(len(rows), flushRows)
	var (
		chainID, blockNumber, blockTimestamp, gas, nonce, gasUsed, cumulativeGasUsed, version = make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n)
		txIndex                                                                               = make([]uint32, n)
		typ, status                                                                           = make([]uint8, n), make([]uint8, n)
		blockHash, hash, from, to, value, gasPrice, maxFee, maxPriorityFee, input             = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		effectiveGasPrice, contractAddress, accessList                                        = make([]string, n), make([]string, n), make([]string, n)
	)
	return w.sendBlocks(ctx, "transactions_by_block", txColumns, len(rows), func(batch driver.Batch, lo, hi int) error {
		for i, r := range rows[lo:hi] {
			b, tx := r.b, r.tx
			chainID[i], blockNumber[i], blockHash[i], blockTimestamp[i] = b.ChainId, b.Number, fixed32(b.Hash), b.Timestamp
			txIndex[i], hash[i], typ[i], from[i], to[i], value[i] = tx.Index, fixed32(tx.Hash), uint8(tx.Type), view(tx.From), view(tx.To), tx.Value
			gas[i], gasPrice[i], maxFee[i], maxPriorityFee[i], nonce[i] = tx.Gas, tx.GasPrice, tx.MaxFeePerGas, tx.MaxPriorityFeePerGas, tx.Nonce
			input[i], status[i], gasUsed[i], cumulativeGasUsed[i] = view(tx.Input), uint8(tx.Status), tx.GasUsed, tx.CumulativeGasUsed
			effectiveGasPrice[i], contractAddress[i], version[i] = tx.EffectiveGasPrice, view(tx.ContractAddress), r.version
			// Only the webhook payload shows the access list, which a
			// replay rebuilds from this column (migration 14); most
			// transactions have none.
			al, err := codec.EncodeAccessList(tx.AccessList)
			if err != nil {
				return fmt.Errorf("transaction %x: %w", tx.Hash, err)
			}
			accessList[i] = view(al)
		}
		// The order matches txColumns.
		return appendColumns(batch, hi-lo, chainID, blockNumber, blockHash, blockTimestamp, txIndex, hash, typ, from, to,
			value, gas, gasPrice, maxFee, maxPriorityFee, nonce, input, status, gasUsed, cumulativeGasUsed,
			effectiveGasPrice, contractAddress, accessList, version)
	})
}

const txListColumns = "chain_id, block_number, block_hash, entry, version"

func (w *Writer) insertTxLists(ctx context.Context, rows []txListRow) error {
	return w.send(ctx, "block_transactions", txListColumns, len(rows), func(batch driver.Batch, i int) error {
		r := rows[i]
		return batch.Append(r.b.ChainId, r.b.Number, fixed32(r.b.Hash), view(r.entry), r.version)
	})
}

const logColumns = "chain_id, block_number, block_hash, block_timestamp, tx_index, log_index, address, topic0, topic1, topic2, topic3, data, version"

func (w *Writer) insertLogs(ctx context.Context, rows []logRow) error {
	n := min(len(rows), flushRows)
	var (
		chainID, blockNumber, blockTimestamp, version = make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n)
		txIndex, logIndex                             = make([]uint32, n), make([]uint32, n)
		blockHash, address, data                      = make([]string, n), make([]string, n), make([]string, n)
		topics                                        = [4][]string{make([]string, n), make([]string, n), make([]string, n), make([]string, n)}
	)
	return w.sendBlocks(ctx, "logs", logColumns, len(rows), func(batch driver.Batch, lo, hi int) error {
		for i, r := range rows[lo:hi] {
			b, tx, l := r.tx.b, r.tx.tx, r.l
			chainID[i], blockNumber[i], blockHash[i], blockTimestamp[i] = b.ChainId, b.Number, fixed32(b.Hash), b.Timestamp
			txIndex[i], logIndex[i], address[i], data[i], version[i] = tx.Index, l.LogIndex, view(l.Address), view(l.Data), r.version
			for j := range topics {
				topics[j][i] = ""
				if j < len(l.Topics) {
					topics[j][i] = view(l.Topics[j])
				}
			}
		}
		// The order matches logColumns.
		return appendColumns(batch, hi-lo, chainID, blockNumber, blockHash, blockTimestamp, txIndex, logIndex,
			address, topics[0], topics[1], topics[2], topics[3], data, version)
	})
}

const internalColumns = "chain_id, block_number, block_hash, block_timestamp, tx_index, trace_position, call_index, depth, type, from_address, to_address, value, gas, gas_used, error, revert_reason, input, output, version"

// flushRows is how many rows the driver buffers before it sends them as one
// block of the INSERT (the server squashes the blocks of an INSERT into one
// part). Sending as it goes keeps the driver's column buffers small and
// reused instead of grown to the size of the batch, and lets ClickHouse
// parse one block while the next is built. The driver makes new columns for
// every INSERT and grows them by doubling while the first block fills, so
// the first block is kept small: that growth is paid per INSERT, and a
// larger block made it a large share of the processor's CPU
// (bench/history.md).
const flushRows = 4096

// insertInternal is the largest insert: about 20 frames per transaction on
// busy chains. Without withIO every row's input and output are empty.
func (w *Writer) insertInternal(ctx context.Context, rows []internalRow, withIO bool) error {
	n := min(len(rows), flushRows)
	var (
		chainID, blockNumber, blockTimestamp, gas, gasUsed, version = make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n)
		txIndex, tracePosition, depth                               = make([]uint32, n), make([]uint32, n), make([]uint32, n)
		blockHash, callIndex, typ, from, to, value                  = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		errs, revertReason, input, output                           = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	)
	return w.sendBlocks(ctx, "internal_transactions", internalColumns, len(rows), func(batch driver.Batch, lo, hi int) error {
		for i, r := range rows[lo:hi] {
			b, tx, it := r.tx.b, r.tx.tx, r.it
			chainID[i], blockNumber[i], blockHash[i], blockTimestamp[i] = b.ChainId, b.Number, fixed32(b.Hash), b.Timestamp
			txIndex[i], tracePosition[i], callIndex[i], depth[i] = tx.Index, it.TracePosition, it.CallIndex, it.Depth
			typ[i], from[i], to[i], value[i], gas[i], gasUsed[i] = it.Type, view(it.From), view(it.To), it.Value, it.Gas, it.GasUsed
			errs[i], revertReason[i], version[i] = it.Error, it.RevertReason, r.version
			if withIO {
				input[i], output[i] = view(it.Input), view(it.Output)
			}
		}
		// The order matches internalColumns.
		return appendColumns(batch, hi-lo, chainID, blockNumber, blockHash, blockTimestamp, txIndex,
			tracePosition, callIndex, depth, typ, from, to, value, gas, gasUsed, errs, revertReason, input, output, version)
	})
}

// appendColumns appends the first k values of each column slice to the
// batch's columns, in order.
func appendColumns(batch driver.Batch, k int, columns ...any) error {
	for i, c := range columns {
		switch v := c.(type) {
		case []uint64:
			c = v[:k]
		case []uint32:
			c = v[:k]
		case []uint8:
			c = v[:k]
		case []string:
			c = v[:k]
		default:
			return fmt.Errorf("column %d: unsupported %T", i, c)
		}
		if err := batch.Column(i).Append(c); err != nil {
			return fmt.Errorf("column %d: %w", i, err)
		}
	}
	return nil
}

// view is b as a string without a copy. The sink only reads the decoded
// records, which nothing modifies once decoded, and the strings live no
// longer than the insert: this saves copying every input, output and
// address of a batch once more before the driver copies it into its column.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// fixed32 pads or cuts a hash to the 32 bytes of a FixedString(32) column.
func fixed32(b []byte) string {
	if len(b) == 32 {
		return view(b)
	}
	var out [32]byte
	copy(out[:], b)
	return string(out[:])
}
