package codec

import (
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/moraine-data/moraine/schemas/record"
)

// NftMetadataRequestSchema is the SchemaHeader value of the NFT metadata
// topics' records.
const NftMetadataRequestSchema = "moraine.v1.NftMetadataRequest"

// EncodeNftMetadataRequest encodes a request deterministically.
func EncodeNftMetadataRequest(r *record.NftMetadataRequest) ([]byte, error) {
	return encode("nft metadata request", r)
}

// DecodeNftMetadataRequest decodes an NFT metadata topic value.
func DecodeNftMetadataRequest(b []byte) (*record.NftMetadataRequest, error) {
	r, err := decode[record.NftMetadataRequest]("nft metadata request", b)
	if err != nil {
		return nil, err
	}
	if r.ChainId == 0 || len(r.Contract) != 20 || !isDecimal(r.TokenId) {
		return nil, fmt.Errorf("decode nft metadata request: chain id, a 20-byte contract and a decimal token id are required")
	}
	return r, nil
}

// NftMetadataKey is the Kafka key of every request for one NFT:
// "<decimal chain id>:<0x contract, lowercase>:<decimal token id>".
// Requests of one NFT share a partition, so one worker at a time owns it.
func NftMetadataKey(chainID uint64, contract []byte, tokenID string) []byte {
	out := strconv.AppendUint(make([]byte, 0, 24+42+len(tokenID)), chainID, 10)
	out = append(out, ":0x"...)
	out = hex.AppendEncode(out, contract)
	out = append(out, ':')
	return append(out, tokenID...)
}

// isDecimal: digits only, no leading zero unless the number is "0".
func isDecimal(s string) bool {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
