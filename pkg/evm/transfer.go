package evm

import (
	"bytes"
	"encoding/binary"
	"math/big"
)

// Event signatures (topic0) of the token-transfer events.
var (
	// TopicTransfer is keccak256("Transfer(address,address,uint256)"),
	// shared by ERC-20 (value in data) and ERC-721 (tokenId indexed).
	TopicTransfer = mustHex32("ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef")
	// TopicTransferSingle is keccak256("TransferSingle(address,address,address,uint256,uint256)").
	TopicTransferSingle = mustHex32("c3d58168c5ae7397731d063d5bbf3d657854427343f4c083240f7aacaa2d0f62")
	// TopicTransferBatch is keccak256("TransferBatch(address,address,address,uint256[],uint256[])").
	TopicTransferBatch = mustHex32("4a39dc06d4c0dbc64b70af90fd698a233a518aa5d07e595d983b8c0526c8f7fb")
)

// Kind is the token standard of a transfer.
type Kind uint8

// Kinds.
const (
	ERC20 Kind = iota + 1
	ERC721
	ERC1155
)

// String is the payload's "type" value: ERC20, ERC721, ERC1155.
func (k Kind) String() string {
	switch k {
	case ERC20:
		return "ERC20"
	case ERC721:
		return "ERC721"
	case ERC1155:
		return "ERC1155"
	}
	return "UNKNOWN"
}

// Transfer is one decoded token movement. Value and TokenID are 32-byte
// big-endian words pointing into the log (TokenID is nil for ERC-20).
type Transfer struct {
	Kind    Kind
	From    Address
	To      Address
	Value   []byte
	TokenID []byte
}

// one is the 32-byte word 1: the value of an ERC-721 transfer.
var one = func() []byte { b := make([]byte, 32); b[31] = 1; return b }()

// Transfers calls fn for every token transfer the log (topics, data)
// encodes and returns how many there were. The shapes accepted:
//
//	Transfer, 3 topics, 32-byte data    ERC-20 (value in data)
//	Transfer, 4 topics, empty data      ERC-721 (tokenId is topic 3; value 1)
//	TransferSingle, 4 topics, 64 bytes  ERC-1155 (id, value)
//	TransferBatch, 4 topics, ABI data   ERC-1155, one transfer per (id, value)
//
// Anything else (another event, a malformed or non-standard encoding) is not
// a transfer. The ERC-1155 operator (topic 1) is not a party. fn may be nil
// to only count (matching uses that: no allocation).
func Transfers(topics [][]byte, data []byte, fn func(Transfer)) int {
	if len(topics) < 3 || len(topics[0]) != 32 {
		return 0
	}
	for _, t := range topics[1:] {
		if len(t) != 32 {
			return 0
		}
	}
	t0 := topics[0]
	switch {
	case bytes.Equal(t0, TopicTransfer[:]):
		switch {
		case len(topics) == 3 && len(data) == 32:
			if fn != nil {
				fn(Transfer{Kind: ERC20, From: topicAddress(topics[1]), To: topicAddress(topics[2]), Value: data})
			}
			return 1
		case len(topics) == 4 && len(data) == 0:
			if fn != nil {
				fn(Transfer{Kind: ERC721, From: topicAddress(topics[1]), To: topicAddress(topics[2]), Value: one, TokenID: topics[3]})
			}
			return 1
		}
	case len(topics) != 4:
	case bytes.Equal(t0, TopicTransferSingle[:]):
		if len(data) != 64 {
			return 0
		}
		if fn != nil {
			fn(Transfer{Kind: ERC1155, From: topicAddress(topics[2]), To: topicAddress(topics[3]), TokenID: data[:32], Value: data[32:64]})
		}
		return 1
	case bytes.Equal(t0, TopicTransferBatch[:]):
		ids, ok := abiWordArray(data, 0)
		if !ok {
			return 0
		}
		values, ok := abiWordArray(data, 1)
		if !ok || len(ids) != len(values) {
			return 0
		}
		if fn != nil {
			from, to := topicAddress(topics[2]), topicAddress(topics[3])
			for i := 0; i < len(ids); i += 32 {
				fn(Transfer{Kind: ERC1155, From: from, To: to, TokenID: ids[i : i+32], Value: values[i : i+32]})
			}
		}
		return len(ids) / 32
	}
	return 0
}

// topicAddress is the address in the low 20 bytes of an indexed topic.
func topicAddress(t []byte) Address {
	var a Address
	copy(a[:], t[12:32])
	return a
}

// abiWordArray returns the elements (concatenated 32-byte words) of the
// uint256[] whose offset is the arg-th head word of data, or false when the
// encoding does not fit in data.
func abiWordArray(data []byte, arg int) ([]byte, bool) {
	off, ok := abiUint(data, arg*32)
	if !ok || off%32 != 0 {
		return nil, false
	}
	n, ok := abiUint(data, off)
	if !ok {
		return nil, false
	}
	start := off + 32
	if n > (len(data)-start)/32 {
		return nil, false
	}
	return data[start : start+n*32], true
}

// abiUint reads the 32-byte word at pos as a number that must fit in the
// data (offsets and lengths), or false.
func abiUint(data []byte, pos int) (int, bool) {
	if pos < 0 || pos+32 > len(data) {
		return 0, false
	}
	w := data[pos : pos+32]
	for _, b := range w[:24] {
		if b != 0 {
			return 0, false
		}
	}
	v := binary.BigEndian.Uint64(w[24:])
	if v > uint64(len(data)) {
		return 0, false
	}
	return int(v), true
}

// Decimal is the base-10 form of a big-endian unsigned word.
func Decimal(word []byte) string {
	for _, b := range word {
		if b != 0 {
			return new(big.Int).SetBytes(word).String()
		}
	}
	return "0"
}

func mustHex32(s string) [32]byte {
	var out [32]byte
	for i := range out {
		out[i] = unhex(s[2*i])<<4 | unhex(s[2*i+1])
	}
	return out
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	panic("evm: bad hex constant")
}

// TransferParties returns the sender and recipient of the transfers the log
// encodes (the same for every item of a TransferBatch), and false when
// Transfers would find none. It does not allocate: matching calls it for
// every log.
func TransferParties(topics [][]byte, data []byte) (from, to Address, ok bool) {
	if Transfers(topics, data, nil) == 0 {
		return from, to, false
	}
	if bytes.Equal(topics[0], TopicTransfer[:]) {
		return topicAddress(topics[1]), topicAddress(topics[2]), true
	}
	return topicAddress(topics[2]), topicAddress(topics[3]), true
}
