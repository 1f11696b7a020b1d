package clickhouse

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"strings"
)

// CopyAddressIndex is the statement that copies migration 6's
// address_index rows into address_lists, for deployments upgrading past
// migration 8 (upgrades/000008_copy_address_index.sql says how to run it).
//
//go:embed upgrades/000008_copy_address_index.sql
var CopyAddressIndex string

// The list_key of address_lists (migration 8): which list a row belongs to
// and where in it, as bytes that sort in list order.
const (
	// ListPrefixLen is the length of a list's prefix: chain id, address,
	// list.
	ListPrefixLen = 8 + 20 + 1
	// ListKeyLen is the length of a whole key: the prefix, then block
	// number, transaction index, position, sub-index and block hash.
	ListKeyLen = ListPrefixLen + 8 + 4 + 4 + 4 + 32
	// EntryHashLen is the length of the transaction hash that starts an
	// entry; the detail protobuf follows it.
	EntryHashLen = 32
)

// ListPosition is where a row stands in its list.
type ListPosition struct {
	Block     uint64
	TxIndex   uint32
	Position  uint32
	Sub       uint32
	BlockHash [32]byte
}

// ListKey is an address_lists.list_key.
type ListKey [ListKeyLen]byte

// NewListKey is the key of a row of list at p.
func NewListKey(chainID uint64, address [20]byte, list uint8, p ListPosition) ListKey {
	var k ListKey
	binary.BigEndian.PutUint64(k[0:], chainID)
	copy(k[8:], address[:])
	k[28] = list
	binary.BigEndian.PutUint64(k[29:], p.Block)
	binary.BigEndian.PutUint32(k[37:], p.TxIndex)
	binary.BigEndian.PutUint32(k[41:], p.Position)
	binary.BigEndian.PutUint32(k[45:], p.Sub)
	copy(k[49:], p.BlockHash[:])
	return k
}

// ListKeyRange is the [from, to] range of every row of one list.
func ListKeyRange(chainID uint64, address [20]byte, list uint8) (from, to ListKey) {
	from = NewListKey(chainID, address, list, ListPosition{})
	to = from
	for i := ListPrefixLen; i < ListKeyLen; i++ {
		to[i] = 0xff
	}
	return from, to
}

// ParseListKey reads a key as ClickHouse returns it.
func ParseListKey(s string) (ListKey, error) {
	var k ListKey
	if len(s) != ListKeyLen {
		return k, fmt.Errorf("list_key of %d bytes, want %d", len(s), ListKeyLen)
	}
	copy(k[:], s)
	return k, nil
}

// Position is where k's row stands in its list.
func (k *ListKey) Position() ListPosition {
	p := ListPosition{
		Block:    binary.BigEndian.Uint64(k[29:]),
		TxIndex:  binary.BigEndian.Uint32(k[37:]),
		Position: binary.BigEndian.Uint32(k[41:]),
		Sub:      binary.BigEndian.Uint32(k[45:]),
	}
	copy(p.BlockHash[:], k[49:])
	return p
}

// Prev is the greatest key below k (k itself when k is all zeros): a
// strict upper bound as an inclusive one. Keys have one length, so they
// order as big-endian numbers.
func (k ListKey) Prev() ListKey {
	for i := len(k) - 1; i >= 0; i-- {
		k[i]--
		if k[i] != 0xff {
			return k
		}
	}
	return ListKey{}
}

// Next is the least key above k (k itself when k is all 0xff): a strict
// lower bound as an inclusive one.
func (k ListKey) Next() ListKey {
	for i := len(k) - 1; i >= 0; i-- {
		k[i]++
		if k[i] != 0 {
			return k
		}
	}
	for i := range k {
		k[i] = 0xff
	}
	return k
}

// SQLListKey is the SQL expression of a list_key from expressions of its
// parts (chain id, list, block number: unsigned integers; tx index, position,
// sub-index: UInt32; address and block hash: FixedString), for statements
// that build rows in ClickHouse (the address_index copy, the benchmark's
// seed). The integers become big-endian bytes by way of hex, which 18.16
// and current releases write alike: whole bytes, without leading zero bytes.
func SQLListKey(chainID, address, list, block, txIndex, position, sub, blockHash string) string {
	return "toFixedString(concat(" + strings.Join([]string{sqlBigEndian(chainID, 8), address, sqlBigEndian(list, 1),
		sqlBigEndian(block, 8), sqlBigEndian(txIndex, 4), sqlBigEndian(position, 4), sqlBigEndian(sub, 4), blockHash}, ", ") +
		"), " + fmt.Sprint(ListKeyLen) + ")"
}

// sqlBigEndian is the n-byte big-endian string of the unsigned integer
// expression x (which must fit).
func sqlBigEndian(x string, n int) string {
	if n == 1 {
		return fmt.Sprintf("unhex(hex(toUInt8(%s)))", x)
	}
	h := fmt.Sprintf("hex(toUInt64(%s))", x)
	return fmt.Sprintf("unhex(concat(substring('%s', 1, %d - length(%s)), %s))", strings.Repeat("0", 2*n), 2*n, h, h)
}
