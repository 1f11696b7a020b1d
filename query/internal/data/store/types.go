package store

import (
	"encoding/hex"
	"errors"
	"strings"
	"time"
)

// Hash is a 32-byte block or transaction hash.
type Hash [32]byte

// Hex returns the lowercase 0x-prefixed form.
func (h Hash) Hex() string { return "0x" + hex.EncodeToString(h[:]) }

// ParseHash reads 0x + 64 hex digits, in any case.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 66 || !strings.HasPrefix(s, "0x") && !strings.HasPrefix(s, "0X") {
		return h, errors.New("store: hash must be 0x and 64 hex digits")
	}
	if _, err := hex.Decode(h[:], []byte(s[2:])); err != nil {
		return h, errors.New("store: hash must be 0x and 64 hex digits")
	}
	return h, nil
}

// Head is the newest indexed block of a chain, from chain_heads.
type Head struct {
	ChainID uint64
	// Exists is false while the chain has no indexed block yet.
	Exists    bool
	Number    uint64
	Hash      Hash
	Timestamp uint64
	// AdvancedAt is when this process last saw the head change (or first
	// looked, for a head it has not seen change yet). It drives the chain
	// status of /v1/chains and is per process.
	AdvancedAt time.Time
}

// Block is one canonical row of the blocks table.
type Block struct {
	ChainID                uint64
	Number                 uint64
	Hash                   Hash
	ParentHash             Hash
	Timestamp              uint64
	TimestampMs            *uint64 // nil before Granite (ACP-226)
	MinDelayExcess         *uint64 // nil before Granite
	BaseFee                string  // wei, decimal; empty before London
	GasUsed                uint64
	GasLimit               uint64
	GasCost                string // header BlockGasCost, wei, decimal; may be empty
	FeesSpent              string
	TxCount                uint32
	CumulativeTransactions uint64
}

// Tx is one transaction of a block, with only what the API renders: the
// input is reduced to its first four bytes and its length.
type Tx struct {
	BlockIndex        uint32
	Hash              Hash
	Type              uint8
	From              []byte // 20 bytes
	To                []byte // 20 bytes; empty for a contract creation
	ContractAddress   []byte // 20 bytes for a contract creation
	Value             string // wei, decimal
	Gas               uint64
	GasPrice          string
	EffectiveGasPrice string
	Nonce             uint64
	Selector          []byte // input[:4] (shorter when the input is)
	InputLen          uint64
	Status            uint8
	GasUsed           uint64
}
