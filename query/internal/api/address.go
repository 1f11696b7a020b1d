package api

import (
	"encoding/hex"

	"golang.org/x/crypto/sha3"
)

// checksumAddress renders 20 bytes in EIP-55 mixed-case checksum form; a
// missing address (which a valid row never has) renders as the zero address
// so the required field is still present.
func checksumAddress(a []byte) string {
	var raw [20]byte
	if len(a) == 20 {
		copy(raw[:], a)
	}
	lower := hex.EncodeToString(raw[:])
	h := sha3.NewLegacyKeccak256()
	h.Write([]byte(lower))
	sum := h.Sum(nil)
	out := []byte("0x" + lower)
	for i := range 40 {
		c := out[2+i]
		nibble := sum[i/2]
		if i%2 == 0 {
			nibble >>= 4
		}
		if c >= 'a' && c <= 'f' && nibble&0x0f >= 8 {
			out[2+i] = c - 'a' + 'A'
		}
	}
	return string(out)
}
