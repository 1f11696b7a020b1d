package devchain

//go:generate sh contracts/gen.sh

import (
	"embed"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/ethereum/go-ethereum/accounts/abi"
)

//go:embed contracts/build/*.abi contracts/build/*.bin
var buildFS embed.FS

// compiled is one contract compiled from contracts/Moraine.sol.
type compiled struct {
	abi abi.ABI
	bin []byte
}

var (
	erc20Contract   = mustLoad("MoraineERC20")
	erc721Contract  = mustLoad("MoraineERC721")
	erc1155Contract = mustLoad("MoraineERC1155")
	relayContract   = mustLoad("Relay")
	metaERC721      = mustLoad("MoraineMetaERC721")
	metaERC1155     = mustLoad("MoraineMetaERC1155")
	factoryContract = mustLoad("Factory")
)

func mustLoad(name string) compiled {
	abiJSON, err := buildFS.ReadFile("contracts/build/" + name + ".abi")
	if err != nil {
		panic(err)
	}
	binHex, err := buildFS.ReadFile("contracts/build/" + name + ".bin")
	if err != nil {
		panic(err)
	}
	parsed, err := abi.JSON(strings.NewReader(string(abiJSON)))
	if err != nil {
		panic(fmt.Sprintf("devchain: abi of %s: %v", name, err))
	}
	bin, err := hex.DecodeString(strings.TrimSpace(string(binHex)))
	if err != nil {
		panic(fmt.Sprintf("devchain: bytecode of %s: %v", name, err))
	}
	return compiled{abi: parsed, bin: bin}
}

// pack encodes a call of method with args; it panics on a programming error.
func (c compiled) pack(method string, args ...any) []byte {
	data, err := c.abi.Pack(method, args...)
	if err != nil {
		panic(fmt.Sprintf("devchain: pack %s: %v", method, err))
	}
	return data
}

// deployData returns the creation code followed by the encoded constructor arguments.
func (c compiled) deployData(args ...any) []byte {
	enc, err := c.abi.Pack("", args...)
	if err != nil {
		panic(fmt.Sprintf("devchain: pack constructor: %v", err))
	}
	return append(append([]byte{}, c.bin...), enc...)
}

// packSig encodes a call of the method with the given signature, for overloaded names.
func (c compiled) packSig(sig string, args ...any) []byte {
	for _, m := range c.abi.Methods {
		if m.Sig == sig {
			enc, err := m.Inputs.Pack(args...)
			if err != nil {
				panic(fmt.Sprintf("devchain: pack %s: %v", sig, err))
			}
			return append(append([]byte{}, m.ID...), enc...)
		}
	}
	panic("devchain: no method " + sig)
}
