// Package storetest writes test rows into moraine's ClickHouse tables the way
// the processor does (PrepareBatch with the columns listed; a version per
// row; removed rows for orphaned blocks), for the store, API and SDK tests.
package storetest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/big"
	"slices"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/query/internal/data/store"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// Block is one row of blocks (and of block_hashes).
type Block struct {
	ChainID, Number        uint64
	Hash, Parent           store.Hash
	Timestamp              uint64
	TimestampMs            *uint64
	MinDelayExcess         *uint64
	BaseFee                string
	GasUsed, GasLimit      uint64
	GasCost, FeesSpent     string
	TxCount                uint32
	CumulativeTransactions uint64
	Removed                bool
	Version                uint64
}

// Tx is one row of transactions.
type Tx struct {
	ChainID, BlockNumber uint64
	BlockHash            store.Hash
	BlockTimestamp       uint64
	Index                uint32
	Hash                 store.Hash
	Type                 uint8
	From, To             []byte
	ContractAddress      []byte
	Value                string
	Gas                  uint64
	GasPrice             string
	EffectiveGasPrice    string
	Nonce                uint64
	Input                []byte
	Status               uint8
	GasUsed              uint64
	Version              uint64
	// The block's other fields its block_transactions row carries (nil
	// when the block has none).
	BlockTimestampMs, BlockMinDelayExcess *uint64
}

// HashOf is a deterministic fake hash for (chain, number, salt).
func HashOf(chainID, number uint64, salt string) store.Hash {
	b := make([]byte, 16, 16+len(salt))
	binary.BigEndian.PutUint64(b, chainID)
	binary.BigEndian.PutUint64(b[8:], number)
	return sha256.Sum256(append(b, salt...))
}

// Address is a deterministic fake 20-byte address.
func Address(n uint64) []byte {
	h := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("addr"), n))
	return h[:20]
}

// Chain returns blocks from..to (inclusive) every step numbers, linked by
// parent hash, 2 s apart, with version 1 and salt in the hashes (a reorg
// uses another salt).
func Chain(chainID, from, to, step uint64, salt string) []Block {
	var out []Block
	var cum uint64
	for n := from; n <= to; n += step {
		txs := uint32(n % 3)
		cum += uint64(txs)
		out = append(out, Block{
			ChainID: chainID, Number: n,
			Hash: HashOf(chainID, n, salt), Parent: HashOf(chainID, n-step, salt),
			Timestamp: 1_700_000_000 + 2*n,
			BaseFee:   "25000000000", GasUsed: 21000 * uint64(txs), GasLimit: 15_000_000,
			GasCost: "0", FeesSpent: new(big.Int).Mul(big.NewInt(int64(21000*txs)), big.NewInt(25_000_000_000)).String(),
			TxCount: txs, CumulativeTransactions: cum, Version: 1,
		})
		if to-n < step {
			break
		}
	}
	return out
}

// InsertBlocks writes rows to blocks and block_hashes.
func InsertBlocks(ctx context.Context, conn driver.Conn, rows []Block) error {
	b, err := conn.PrepareBatch(ctx, `INSERT INTO blocks (chain_id, number, hash, parent_hash, timestamp, timestamp_ms,
		min_delay_excess, base_fee, gas_used, gas_limit, gas_cost, fees_spent, tx_count, cumulative_transactions, removed, version)`)
	if err != nil {
		return fmt.Errorf("prepare blocks: %w", err)
	}
	for _, r := range rows {
		if err := b.Append(r.ChainID, r.Number, string(r.Hash[:]), string(r.Parent[:]), r.Timestamp, r.TimestampMs,
			r.MinDelayExcess, r.BaseFee, r.GasUsed, r.GasLimit, r.GasCost, r.FeesSpent, r.TxCount,
			r.CumulativeTransactions, boolU8(r.Removed), r.Version); err != nil {
			return fmt.Errorf("append block: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("send blocks: %w", err)
	}
	h, err := conn.PrepareBatch(ctx, `INSERT INTO block_hashes (chain_id, hash, number, removed, version)`)
	if err != nil {
		return fmt.Errorf("prepare block_hashes: %w", err)
	}
	for _, r := range rows {
		if err := h.Append(r.ChainID, string(r.Hash[:]), r.Number, boolU8(r.Removed), r.Version); err != nil {
			return fmt.Errorf("append block hash: %w", err)
		}
	}
	if err := h.Send(); err != nil {
		return fmt.Errorf("send block_hashes: %w", err)
	}
	return nil
}

// SetHead writes the chain_heads row for b with version.
func SetHead(ctx context.Context, conn driver.Conn, b Block, version uint64) error {
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO chain_heads (chain_id, number, hash, timestamp, cumulative_transactions, version)`)
	if err != nil {
		return fmt.Errorf("prepare chain_heads: %w", err)
	}
	if err := batch.Append(b.ChainID, b.Number, string(b.Hash[:]), b.Timestamp, b.CumulativeTransactions, version); err != nil {
		return err
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("send chain_heads: %w", err)
	}
	return nil
}

// InsertTxs writes rows to transactions_by_block and their blocks' rows to
// block_transactions, with the block's fields, as the processor does.
func InsertTxs(ctx context.Context, conn driver.Conn, rows []Tx) error {
	if err := insertTxs(ctx, conn, "transactions_by_block", rows); err != nil {
		return err
	}
	return insertTxLists(ctx, conn, rows, true)
}

// InsertTxsWithoutBlockFields is InsertTxs as processors wrote the
// block_transactions rows before they carried the block's fields.
func InsertTxsWithoutBlockFields(ctx context.Context, conn driver.Conn, rows []Tx) error {
	if err := insertTxs(ctx, conn, "transactions_by_block", rows); err != nil {
		return err
	}
	return insertTxLists(ctx, conn, rows, false)
}

// InsertTxRows writes rows to transactions_by_block only, as processors did
// before migration 18.
func InsertTxRows(ctx context.Context, conn driver.Conn, rows []Tx) error {
	return insertTxs(ctx, conn, "transactions_by_block", rows)
}

// insertTxLists writes a block_transactions row for each block (and
// version) of rows, its transactions in index order, each as the
// processor's sink encodes it, with the block's fields when blockFields.
func insertTxLists(ctx context.Context, conn driver.Conn, rows []Tx, blockFields bool) error {
	type blockKey struct {
		chainID, number uint64
		hash            store.Hash
		version         uint64
	}
	lists := map[blockKey]*record.BlockTxList{}
	var order []blockKey
	for _, r := range rows {
		k := blockKey{r.ChainID, r.BlockNumber, r.BlockHash, r.Version}
		l, ok := lists[k]
		if !ok {
			l = &record.BlockTxList{}
			if blockFields {
				ts := r.BlockTimestamp
				l.BlockTimestamp, l.BlockTimestampMilliseconds, l.BlockMinDelayExcess = &ts, r.BlockTimestampMs, r.BlockMinDelayExcess
			}
			lists[k] = l
			order = append(order, k)
		}
		price := r.GasPrice
		if price == "" {
			price = r.EffectiveGasPrice
		}
		l.Txs = append(l.Txs, &record.ListedTx{Index: r.Index, Hash: r.Hash[:], Detail: &record.TxDetail{
			Type: uint32(r.Type), From: r.From, To: r.To, ContractAddress: r.ContractAddress, Value: r.Value, Gas: r.Gas,
			GasPrice: price, Nonce: r.Nonce, Input: r.Input[:min(len(r.Input), 4)], Status: uint32(r.Status), GasUsed: r.GasUsed,
		}, InputLength: uint64(len(r.Input))})
	}
	b, err := conn.PrepareBatch(ctx, `INSERT INTO block_transactions (chain_id, block_number, block_hash, entry, version)`)
	if err != nil {
		return fmt.Errorf("prepare block_transactions: %w", err)
	}
	for _, k := range order {
		l := lists[k]
		// Rows written twice (a redelivery) are one transaction of the list.
		slices.SortStableFunc(l.Txs, func(a, b *record.ListedTx) int { return cmp.Compare(a.Index, b.Index) })
		l.Txs = slices.CompactFunc(l.Txs, func(a, b *record.ListedTx) bool { return a.Index == b.Index })
		entry, err := codec.EncodeBlockTxList(l)
		if err != nil {
			return err
		}
		if err := b.Append(k.chainID, k.number, string(k.hash[:]), string(entry), k.version); err != nil {
			return fmt.Errorf("append block_transactions: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("send block_transactions: %w", err)
	}
	return nil
}

// InsertTransactions writes rows to transactions, as processors did before
// migration 16.
func InsertTransactions(ctx context.Context, conn driver.Conn, rows []Tx) error {
	return insertTxs(ctx, conn, "transactions", rows)
}

func insertTxs(ctx context.Context, conn driver.Conn, table string, rows []Tx) error {
	b, err := conn.PrepareBatch(ctx, `INSERT INTO `+table+` (chain_id, block_number, block_hash, block_timestamp, tx_index,
		hash, type, from_address, to_address, value, gas, gas_price, nonce, input, status, gas_used, effective_gas_price,
		contract_address, version)`)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", table, err)
	}
	for _, r := range rows {
		if err := b.Append(r.ChainID, r.BlockNumber, string(r.BlockHash[:]), r.BlockTimestamp, r.Index,
			string(r.Hash[:]), r.Type, string(r.From), string(r.To), r.Value, r.Gas, r.GasPrice, r.Nonce,
			string(r.Input), r.Status, r.GasUsed, r.EffectiveGasPrice, string(r.ContractAddress), r.Version); err != nil {
			return fmt.Errorf("append tx: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("send %s: %w", table, err)
	}
	return nil
}

func boolU8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// IndexRow is one row of address_lists (migration 8). Detail is the row's
// protobuf; when it is nil, a ListTransactions row gets a TxDetail made of
// the transaction fields below, with BlockTime as its block timestamp
// (nil: a row written before details carried it).
type IndexRow struct {
	ChainID   uint64
	Address   []byte
	List      uint8
	Block     uint64
	TxIndex   uint32
	Position  uint32
	Sub       uint32
	BlockHash store.Hash
	TxHash    store.Hash
	Roles     uint8
	Detail    []byte
	// The transaction fields of a ListTransactions row.
	TxType    uint8
	From, To  []byte
	Value     string
	Gas       uint64
	GasPrice  string
	Nonce     uint64
	Selector  []byte
	Status    uint8
	GasUsed   uint64
	BlockTime *uint64
	Version   uint64
}

// InsertIndex writes rows to address_lists.
func InsertIndex(ctx context.Context, conn driver.Conn, rows []IndexRow) error {
	b, err := conn.PrepareBatch(ctx, `INSERT INTO address_lists (list_key, roles, entry, version)`)
	if err != nil {
		return fmt.Errorf("prepare address_lists: %w", err)
	}
	for _, r := range rows {
		detail, err := r.detail()
		if err != nil {
			return err
		}
		k := schema.NewListKey(r.ChainID, [20]byte(r.Address), r.List, schema.ListPosition{Block: r.Block, TxIndex: r.TxIndex,
			Position: r.Position, Sub: r.Sub, BlockHash: r.BlockHash})
		if err := b.Append(string(k[:]), r.Roles, string(r.TxHash[:])+string(detail), r.Version); err != nil {
			return fmt.Errorf("append index row: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("send address_lists: %w", err)
	}
	return nil
}

// InsertAddressIndex writes rows to migration 6's address_index, as
// processors before migration 8 did (for tests of the upgrade copy).
func InsertAddressIndex(ctx context.Context, conn driver.Conn, rows []IndexRow) error {
	b, err := conn.PrepareBatch(ctx, `INSERT INTO address_index (chain_id, address, list, block_number, tx_index, position,
		sub_index, block_hash, tx_hash, roles, detail, version)`)
	if err != nil {
		return fmt.Errorf("prepare address_index: %w", err)
	}
	for _, r := range rows {
		detail, err := r.detail()
		if err != nil {
			return err
		}
		if err := b.Append(r.ChainID, string(r.Address), r.List, r.Block, r.TxIndex, r.Position, r.Sub,
			string(r.BlockHash[:]), string(r.TxHash[:]), r.Roles, string(detail), r.Version); err != nil {
			return fmt.Errorf("append index row: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("send address_index: %w", err)
	}
	return nil
}

// detail is r's Detail, or the TxDetail of its transaction fields.
func (r IndexRow) detail() ([]byte, error) {
	if r.Detail != nil {
		return r.Detail, nil
	}
	d := &record.TxDetail{Type: uint32(r.TxType), From: r.From, To: r.To, Value: r.Value, Gas: r.Gas, GasPrice: r.GasPrice,
		Nonce: r.Nonce, Input: r.Selector, Status: uint32(r.Status), GasUsed: r.GasUsed, BlockTimestamp: r.BlockTime}
	return codec.EncodeTxDetail(d)
}

// TxLookupRow is one row of transactions_by_hash (or transaction_lookup).
type TxLookupRow struct {
	ChainID   uint64
	Hash      store.Hash
	BlockHash store.Hash
	Block     uint64
	TxIndex   uint32
	Detail    *record.TxDetail
	Version   uint64
}

// InsertTxLookup writes rows to transactions_by_hash.
func InsertTxLookup(ctx context.Context, conn driver.Conn, rows []TxLookupRow) error {
	b, err := conn.PrepareBatch(ctx, `INSERT INTO transactions_by_hash (tx_key, entry, version)`)
	if err != nil {
		return fmt.Errorf("prepare transactions_by_hash: %w", err)
	}
	for _, r := range rows {
		detail, err := codec.EncodeTxDetail(r.Detail)
		if err != nil {
			return err
		}
		k := schema.NewTxKey(r.ChainID, r.Hash, r.BlockHash)
		entry := append(schema.TxEntryPlace(nil, r.Block, r.TxIndex), detail...)
		if err := b.Append(string(k[:]), string(entry), r.Version); err != nil {
			return fmt.Errorf("append tx lookup: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("send transactions_by_hash: %w", err)
	}
	return nil
}

// InsertTransactionLookup writes rows to migration 6's transaction_lookup,
// as processors before migration 9 did (for tests of the upgrade copy).
func InsertTransactionLookup(ctx context.Context, conn driver.Conn, rows []TxLookupRow) error {
	b, err := conn.PrepareBatch(ctx, `INSERT INTO transaction_lookup (chain_id, hash, block_hash, block_number, tx_index, detail, version)`)
	if err != nil {
		return fmt.Errorf("prepare transaction_lookup: %w", err)
	}
	for _, r := range rows {
		detail, err := codec.EncodeTxDetail(r.Detail)
		if err != nil {
			return err
		}
		if err := b.Append(r.ChainID, string(r.Hash[:]), string(r.BlockHash[:]), r.Block, r.TxIndex, string(detail), r.Version); err != nil {
			return fmt.Errorf("append tx lookup: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("send transaction_lookup: %w", err)
	}
	return nil
}

// Queries is how many times the store registered on reg ran the named
// query (moraine_query_clickhouse_query_duration_seconds' sample count).
func Queries(t testing.TB, reg *prometheus.Registry, query string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "moraine_query_clickhouse_query_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "query" && l.GetValue() == query {
					return float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return 0
}
