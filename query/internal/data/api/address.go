package api

import "github.com/moraine-data/moraine/pkg/evm"

// checksumAddress renders 20 bytes in EIP-55 mixed-case checksum form; a
// missing address (which a valid row never has, except the recipient of a
// CREATE that failed) renders as the zero address so the required field is
// still present.
func checksumAddress(a []byte) string {
	addr, _ := evm.AddressFrom(a)
	return addr.Checksum()
}
