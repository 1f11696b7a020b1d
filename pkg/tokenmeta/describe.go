package tokenmeta

import (
	"context"
	"encoding/json"

	"github.com/moraine-data/moraine/pkg/evm"
)

// ERC-165 interface ids of the NFT standards.
const (
	interfaceERC721  = "80ac58cd"
	interfaceERC1155 = "d9b67a26"
)

// Contract describes what is at an address: whether it holds code, which
// token standard it implements, and its token metadata.
type Contract struct {
	// HasCode is false for an address without code (an account, or a
	// contract that destroyed itself): the rest is then empty.
	HasCode bool
	// Kind is evm.ERC721 or evm.ERC1155 when the contract says so through
	// ERC-165 supportsInterface, evm.ERC20 when it answers decimals() and
	// answers as a token (name() and symbol(), the rule of Resolve; ERC-20
	// has no ERC-165 id), and 0 otherwise.
	Kind evm.Kind
	// Name and Symbol are what name() and symbol() returned ("" when they
	// did not); Decimals only when HasDecimals.
	Name, Symbol string
	Decimals     int
	HasDecimals  bool
}

// Describe returns what each address on chain is (see Contract). An
// address maps to nil when its node could not be asked, and err then says
// why (no RPC URL for the chain, transport failure, RPC error or timeout,
// now or within FailureTTL).
func (r *Resolver) Describe(ctx context.Context, chain uint64, addrs []evm.Address) (map[evm.Address]*Contract, error) {
	return resolve(ctx, r, r.contractQ, chain, addrs)
}

// contractCalls: eth_getCode, supportsInterface for ERC-721 and ERC-1155,
// name(), symbol(), decimals().
func contractCalls(a evm.Address) []rpcCall {
	supports := func(id string) rpcCall {
		return ethCall(a, selSupportsInterface+id+"00000000000000000000000000000000000000000000000000000000")
	}
	return []rpcCall{
		{Method: "eth_getCode", Params: []any{a.Hex(), "latest"}, Required: true},
		supports(interfaceERC721), supports(interfaceERC1155),
		ethCall(a, selName), ethCall(a, selSymbol), ethCall(a, selDecimals),
	}
}

func decodeContract(res []json.RawMessage) *Contract {
	c := &Contract{HasCode: len(hexResult(res[0])) > 0}
	if !c.HasCode {
		return c
	}
	var isToken bool
	c.Name, c.Symbol, isToken = tokenNames(res[3], res[4])
	c.Decimals, c.HasDecimals = abiUint8(hexResult(res[5]))
	switch {
	case abiBool(hexResult(res[1])):
		c.Kind = evm.ERC721
	case abiBool(hexResult(res[2])):
		c.Kind = evm.ERC1155
	case c.HasDecimals && isToken:
		c.Kind = evm.ERC20
	}
	return c
}
