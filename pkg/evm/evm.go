// Package evm holds the small pieces of EVM knowledge the matcher and the
// payload builder share: 20-byte addresses and their EIP-55 checksum form,
// and the decoding of token-transfer logs (ERC-20/721 Transfer, ERC-1155
// TransferSingle and TransferBatch).
//
// Both matching (who is a party of a transfer) and the payload (the
// erc20Transfers/erc721Transfers/erc1155Transfers arrays) use the same
// decoder, so a transaction is matched through a transfer exactly when that
// transfer appears in its payload.
package evm

import (
	"encoding/hex"

	"golang.org/x/crypto/sha3"
)

// Address is a 20-byte EVM address, usable as a map key.
type Address [20]byte

// AddressFrom converts b to an Address; ok is false unless b has 20 bytes.
func AddressFrom(b []byte) (a Address, ok bool) {
	if len(b) != 20 {
		return a, false
	}
	copy(a[:], b)
	return a, true
}

// Hex is the lowercase 0x form.
func (a Address) Hex() string { return HexBytes(a[:]) }

// Checksum is the EIP-55 mixed-case form.
func (a Address) Checksum() string {
	var lower [40]byte
	hex.Encode(lower[:], a[:])
	h := sha3.NewLegacyKeccak256()
	h.Write(lower[:])
	var sum [32]byte
	h.Sum(sum[:0])
	out := make([]byte, 42)
	out[0], out[1] = '0', 'x'
	for i, c := range lower {
		// The i-th hex character is upper-cased when the i-th nibble of
		// keccak256(lowercase hex) is 8 or more.
		nibble := sum[i/2]
		if i%2 == 0 {
			nibble >>= 4
		}
		if c >= 'a' && nibble&0xf >= 8 {
			c -= 'a' - 'A'
		}
		out[2+i] = c
	}
	return string(out)
}

// HexBytes is the lowercase 0x form of b ("0x" when b is empty).
func HexBytes(b []byte) string {
	out := make([]byte, 2+2*len(b))
	out[0], out[1] = '0', 'x'
	hex.Encode(out[2:], b)
	return string(out)
}
