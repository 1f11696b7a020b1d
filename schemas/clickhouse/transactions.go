package clickhouse

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"strings"
)

// CopyTransactionLookup is the statement that copies migration 6's
// transaction_lookup rows into transactions_by_hash, for deployments
// upgrading past migration 9 (the file says how to run it).
//
//go:embed upgrades/000009_copy_transaction_lookup.sql
var CopyTransactionLookup string

// CopyTransactions is the statement that copies the rows of migration 2's
// transactions table into transactions_by_block, for deployments upgrading
// past migration 16 (the file says how to run it).
//
//go:embed upgrades/000016_copy_transactions.sql
var CopyTransactions string

// The tx_key and entry of transactions_by_hash (migration 9).
const (
	// TxPrefixLen is the length of a lookup's prefix: chain id and hash.
	TxPrefixLen = 8 + 32
	// TxKeyLen is the length of a key: the prefix and the block hash.
	TxKeyLen = TxPrefixLen + 32
	// TxEntryPlaceLen is the length of the block number and transaction
	// index that start an entry; the TxDetail protobuf follows them.
	TxEntryPlaceLen = 8 + 4
)

// TxKey is a transactions_by_hash.tx_key.
type TxKey [TxKeyLen]byte

// NewTxKey is the key of a transaction's row of the block blockHash.
func NewTxKey(chainID uint64, hash, blockHash [32]byte) TxKey {
	var k TxKey
	binary.BigEndian.PutUint64(k[0:], chainID)
	copy(k[8:], hash[:])
	copy(k[40:], blockHash[:])
	return k
}

// TxKeyRange is the [from, to] range of every row of a transaction.
func TxKeyRange(chainID uint64, hash [32]byte) (from, to TxKey) {
	from = NewTxKey(chainID, hash, [32]byte{})
	to = from
	for i := TxPrefixLen; i < TxKeyLen; i++ {
		to[i] = 0xff
	}
	return from, to
}

// TxEntryPlace appends to dst the start of an entry: the block number and
// the transaction's index in it.
func TxEntryPlace(dst []byte, block uint64, index uint32) []byte {
	dst = binary.BigEndian.AppendUint64(dst, block)
	return binary.BigEndian.AppendUint32(dst, index)
}

// ParseTxEntry splits an entry into block number, index and detail.
func ParseTxEntry(entry []byte) (block uint64, index uint32, detail []byte, err error) {
	if len(entry) < TxEntryPlaceLen {
		return 0, 0, nil, fmt.Errorf("transactions_by_hash entry of %d bytes", len(entry))
	}
	return binary.BigEndian.Uint64(entry), binary.BigEndian.Uint32(entry[8:]), entry[TxEntryPlaceLen:], nil
}

// SQLTxKey is the SQL expression of a tx_key from expressions of its parts,
// as SQLListKey.
func SQLTxKey(chainID, hash, blockHash string) string {
	return "toFixedString(concat(" + sqlBigEndian(chainID, 8) + ", " + hash + ", " + blockHash + "), " + fmt.Sprint(TxKeyLen) + ")"
}

// SQLTxEntryPlace is the SQL expression of an entry's start (block number,
// index), as SQLTxKey.
func SQLTxEntryPlace(block, index string) string {
	return "concat(" + strings.Join([]string{sqlBigEndian(block, 8), sqlBigEndian(index, 4)}, ", ") + ")"
}
