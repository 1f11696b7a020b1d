package tokenmeta

import (
	"math/big"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTokenURIs(t *testing.T) {
	n := newNode()
	c721, c1155, both, gone, broken, bad, big, eoa, down := tokenAddr(20), tokenAddr(21), tokenAddr(22), tokenAddr(23),
		tokenAddr(24), tokenAddr(25), tokenAddr(26), tokenAddr(27), tokenAddr(28)
	word7 := fmtWord(7)
	n.answers[c721.Hex()+selTokenURI+word7] = abiEncodeString("ipfs://cid/7.json")
	n.answers[c1155.Hex()+selURI+word7] = abiEncodeString("https://x.example/{id}.json")
	n.answers[both.Hex()+selTokenURI+word7] = "revert"
	n.answers[both.Hex()+selURI+word7] = abiEncodeString("data:,{}")
	n.answers[gone.Hex()+selTokenURI+word7] = "error:3:execution reverted: ERC721: invalid token ID"
	n.answers[broken.Hex()+selTokenURI+word7] = "error:-32000:out of gas"
	n.answers[bad.Hex()+selTokenURI+word7] = uintWord(5)
	n.answers[big.Hex()+selTokenURI+word7] = abiEncodeString(strings.Repeat("a", 100))
	n.answers[eoa.Hex()+selTokenURI+word7] = "0x"
	n.answers[down.Hex()+selTokenURI+word7] = "error:-32000:missing trie node 0123 (path )"
	srv := httptest.NewServer(n)
	defer srv.Close()
	r := New(Config{BatchTokens: 4}, map[uint64][]string{43114: {srv.URL}}, Deps{})
	reqs := []URIRequest{
		{Contract: c721, TokenID: bigInt(7), Standard: 721},
		{Contract: c1155, TokenID: bigInt(7), Standard: 1155},
		{Contract: both, TokenID: bigInt(7)},
		{Contract: gone, TokenID: bigInt(7), Standard: 721},
		{Contract: broken, TokenID: bigInt(7), Standard: 721},
		{Contract: bad, TokenID: bigInt(7), Standard: 721},
		{Contract: big, TokenID: bigInt(7), Standard: 721},
		{Contract: eoa, TokenID: bigInt(7), Standard: 721},
		{Contract: down, TokenID: bigInt(7), Standard: 721},
	}
	head, got, err := r.TokenURIs(t.Context(), 43114, reqs, 64)
	require.NoError(t, err)
	require.Equal(t, uint64(16), head)
	require.Equal(t, "0x10", n.blocks.Load(), "calls are made at the head block read first")
	want := []URIResult{
		{Outcome: URIAnswered, URI: "ipfs://cid/7.json", Standard: 721},
		{Outcome: URIAnswered, URI: "https://x.example/{id}.json", Standard: 1155},
		{Outcome: URIAnswered, URI: "data:,{}", Standard: 1155},
		{Outcome: URIReverted, Standard: 721},
		{Outcome: URIFailed, Standard: 721},
		{Outcome: URINotString, Standard: 721},
		{Outcome: URITooLong, Standard: 721},
		{Outcome: URIReverted, Standard: 721},
		{Outcome: URIUnavailable, Standard: 721},
	}
	for i := range want {
		got[i].Detail = ""
		require.Equal(t, want[i], got[i], "request %d", i)
	}

	n.fail.Store(true)
	_, _, err = r.TokenURIs(t.Context(), 43114, reqs, 64)
	require.Error(t, err, "a node that answers no batch is an error")
	_, _, err = r.TokenURIs(t.Context(), 1, reqs, 64)
	require.Error(t, err, "a chain without an RPC URL is an error")
}

func bigInt(n int64) *big.Int { return big.NewInt(n) }

func fmtWord(n int64) string { return strings.TrimPrefix(uintWord(int(n)), "0x") }
