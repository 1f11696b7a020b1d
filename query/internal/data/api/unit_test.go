package api

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/query/internal/data/store"
)

func TestChecksumAddress(t *testing.T) {
	// EIP-55 test vectors.
	for _, want := range []string{
		"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
		"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
		"0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
		"0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
		"0x52908400098527886E0F7030069857D2E4169EE7",
		"0xde709f2102306220921060314715629080e2fb77",
	} {
		require.Equal(t, want, checksumAddress(mustHex(want[2:])))
	}
	require.Equal(t, "0x0000000000000000000000000000000000000000", checksumAddress(nil))
}

// A contract call is a call with a 4-byte selector; shorter input has no
// method hash, as the hosted writer decides (methodHash only for
// CONTRACT_CALL, from input of at least 4 bytes).
func TestTxMethod(t *testing.T) {
	to := make([]byte, 20)
	native := method{CallType: callNativeTransfer, MethodHash: "", MethodName: "Native Transfer"}
	for _, tc := range []struct {
		name string
		tx   store.Tx
		want method
	}{
		{"creation", store.Tx{Selector: []byte{0x60, 0x80, 0x60, 0x40}, InputLen: 900},
			method{CallType: callContractCreation, MethodHash: "", MethodName: "Contract Created"}},
		{"no input", store.Tx{To: to}, native},
		{"1 byte", store.Tx{To: to, Selector: []byte{0xa9}, InputLen: 1}, native},
		{"3 bytes", store.Tx{To: to, Selector: []byte{0xa9, 0x05, 0x9c}, InputLen: 3}, native},
		{"selector only", store.Tx{To: to, Selector: []byte{0xa9, 0x05, 0x9c, 0xbb}, InputLen: 4},
			method{CallType: callContractCall, MethodHash: "0xa9059cbb"}},
		{"call", store.Tx{To: to, Selector: []byte{0xa9, 0x05, 0x9c, 0xbb}, InputLen: 68},
			method{CallType: callContractCall, MethodHash: "0xa9059cbb"}},
	} {
		require.Equal(t, tc.want, txMethod(tc.tx), tc.name)
	}
}
