package replay

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/ext"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// source reads the indexed tables (the sink's, migration 2 and 11) back
// into the records the matcher matched: a transaction with its receipt,
// logs, call frames and access list, in a block with the header fields a
// payload shows. What it reads is what the sink wrote from the blocks
// topic's records, field for field, so payload.Build makes the same bytes
// of it (TestRebuiltBlocksEqualLive).
type source struct {
	conn    driver.Conn
	timeout time.Duration
}

// External tables: the webhook's addresses (a: 20 bytes; t: the same
// left-padded to 32 bytes, as an indexed event topic holds an address), the
// transactions wanted (h: block hash, t: transaction hash) and the same by
// their place in the block (h, i: tx_index), as logs and call frames name
// their transaction (migration 17). They travel with the query (native
// protocol), so a webhook with 100,000 addresses costs no query text.
const (
	watchedTable = "replay_watched"
	wantedTable  = "replay_wanted"
	placesTable  = "replay_places"
)

const (
	// qHead is the chain's indexed head.
	qHead = `SELECT number FROM chain_heads FINAL WHERE chain_id = ?`
	// qCanonical lists the canonical blocks of a range; removed is tested
	// outside FINAL (a non-key filter must see the latest row only).
	qCanonical = `SELECT number, hash, timestamp, receipts_root, version FROM (
  SELECT number, hash, timestamp, receipts_root, removed, version FROM blocks FINAL
  WHERE chain_id = ? AND number >= ? AND number <= ?)
WHERE removed = 0`
	// qCandidates lists the transactions of a range that touch one of the
	// addresses in any role the matcher looks at (package match): a
	// superset (any indexed topic of a log counts, not only a transfer's
	// parties), which the matcher then decides on. Rows of orphaned blocks
	// come too; the caller keeps the canonical ones.
	qCandidates = candidatesOf + `)`
	// qCandidatesInternal adds the parties of call frames (webhooks with
	// includeInternalTxs).
	qCandidatesInternal = candidatesOf + `
    OR (block_hash, tx_index) IN (SELECT block_hash, tx_index FROM internal_transactions
      WHERE chain_id = ? AND block_number >= ? AND block_number <= ?
        AND (from_address IN (SELECT a FROM ` + watchedTable + `) OR to_address IN (SELECT a FROM ` + watchedTable + `))))`
	// candidatesOf is the two queries' common part: a transaction's own
	// parties, and its logs' (a log names its transaction by block hash and
	// tx_index).
	candidatesOf = `SELECT block_number, block_hash, hash FROM transactions_by_block
WHERE chain_id = ? AND block_number >= ? AND block_number <= ?
  AND (from_address IN (SELECT a FROM ` + watchedTable + `) OR to_address IN (SELECT a FROM ` + watchedTable + `)
    OR contract_address IN (SELECT a FROM ` + watchedTable + `)
    OR (block_hash, tx_index) IN (SELECT block_hash, tx_index FROM logs
      WHERE chain_id = ? AND block_number >= ? AND block_number <= ?
        AND (address IN (SELECT a FROM ` + watchedTable + `) OR topic1 IN (SELECT t FROM ` + watchedTable + `)
          OR topic2 IN (SELECT t FROM ` + watchedTable + `) OR topic3 IN (SELECT t FROM ` + watchedTable + `)))`

	// The rows of the wanted transactions. No FINAL: a redelivered block
	// wrote its rows twice until a merge, and the reader keeps one per key.
	qTxs = `SELECT block_number, block_hash, block_timestamp, tx_index, hash, type, from_address, to_address, value, gas,
  gas_price, max_fee_per_gas, max_priority_fee_per_gas, nonce, input, status, gas_used, cumulative_gas_used,
  effective_gas_price, contract_address, access_list
FROM transactions_by_block WHERE chain_id = ? AND block_number >= ? AND block_number <= ?
  AND (block_hash, hash) IN (SELECT h, t FROM ` + wantedTable + `)`
	qLogs = `SELECT block_hash, tx_index, log_index, address, topic0, topic1, topic2, topic3, data
FROM logs WHERE chain_id = ? AND block_number >= ? AND block_number <= ?
  AND (block_hash, tx_index) IN (SELECT h, i FROM ` + placesTable + `)`
	qInternal = `SELECT block_hash, tx_index, trace_position, call_index, depth, type, from_address, to_address, value, gas, gas_used
FROM internal_transactions WHERE chain_id = ? AND block_number >= ? AND block_number <= ?
  AND (block_hash, tx_index) IN (SELECT h, i FROM ` + placesTable + `)`
	// qBlockVersion is the blocks-topic offset of the record that wrote a
	// canonical block (the sink's version).
	qBlockVersion = `SELECT version FROM (SELECT removed, version FROM blocks FINAL WHERE chain_id = ? AND number = ?) WHERE removed = 0`
)

// txKey names a transaction in a block: rows of an orphaned block and of
// the canonical one never mix.
type txKey struct {
	block [32]byte
	tx    [32]byte
}

func keyOf(block, tx []byte) txKey {
	var k txKey
	copy(k.block[:], block)
	copy(k.tx[:], tx)
	return k
}

// placeKey names a transaction by its place in a block, as logs and call
// frames do.
type placeKey struct {
	block [32]byte
	index uint32
}

func placeOf(block []byte, index uint32) placeKey {
	p := placeKey{index: index}
	copy(p.block[:], block)
	return p
}

// header is what a payload shows of a block.
type header struct {
	number       uint64
	hash         []byte
	timestamp    uint64
	receiptsRoot []byte
	// version is the blocks-topic offset of the record that wrote it.
	version uint64
}

func (s *source) ctx(ctx context.Context, tables ...*ext.Table) (context.Context, context.CancelFunc) {
	ctx, cancel := chclient.WithTimeout(ctx, s.timeout, nil)
	if len(tables) > 0 {
		ctx = clickhouse.Context(ctx, clickhouse.WithExternalTable(tables...))
	}
	return ctx, cancel
}

// query runs q and calls scan for every row.
func (s *source) query(ctx context.Context, what, q string, tables []*ext.Table, scan func(driver.Rows) error, args ...any) error {
	ctx, cancel := s.ctx(ctx, tables...)
	defer cancel()
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("replay: %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("replay: %s: scan: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("replay: %s: %w", what, err)
	}
	return nil
}

// head is the chain's indexed head (false: nothing indexed).
func (s *source) head(ctx context.Context, chain uint64) (uint64, bool, error) {
	var n uint64
	found := false
	err := s.query(ctx, "chain head", qHead, nil, func(r driver.Rows) error { found = true; return r.Scan(&n) }, chain)
	return n, found, err
}

// blockVersion is the blocks-topic offset of canonical block number n
// (false: not indexed).
func (s *source) blockVersion(ctx context.Context, chain, n uint64) (uint64, bool, error) {
	var v uint64
	found := false
	err := s.query(ctx, "block version", qBlockVersion, nil, func(r driver.Rows) error { found = true; return r.Scan(&v) }, chain, n)
	return v, found, err
}

// canonical returns the canonical blocks of from..to by number.
func (s *source) canonical(ctx context.Context, chain, from, to uint64) (map[uint64]header, error) {
	out := map[uint64]header{}
	err := s.query(ctx, "canonical blocks", qCanonical, nil, func(r driver.Rows) error {
		var h header
		var hash, root string
		if err := r.Scan(&h.number, &hash, &h.timestamp, &root, &h.version); err != nil {
			return err
		}
		h.hash, h.receiptsRoot = []byte(hash), []byte(root)
		out[h.number] = h
		return nil
	}, chain, from, to)
	return out, err
}

// candidate is a transaction that touches a watched address.
type candidate struct {
	block uint64
	key   txKey
}

// candidates returns the transactions of from..to (any block, canonical or
// not) that touch one of addrs in a role the matcher looks at, in block
// order, each once.
func (s *source) candidates(ctx context.Context, chain, from, to uint64, addrs []evm.Address, internal bool) ([]candidate, error) {
	if len(addrs) == 0 {
		return nil, nil
	}
	watched, err := ext.NewTable(watchedTable, ext.Column("a", column.Type("String")), ext.Column("t", column.Type("String")))
	if err != nil {
		return nil, err
	}
	var topic [32]byte
	for _, a := range addrs {
		copy(topic[12:], a[:])
		if err := watched.Append(string(a[:]), string(topic[:])); err != nil {
			return nil, err
		}
	}
	q, args := qCandidates, []any{chain, from, to, chain, from, to}
	if internal {
		q, args = qCandidatesInternal, append(args, chain, from, to)
	}
	seen := map[txKey]bool{}
	var out []candidate
	err = s.query(ctx, "candidate transactions", q, []*ext.Table{watched}, func(r driver.Rows) error {
		var c candidate
		var block, tx string
		if err := r.Scan(&c.block, &block, &tx); err != nil {
			return err
		}
		c.key = keyOf([]byte(block), []byte(tx))
		if !seen[c.key] {
			seen[c.key] = true
			out = append(out, c)
		}
		return nil
	}, args...)
	slices.SortFunc(out, func(x, y candidate) int { return cmp.Compare(x.block, y.block) })
	return out, err
}

// transactions reads the wanted transactions of from..to with their logs
// and call frames, as the sink wrote them from their block records, by
// key. A key the tables lack is absent.
func (s *source) transactions(ctx context.Context, chain, from, to uint64, wanted map[txKey]bool) (map[txKey]*txRow, error) {
	out := map[txKey]*txRow{}
	if len(wanted) == 0 {
		return out, nil
	}
	t, err := ext.NewTable(wantedTable, ext.Column("h", column.Type("FixedString(32)")), ext.Column("t", column.Type("FixedString(32)")))
	if err != nil {
		return nil, err
	}
	for k := range wanted {
		if err := t.Append(string(k.block[:]), string(k.tx[:])); err != nil {
			return nil, err
		}
	}
	err = s.query(ctx, "transactions", qTxs, []*ext.Table{t}, func(r driver.Rows) error {
		var (
			row                                                  txRow
			blockHash, hash, from, to, input, contract, access   string
			typ, status                                          uint8
			value, gasPrice, maxFee, maxPriority, effectivePrice string
		)
		tx := &record.Transaction{}
		if err := r.Scan(&row.block, &blockHash, &row.timestamp, &tx.Index, &hash, &typ, &from, &to, &value, &tx.Gas,
			&gasPrice, &maxFee, &maxPriority, &tx.Nonce, &input, &status, &tx.GasUsed, &tx.CumulativeGasUsed,
			&effectivePrice, &contract, &access); err != nil {
			return err
		}
		tx.Hash, tx.Type, tx.From, tx.To, tx.Value = []byte(hash), uint32(typ), bytesOf(from), bytesOf(to), value
		tx.GasPrice, tx.MaxFeePerGas, tx.MaxPriorityFeePerGas = gasPrice, maxFee, maxPriority
		tx.Input, tx.Status, tx.EffectiveGasPrice, tx.ContractAddress = bytesOf(input), uint32(status), effectivePrice, bytesOf(contract)
		list, err := codec.DecodeAccessList([]byte(access))
		if err != nil {
			return fmt.Errorf("transaction %x: %w", hash, err)
		}
		tx.AccessList = list
		row.blockHash, row.tx = []byte(blockHash), tx
		// A redelivered block wrote the same row twice: keep one.
		out[keyOf(row.blockHash, tx.Hash)] = &row
		return nil
	}, chain, from, to)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return out, nil
	}
	// Logs and call frames name their transaction by its place in the block.
	keys := map[placeKey]txKey{}
	for k, row := range out {
		keys[placeKey{block: k.block, index: row.tx.Index}] = k
	}
	places := func() (*ext.Table, error) {
		t, err := ext.NewTable(placesTable, ext.Column("h", column.Type("FixedString(32)")), ext.Column("i", column.Type("UInt32")))
		if err != nil {
			return nil, err
		}
		for p := range keys {
			if err := t.Append(string(p.block[:]), p.index); err != nil {
				return nil, err
			}
		}
		return t, nil
	}
	if t, err = places(); err != nil {
		return nil, err
	}
	logs := map[txKey]map[uint32]*record.Log{}
	err = s.query(ctx, "logs", qLogs, []*ext.Table{t}, func(r driver.Rows) error {
		var blockHash, address, data string
		var txIndex uint32
		var topics [4]string
		l := &record.Log{}
		if err := r.Scan(&blockHash, &txIndex, &l.LogIndex, &address, &topics[0], &topics[1], &topics[2], &topics[3], &data); err != nil {
			return err
		}
		l.Address, l.Data = bytesOf(address), bytesOf(data)
		// The sink writes the topics a log has and '' for the rest.
		for _, tp := range topics {
			if tp == "" {
				break
			}
			l.Topics = append(l.Topics, []byte(tp))
		}
		k := keys[placeOf([]byte(blockHash), txIndex)]
		if logs[k] == nil {
			logs[k] = map[uint32]*record.Log{}
		}
		logs[k][l.LogIndex] = l
		return nil
	}, chain, from, to)
	if err != nil {
		return nil, err
	}
	if t, err = places(); err != nil {
		return nil, err
	}
	frames := map[txKey]map[uint32]*record.InternalTransaction{}
	err = s.query(ctx, "internal transactions", qInternal, []*ext.Table{t}, func(r driver.Rows) error {
		var blockHash, from, to string
		var txIndex uint32
		f := &record.InternalTransaction{}
		if err := r.Scan(&blockHash, &txIndex, &f.TracePosition, &f.CallIndex, &f.Depth, &f.Type, &from, &to, &f.Value, &f.Gas, &f.GasUsed); err != nil {
			return err
		}
		f.From, f.To = bytesOf(from), bytesOf(to)
		k := keys[placeOf([]byte(blockHash), txIndex)]
		if frames[k] == nil {
			frames[k] = map[uint32]*record.InternalTransaction{}
		}
		frames[k][f.TracePosition] = f
		return nil
	}, chain, from, to)
	if err != nil {
		return nil, err
	}
	for k, row := range out {
		for _, l := range logs[k] {
			row.tx.Logs = append(row.tx.Logs, l)
		}
		slices.SortFunc(row.tx.Logs, func(x, y *record.Log) int { return cmp.Compare(x.LogIndex, y.LogIndex) })
		for _, f := range frames[k] {
			row.tx.InternalTransactions = append(row.tx.InternalTransactions, f)
		}
		slices.SortFunc(row.tx.InternalTransactions, func(x, y *record.InternalTransaction) int {
			return cmp.Compare(x.TracePosition, y.TracePosition)
		})
	}
	return out, nil
}

// txRow is one transaction read back, with its block's place.
type txRow struct {
	block     uint64
	blockHash []byte
	timestamp uint64
	tx        *record.Transaction
}

// bytesOf is a String column's bytes, nil when empty (as the record had
// them: proto3 decodes an empty bytes field to nil).
func bytesOf(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}
