package store

import (
	"encoding/hex"
	"errors"
	"strings"
)

// Address is a 20-byte EVM address.
type Address [20]byte

// ParseAddress reads 0x + 40 hex digits, in any case.
func ParseAddress(s string) (Address, error) {
	var a Address
	if len(s) != 42 || !strings.HasPrefix(s, "0x") && !strings.HasPrefix(s, "0X") {
		return a, errors.New("store: address must be 0x and 40 hex digits")
	}
	if _, err := hex.Decode(a[:], []byte(s[2:])); err != nil {
		return a, errors.New("store: address must be 0x and 40 hex digits")
	}
	return a, nil
}

// Seek is the position of a row in its address list: block number,
// transaction index, position in the transaction (log index of a transfer,
// trace position of an internal transaction or creation; 0 for a
// transaction) and sub-index (the element of an ERC-1155 TransferBatch).
// Lists are ordered by Seek.
type Seek struct {
	Block    uint64
	TxIndex  uint32
	Position uint32
	Sub      uint32
}

// Compare orders seeks (-1, 0, +1).
func (a Seek) Compare(b Seek) int {
	switch {
	case a.Block != b.Block:
		return cmp3(a.Block < b.Block)
	case a.TxIndex != b.TxIndex:
		return cmp3(a.TxIndex < b.TxIndex)
	case a.Position != b.Position:
		return cmp3(a.Position < b.Position)
	case a.Sub != b.Sub:
		return cmp3(a.Sub < b.Sub)
	}
	return 0
}

func cmp3(less bool) int {
	if less {
		return -1
	}
	return 1
}

// ListRequest asks for one page of an address list (address_lists, see
// schemas/clickhouse/addressindex.go).
type ListRequest struct {
	ChainID uint64
	Address Address
	// List is one of the schema's List constants.
	List uint8
	// Roles keeps only ListTransactions rows with one of these roles (0:
	// every row).
	Roles uint8
	// Asc lists oldest first; the default is newest first.
	Asc bool
	// Lo and Hi bound the block numbers listed, both inclusive (Hi is at
	// most the chain's head: rows above it belong to blocks not yet
	// served).
	Lo, Hi uint64
	// Start, when set, is the first row to list (inclusive; the next page's
	// cursor); otherwise the list starts at Hi (newest first) or Lo.
	Start *Seek
	// Limit is the number of rows wanted.
	Limit int
	// Window is the number of blocks the previous page's reads spanned (0:
	// unknown): the first read of this page covers that many.
	Window uint64
}

// ListPage is a page of an address list.
type ListPage struct {
	// Rows are canonical rows in list order, at most Limit.
	Rows []IndexRow
	// Window is the hint for the next page's ListRequest.Window.
	Window uint64
}

// IndexRow is one canonical row of an address list with its block. Which
// fields are set depends on the list (schemas/clickhouse/addressindex.go):
// the transaction fields (ListTransactions: Selector is the input's first
// four bytes, Transfers and Internals only those the address sent or
// received), Transfer (ERC-20/721/1155 and token lists), Internal
// (ListInternal), Deployment (ListDeployments, ListCreation).
type IndexRow struct {
	Seek
	// BlockHash is the row's block. Block is that block once the row is
	// known to be canonical: its number, hash and timestamps, and the rest
	// of its header only when it was read from block_lookup (the lists
	// render none of it).
	BlockHash Hash
	Block     Block
	// blockTime: the detail carried the block's timestamps (history.proto).
	blockTime bool
	TxHash    Hash
	Roles     uint8

	TxType             uint8
	From, To, Contract []byte // 20 bytes or empty
	Value              string
	Gas, Nonce         uint64
	GasPrice           string
	Selector           []byte
	Status             uint8
	GasUsed            uint64
	Transfers          []Transfer
	Internals          []Internal

	Transfer   Transfer
	Internal   Internal
	Deployment Deployment
}

// Transfer is one token transfer (schemas TokenTransfer).
type Transfer struct {
	Kind            uint8 // pkg/evm.Kind: 1 ERC-20, 2 ERC-721, 3 ERC-1155
	Token, From, To []byte
	LogIndex        uint32
	Value, TokenID  string
}

// Internal is one internal transaction (schemas CallDetail).
type Internal struct {
	Type         string
	From, To     []byte
	Value        string
	Gas, GasUsed uint64
	Reverted     bool
}

// Deployment is a contract's creation.
type Deployment struct {
	Contract, Deployer []byte
	// Creator is the contract that ran CREATE/CREATE2 (empty for a
	// top-level creation).
	Creator []byte
}

// TxRef locates a canonical transaction.
type TxRef struct {
	Block Block
	Index uint32
}

// FullTx is one transaction with everything GET /transactions/{txHash}
// renders besides its block: the transaction and receipt, every token
// transfer and internal transaction.
type FullTx struct {
	Tx
	Input                []byte
	MaxFeePerGas         string
	MaxPriorityFeePerGas string
	Transfers            []Transfer
	Internals            []Internal
}

// LatestTx is one transaction of a chain's latest list.
type LatestTx struct {
	Block Block
	Tx    Tx
}
