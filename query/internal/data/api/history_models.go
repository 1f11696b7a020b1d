package api

import (
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/query/internal/data/store"
)

// The response shapes of the transaction routes, in the OpenAPI property
// order; optional fields are omitted, never null.

type listTransactionDetailsResponse struct {
	NextPageToken string               `json:"nextPageToken,omitempty"`
	Transactions  []transactionDetails `json:"transactions"`
}

// transactionDetails is an item of an address's transactions: the
// transaction, and the transfers and internal transactions in it that the
// address sent or received (the arrays only when not empty).
type transactionDetails struct {
	NativeTransaction    nativeTransaction      `json:"nativeTransaction"`
	Erc20Transfers       []erc20TransferDetails `json:"erc20Transfers,omitempty"`
	Erc721Transfers      []erc721TransferDtl    `json:"erc721Transfers,omitempty"`
	Erc1155Transfers     []erc1155TransferDtl   `json:"erc1155Transfers,omitempty"`
	InternalTransactions []internalTxDetails    `json:"internalTransactions,omitempty"`
}

// getTransactionResponse always carries the four arrays, empty or not.
type getTransactionResponse struct {
	Erc20Transfers       []erc20TransferDetails `json:"erc20Transfers"`
	Erc721Transfers      []erc721TransferDtl    `json:"erc721Transfers"`
	Erc1155Transfers     []erc1155TransferDtl   `json:"erc1155Transfers"`
	InternalTransactions []internalTxDetails    `json:"internalTransactions"`
	NetworkTokenDetails  networkTokenDetails    `json:"networkTokenDetails"`
	NativeTransaction    fullNativeTransaction  `json:"nativeTransaction"`
}

// networkTokenDetails has no prices: moraine has no price source, so
// currentPrice and historicalPrice are omitted.
type networkTokenDetails struct {
	NetworkToken networkToken `json:"networkToken"`
}

// fullNativeTransaction is a list's NativeTransaction and what a single
// transaction's answer adds (the embedded fields come first, in the same
// order, as the hosted service writes them).
type fullNativeTransaction struct {
	nativeTransaction
	Input                string `json:"input"`
	BaseFeePerGas        string `json:"baseFeePerGas"`
	MaxFeePerGas         string `json:"maxFeePerGas,omitempty"`
	MaxPriorityFeePerGas string `json:"maxPriorityFeePerGas,omitempty"`
}

type erc20Token struct {
	Address  string `json:"address"`
	Name     string `json:"name"`
	Symbol   string `json:"symbol"`
	Decimals int    `json:"decimals"`
	ErcType  string `json:"ercType"`
}

type nftMetadata struct {
	IndexStatus string `json:"indexStatus"`
}

// metadataUnindexed: moraine does not fetch NFT metadata (tokenURI
// documents), so every token says so, with an empty tokenUri.
var metadataUnindexed = nftMetadata{IndexStatus: "UNINDEXED"}

type erc721Token struct {
	Address  string      `json:"address"`
	Name     string      `json:"name"`
	Symbol   string      `json:"symbol"`
	ErcType  string      `json:"ercType"`
	TokenID  string      `json:"tokenId"`
	TokenURI string      `json:"tokenUri"`
	Metadata nftMetadata `json:"metadata"`
}

type erc1155Token struct {
	Address  string      `json:"address"`
	ErcType  string      `json:"ercType"`
	TokenID  string      `json:"tokenId"`
	TokenURI string      `json:"tokenUri"`
	Metadata nftMetadata `json:"metadata"`
}

type erc20TransferDetails struct {
	From       richAddress `json:"from"`
	To         richAddress `json:"to"`
	LogIndex   uint32      `json:"logIndex"`
	Value      string      `json:"value"`
	Erc20Token erc20Token  `json:"erc20Token"`
}

type erc721TransferDtl struct {
	From        richAddress `json:"from"`
	To          richAddress `json:"to"`
	LogIndex    uint32      `json:"logIndex"`
	Erc721Token erc721Token `json:"erc721Token"`
}

type erc1155TransferDtl struct {
	From         richAddress  `json:"from"`
	To           richAddress  `json:"to"`
	LogIndex     uint32       `json:"logIndex"`
	Value        string       `json:"value"`
	Erc1155Token erc1155Token `json:"erc1155Token"`
}

// blockRef is what every list item of a transfer or internal transaction
// says about its block and transaction.
type blockRef struct {
	BlockNumber                string  `json:"blockNumber"`
	BlockTimestamp             uint64  `json:"blockTimestamp"`
	BlockTimestampMilliseconds *uint64 `json:"blockTimestampMilliseconds,omitempty"`
	BlockHash                  string  `json:"blockHash"`
	TxHash                     string  `json:"txHash"`
}

type erc20Transfer struct {
	blockRef
	erc20TransferDetails
}

type erc721Transfer struct {
	blockRef
	erc721TransferDtl
}

type erc1155Transfer struct {
	blockRef
	erc1155TransferDtl
}

type internalTxDetails struct {
	From           richAddress `json:"from"`
	To             richAddress `json:"to"`
	InternalTxType string      `json:"internalTxType"`
	Value          string      `json:"value"`
	IsReverted     bool        `json:"isReverted"`
	GasUsed        string      `json:"gasUsed"`
	GasLimit       string      `json:"gasLimit"`
}

type internalTransaction struct {
	blockRef
	internalTxDetails
}

// listTransfersResponse holds Erc20Transfer, Erc721Transfer and
// Erc1155Transfer items.
type listTransfersResponse struct {
	NextPageToken string `json:"nextPageToken,omitempty"`
	Transfers     []any  `json:"transfers"`
}

type listAddressChainsResponse struct {
	IndexedChains []chainInfo `json:"indexedChains"`
}

// contract is Erc20Contract, Erc721Contract, Erc1155Contract or
// UnknownContract (told apart by ercType); decimals only for ERC-20.
type contract struct {
	Name              string             `json:"name,omitempty"`
	Address           string             `json:"address"`
	DeploymentDetails *deploymentDetails `json:"deploymentDetails,omitempty"`
	ErcType           string             `json:"ercType"`
	Symbol            string             `json:"symbol,omitempty"`
	Decimals          *int               `json:"decimals,omitempty"`
}

type deploymentDetails struct {
	TxHash                  string `json:"txHash"`
	DeployerAddress         string `json:"deployerAddress"`
	DeployerContractAddress string `json:"deployerContractAddress,omitempty"`
}

type listContractsResponse struct {
	NextPageToken string     `json:"nextPageToken,omitempty"`
	Contracts     []contract `json:"contracts"`
}

// The ercType values of tokens and contracts.
const (
	ercType20      = "ERC-20"
	ercType721     = "ERC-721"
	ercType1155    = "ERC-1155"
	ercTypeUnknown = "UNKNOWN"
)

// internalTxTypes are the InternalTransactionOpCall values; frames of any
// other type (never listed) would be UNKNOWN.
var internalTxTypes = map[string]bool{"CALL": true, "CREATE": true, "CREATE2": true, "CREATE3": true,
	"CALLCODE": true, "DELEGATECALL": true, "STATICCALL": true}

func internalTxType(t string) string {
	if internalTxTypes[t] {
		return t
	}
	return "UNKNOWN"
}

func addr(b []byte) richAddress { return richAddress{Address: checksumAddress(b)} }

func checksum(a evm.Address) string { return a.Checksum() }

func refOf(b store.Block, txHash store.Hash) blockRef {
	return blockRef{BlockNumber: u64(b.Number), BlockTimestamp: b.Timestamp, BlockTimestampMilliseconds: b.TimestampMs,
		BlockHash: b.Hash.Hex(), TxHash: txHash.Hex()}
}

// tokens are the answers of the chain's token contracts for a page.
type tokens map[evm.Address]*tokenmeta.Token

// erc20 renders the token object of an ERC-20 transfer: a token that did
// not answer (or whose node could not be asked) gets "" and 0 decimals; the
// raw value is exact either way.
func (t tokens) erc20(a evm.Address) erc20Token {
	out := erc20Token{Address: checksum(a), ErcType: ercType20}
	if tok := t[a]; tok != nil {
		out.Name, out.Symbol = tok.Name, tok.Symbol
		if tok.HasDecimals {
			out.Decimals = tok.Decimals
		}
	}
	return out
}

func (t tokens) erc721(a evm.Address, id string) erc721Token {
	out := erc721Token{Address: checksum(a), ErcType: ercType721, TokenID: id, Metadata: metadataUnindexed}
	if tok := t[a]; tok != nil {
		out.Name, out.Symbol = tok.Name, tok.Symbol
	}
	return out
}

func erc1155Of(a evm.Address, id string) erc1155Token {
	return erc1155Token{Address: checksum(a), ErcType: ercType1155, TokenID: id, Metadata: metadataUnindexed}
}

// transferDetail is one token transfer, rendered by kind into the matching
// slice of a transactionDetails or getTransactionResponse.
type transferDetail struct {
	kind           evm.Kind
	token          evm.Address
	from, to       []byte
	logIndex       uint32
	value, tokenID string
}

func (t tokens) appendTransfer(x transferDetail, e20 *[]erc20TransferDetails, e721 *[]erc721TransferDtl, e1155 *[]erc1155TransferDtl) {
	switch x.kind {
	case evm.ERC20:
		*e20 = append(*e20, erc20TransferDetails{From: addr(x.from), To: addr(x.to), LogIndex: x.logIndex, Value: x.value,
			Erc20Token: t.erc20(x.token)})
	case evm.ERC721:
		*e721 = append(*e721, erc721TransferDtl{From: addr(x.from), To: addr(x.to), LogIndex: x.logIndex,
			Erc721Token: t.erc721(x.token, x.tokenID)})
	case evm.ERC1155:
		*e1155 = append(*e1155, erc1155TransferDtl{From: addr(x.from), To: addr(x.to), LogIndex: x.logIndex, Value: x.value,
			Erc1155Token: erc1155Of(x.token, x.tokenID)})
	}
}

// indexTx turns a transactions-list row into the block list's Tx shape.
func indexTx(r store.IndexRow) store.Tx {
	return store.Tx{BlockIndex: r.TxIndex, Hash: r.TxHash, Type: r.TxType, From: r.From, To: r.To, ContractAddress: r.Contract,
		Value: r.Value, Gas: r.Gas, GasPrice: r.GasPrice, Nonce: r.Nonce, Selector: r.Selector,
		InputLen: uint64(len(r.Selector)), Status: r.Status, GasUsed: r.GasUsed}
}

func internalDetails(in store.Internal) internalTxDetails {
	return internalTxDetails{From: addr(in.From), To: addr(in.To), InternalTxType: internalTxType(in.Type), Value: orZero(in.Value),
		IsReverted: in.Reverted, GasUsed: u64(in.GasUsed), GasLimit: u64(in.Gas)}
}

func renderFullTx(b store.Block, t store.FullTx) fullNativeTransaction {
	return fullNativeTransaction{
		nativeTransaction: renderTx(b, t.Tx),
		Input:             evm.HexBytes(t.Input), BaseFeePerGas: orZero(b.BaseFee),
		MaxFeePerGas: t.MaxFeePerGas, MaxPriorityFeePerGas: t.MaxPriorityFeePerGas,
	}
}

func nativeTokenOf(ch chains.Chain) networkToken {
	return networkToken{Name: ch.NativeToken.Name, Symbol: ch.NativeToken.Symbol, Decimals: ch.NativeToken.Decimals,
		LogoURI: ch.NativeToken.LogoURI, Description: ch.NativeToken.Description}
}
