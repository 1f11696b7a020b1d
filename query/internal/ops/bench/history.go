package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// HistoryConfig describes the synthetic transaction history SeedHistory
// writes on a chain whose blocks Seed wrote (step 1): transactions with
// their hashes, ERC-20 transfer logs and call frames, and the address index
// the transaction routes read, in the processor's layout.
//
// The address distribution is what a busy chain shows: three routers
// receive 10%, 5% and 2% of the transactions (millions of rows each, like a
// DEX router); every other party is drawn uniformly from a pool of
// Addresses accounts (a handful of transactions each). A fifth of the
// transactions call one of Tokens ERC-20 contracts: transfer(to, 1e18) from
// the sender to a pool account, with its Transfer log; the rest send value.
// One in 50 fails.
//
// Names, shared with the load generator's {addr:K} and {txhash:I}: the
// address with id K is the first 20 bytes of SHA-256("addr:K") (routers are
// 0, 1 and 2; the pool is 3..Addresses+2); token J is SHA-256("token:J");
// transaction I (0-based) has the hash SHA-256("tx:I"), is in block
// First + I/TxPerBlock at index I%TxPerBlock.
type HistoryConfig struct {
	ChainID uint64
	// Txs transactions, TxPerBlock per block from block First.
	Txs, TxPerBlock, First uint64
	// Addresses is the size of the account pool; Tokens the number of
	// ERC-20 contracts.
	Addresses, Tokens uint64
	// Chunk is the transactions per INSERT ... SELECT (default 1,000,000).
	Chunk uint64
	// Tables, when set, are the only tables seeded (of transactions_by_block,
	// transactions_by_hash, logs, internal_transactions, address_lists):
	// a database seeded before a table existed gets it alone.
	Tables []string
}

// AddressID is the address with id k of the seeded history.
func AddressID(k uint64) string {
	h := sha256.Sum256([]byte("addr:" + strconv.FormatUint(k, 10)))
	return "0x" + hex.EncodeToString(h[:20])
}

// TxHashID is the hash of seeded transaction i.
func TxHashID(i uint64) string {
	h := sha256.Sum256([]byte("tx:" + strconv.FormatUint(i, 10)))
	return "0x" + hex.EncodeToString(h[:])
}

// historyRows is every seeded transaction of a chunk with its parties; the
// inserts below select from it. Its parameters: chain, transactions per
// block, first block, pool size, tokens, then numbers(offset, count).
const historyRows = `
SELECT chain, i, blk, toUInt32(i % per) AS idx,
	SHA256(concat(toString(chain), ':', toString(blk))) AS bh,
	toUInt64(1700000000 + blk * 2) AS ts,
	SHA256(concat('tx:', toString(i))) AS th,
	toFixedString(substring(SHA256(concat('addr:', toString(3 + cityHash64(i, 1) % pool))), 1, 20), 20) AS fromA,
	cityHash64(i, 4) % 5 = 0 AS erc,
	toFixedString(substring(SHA256(concat('token:', toString(cityHash64(i, 5) % tokens))), 1, 20), 20) AS token,
	toFixedString(substring(SHA256(concat('addr:', toString(3 + cityHash64(i, 6) % pool))), 1, 20), 20) AS xferTo,
	cityHash64(i, 2) % 1000 AS hot,
	if(erc, token, toFixedString(substring(SHA256(concat('addr:',
		toString(multiIf(hot < 100, 0, hot < 150, 1, hot < 170, 2, 3 + cityHash64(i, 3) % pool)))), 1, 20), 20)) AS toA,
	toUInt8(cityHash64(i, 7) % 50 != 0) AS status,
	toUInt64(intDiv(i, 997)) AS nonce,
	if(erc, '0', '1000000000000000') AS value,
	if(erc, toUInt64(51000), toUInt64(21000)) AS gasUsed
FROM (SELECT toUInt64(?) AS chain, toUInt64(?) AS per, toUInt64(?) AS first, toUInt64(?) AS pool, toUInt64(?) AS tokens,
	number AS i, first + intDiv(number, per) AS blk FROM numbers(?, ?))`

// The seeded ERC-20 call: transfer(address,uint256) of 1e18, its Transfer
// topic and data.
const (
	transferCall  = `concat(unhex('a9059cbb000000000000000000000000'), xferTo, unhex('0000000000000000000000000000000000000000000000000de0b6b3a7640000'))`
	transferTopic = `unhex('ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef')`
	transferData  = `unhex('0000000000000000000000000000000000000000000000000de0b6b3a7640000')`
	topicOf       = `concat(unhex('000000000000000000000000'), `
)

// The details are protobufs (schemas/proto/moraine/v1/history.proto),
// spelled out in SQL so that the rows never leave ClickHouse: a field is its
// tag byte, then a varint or a length and bytes. Every seeded length is
// under 128 (one byte) and every seeded number under 2^21 (three bytes).
func sqlByte(x string) string { return "unhex(hex(toUInt8(" + x + ")))" }

func sqlVarint(x string) string {
	return "multiIf(" + x + " < 128, " + sqlByte(x) + ", " + x + " < 16384, concat(" + sqlByte(x+" % 128 + 128") + ", " +
		sqlByte("intDiv("+x+", 128)") + "), concat(" + sqlByte(x+" % 128 + 128") + ", " + sqlByte("intDiv("+x+", 128) % 128 + 128") +
		", " + sqlByte("intDiv("+x+", 16384)") + "))"
}

// sqlVarint35 is the varint of x in [2^28, 2^35): five bytes (a seeded
// block timestamp).
func sqlVarint35(x string) string {
	parts := []string{sqlByte(x + " % 128 + 128")}
	for _, d := range []string{"128", "16384", "2097152"} {
		parts = append(parts, sqlByte("intDiv("+x+", "+d+") % 128 + 128"))
	}
	parts = append(parts, sqlByte("intDiv("+x+", 268435456)"))
	return "concat(" + strings.Join(parts, ", ") + ")"
}

// sqlBytesField is a length-delimited field (tag: the key byte in hex).
func sqlBytesField(tag, s string) string {
	return "concat(unhex('" + tag + "'), " + sqlByte("length("+s+")") + ", " + s + ")"
}

var (
	// detailBlockTime is the block_timestamp field (20) that address_lists
	// details carry.
	detailBlockTime = "concat(unhex('a001'), " + sqlVarint35("ts") + ")"

	// detailBaseFee is the block_base_fee field (23) of a transaction's
	// detail: the seeded blocks' base fee.
	detailBaseFee = sqlBytesField("ba01", "'25000000000'")

	// detailTransfer is the TokenTransfer of a seeded transfer call.
	detailTransfer = "concat(unhex('0801'), " + sqlBytesField("12", "token") + ", " + sqlBytesField("1a", "fromA") + ", " +
		sqlBytesField("22", "xferTo") + ", unhex('28'), " + sqlVarint("idx") + ", " + sqlBytesField("32", "'1000000000000000000'") + ")"

	// detailTx is a seeded TxDetail with input and, when withTransfer
	// (an SQL condition), its transfer.
	detailTx = func(input, withTransfer string) string {
		return "concat(unhex('0802'), " + sqlBytesField("12", "fromA") + ", " + sqlBytesField("1a", "toA") + ", " +
			sqlBytesField("2a", "value") + ", unhex('30a08d06'), " + // gas 100000
			sqlBytesField("3a", "'25000000000'") + ", " + sqlBytesField("42", "'30000000000'") + ", " +
			sqlBytesField("4a", "'1000000000'") + ", unhex('50'), " + sqlVarint("nonce") + ", " + sqlBytesField("5a", input) +
			", unhex('60'), " + sqlByte("status") + ", unhex('68'), " + sqlVarint("gasUsed") + ", " +
			sqlBytesField("72", "'25000000000'") + ", if(" + withTransfer + ", " + sqlBytesField("7a", detailTransfer) + ", ''))"
	}
)

var (
	seedTxs = `INSERT INTO transactions_by_block (chain_id, block_number, block_hash, block_timestamp, tx_index, hash, type, from_address,
	to_address, value, gas, gas_price, max_fee_per_gas, max_priority_fee_per_gas, nonce, input, status, gas_used,
	cumulative_gas_used, effective_gas_price, contract_address, version)
SELECT chain, blk, bh, ts, idx, th, toUInt8(2), fromA, toA, value, toUInt64(100000), '25000000000', '30000000000', '1000000000',
	nonce, input, status, gasUsed, gasUsed * (idx + 1), '25000000000', '', toUInt64(1)
FROM (SELECT *, if(erc, ` + transferCall + `, '') AS input FROM (` + historyRows + `))`

	seedTxLookup = `INSERT INTO transactions_by_hash (tx_key, entry, version)
SELECT ` + schema.SQLTxKey("chain", "th", "bh") + `, concat(` + schema.SQLTxEntryPlace("blk", "idx") + `,
	` + detailTx("input", "erc AND status = 1") + `, ` + detailBlockTime + `, ` + detailBaseFee + `), toUInt64(1)
FROM (SELECT *, if(erc, ` + transferCall + `, '') AS input FROM (` + historyRows + `))`

	seedLogs = `INSERT INTO logs (chain_id, block_number, block_hash, block_timestamp, tx_index, log_index, address,
	topic0, topic1, topic2, topic3, data, version)
SELECT chain, blk, bh, ts, idx, idx, token, ` + transferTopic + `, ` + topicOf + `fromA), ` + topicOf + `xferTo), '',
	` + transferData + `, toUInt64(1)
FROM (` + historyRows + `) WHERE erc AND status = 1`

	seedFrames = `INSERT INTO internal_transactions (chain_id, block_number, block_hash, block_timestamp, tx_index,
	trace_position, call_index, depth, type, from_address, to_address, value, gas, gas_used, error, revert_reason, input,
	output, version)
SELECT chain, blk, bh, ts, idx, toUInt32(0), 'call_0', toUInt32(0), 'CALL', fromA, toA, value, toUInt64(100000), gasUsed,
	if(status = 1, '', 'execution reverted'), '', if(erc, ` + transferCall + `, ''), '', toUInt64(1)
FROM (` + historyRows + `)`

	// The transactions list: the sender (and transfer sender), the
	// recipient (the token of a transfer call) and the transfer's
	// recipient, with their roles (schemas/clickhouse/addressindex.go), one
	// row per address as the sink writes them; the transfer's parties'
	// details carry it. A party number k per row
	// (arrayJoin of numbers, which 18.16 runs several times faster than an
	// ARRAY JOIN of tuples) picks the address.
	seedIndexTxs = `INSERT INTO address_lists (list_key, roles, entry, version)
SELECT ` + schema.SQLListKey("chain", "multiIf(k = 1, fromA, k = 2, toA, xferTo)", "1", "blk", "idx", "0", "0", "bh") + `,
	toUInt8(multiIf(transfer, multiIf(k = 1, 5, k = 2, 10, 4), k = 1, if(toA = fromA, 3, 1), 2)),
	concat(th, ` + detailTx("if(erc, unhex('a9059cbb'), '')", "transfer AND k != 2") + `, ` + detailBlockTime + `), toUInt64(1)
FROM (SELECT *, erc AND status = 1 AS transfer,
	arrayJoin(multiIf(transfer AND xferTo = fromA, [1, 2], transfer, [1, 2, 3], toA = fromA, [1], [1, 2])) AS k
	FROM (` + historyRows + `))`

	// The ERC-20 lists of both parties and the token's transfers.
	seedIndexTransfers = `INSERT INTO address_lists (list_key, roles, entry, version)
SELECT ` + schema.SQLListKey("chain", "multiIf(k = 1, fromA, k = 2, xferTo, token)", "if(k = 3, 5, 2)", "blk", "idx", "idx", "0", "bh") + `,
	toUInt8(0), concat(th, ` + detailTransfer + `, ` + detailBlockTime + `), toUInt64(1)
FROM (SELECT *, arrayJoin(if(xferTo = fromA, [1, 3], [1, 2, 3])) AS k FROM (` + historyRows + `) WHERE erc AND status = 1)`
)

// SeedHistory writes cfg's transactions, chunk by chunk, each chunk's
// tables by INSERT ... SELECT (the rows never cross the wire).
func SeedHistory(ctx context.Context, conn driver.Conn, cfg HistoryConfig, logger *slog.Logger) error {
	switch {
	case cfg.Txs == 0 || cfg.TxPerBlock == 0:
		return errors.New("bench: Txs and TxPerBlock must be positive")
	case cfg.Addresses == 0 || cfg.Tokens == 0:
		return errors.New("bench: Addresses and Tokens must be positive")
	}
	if cfg.Chunk == 0 {
		cfg.Chunk = 1_000_000
	}
	start := time.Now()
	spent := map[string]time.Duration{}
	for off := uint64(0); off < cfg.Txs; off += cfg.Chunk {
		n := min(cfg.Chunk, cfg.Txs-off)
		for _, q := range []struct{ table, name, sql string }{
			{"transactions_by_block", "transactions_by_block", seedTxs}, {"transactions_by_hash", "transactions_by_hash", seedTxLookup},
			{"logs", "logs", seedLogs}, {"internal_transactions", "internal_transactions", seedFrames},
			{"address_lists", "address_lists transactions", seedIndexTxs}, {"address_lists", "address_lists transfers", seedIndexTransfers},
		} {
			if cfg.Tables != nil && !slices.Contains(cfg.Tables, q.table) {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
			t0 := time.Now()
			err := conn.Exec(cctx, q.sql, cfg.ChainID, cfg.TxPerBlock, cfg.First, cfg.Addresses, cfg.Tokens, off, n)
			spent[q.name] += time.Since(t0)
			cancel()
			if err != nil {
				return fmt.Errorf("bench: seed %s of transactions %d..%d: %w", q.name, off, off+n, err)
			}
		}
		logger.Info("seeded history", "chain_id", cfg.ChainID, "transactions", off+n, "of", cfg.Txs,
			"elapsed", time.Since(start).Round(time.Millisecond), "by_table", fmt.Sprint(spent))
	}
	return nil
}
