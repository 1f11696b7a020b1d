package api

import (
	"encoding/hex"
	"strconv"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/query/internal/data/store"
)

// The response shapes, with the OpenAPI property order. Optional fields
// are omitted, never null (ChainKit's zod schemas reject null).

type listChainsResponse struct {
	Chains []chainInfo `json:"chains"`
}

type chainInfo struct {
	ChainID          string            `json:"chainId"`
	Status           string            `json:"status"`
	ChainName        string            `json:"chainName"`
	Description      string            `json:"description"`
	PlatformChainID  string            `json:"platformChainId,omitempty"`
	SubnetID         string            `json:"subnetId,omitempty"`
	VMID             string            `json:"vmId,omitempty"`
	VMName           string            `json:"vmName"`
	ExplorerURL      string            `json:"explorerUrl,omitempty"`
	RPCURL           string            `json:"rpcUrl"`
	IsTestnet        bool              `json:"isTestnet"`
	UtilityAddresses *utilityAddresses `json:"utilityAddresses,omitempty"`
	NetworkToken     networkToken      `json:"networkToken"`
	ChainLogoURI     string            `json:"chainLogoUri,omitempty"`
	Private          bool              `json:"private,omitempty"`
	EnabledFeatures  []string          `json:"enabledFeatures,omitempty"`
}

type utilityAddresses struct {
	Multicall string `json:"multicall,omitempty"`
}

type networkToken struct {
	Name        string `json:"name"`
	Symbol      string `json:"symbol"`
	Decimals    int    `json:"decimals"`
	LogoURI     string `json:"logoUri,omitempty"`
	Description string `json:"description,omitempty"`
}

// Chain statuses.
const (
	statusOK          = "OK"
	statusUnavailable = "UNAVAILABLE"
)

// renderChain builds ChainInfo from the chain file. rpcUrl is the chain's
// publicRpcUrl: the rpcUrls are the indexer's own nodes, which may be
// private or carry credentials, so they are never published (and wsUrl,
// the indexer's subscription endpoint, is not either).
func renderChain(c chains.Chain, status string) chainInfo {
	vm := c.VMName
	if vm == "" {
		vm = "EVM"
	}
	out := chainInfo{
		ChainID:         c.EVMChainID,
		Status:          status,
		ChainName:       c.Name,
		Description:     c.Description,
		PlatformChainID: c.BlockchainID,
		SubnetID:        c.SubnetID,
		VMID:            c.VMID,
		VMName:          vm,
		ExplorerURL:     c.ExplorerURL,
		RPCURL:          c.PublicRPC,
		IsTestnet:       c.IsTestnet(),
		NetworkToken: networkToken{
			Name: c.NativeToken.Name, Symbol: c.NativeToken.Symbol, Decimals: c.NativeToken.Decimals,
			LogoURI: c.NativeToken.LogoURI, Description: c.NativeToken.Description,
		},
		ChainLogoURI:    c.LogoURI,
		Private:         c.Private,
		EnabledFeatures: c.EnabledFeatures(),
	}
	if c.Multicall != "" {
		out.UtilityAddresses = &utilityAddresses{Multicall: c.Multicall}
	}
	return out
}

type listBlocksResponse struct {
	NextPageToken string     `json:"nextPageToken,omitempty"`
	Blocks        []evmBlock `json:"blocks"`
}

type evmBlock struct {
	ChainID                    string  `json:"chainId"`
	BlockNumber                string  `json:"blockNumber"`
	BlockTimestamp             uint64  `json:"blockTimestamp"`
	BlockTimestampMilliseconds *uint64 `json:"blockTimestampMilliseconds,omitempty"`
	BlockMinDelayExcess        *uint64 `json:"blockMinDelayExcess,omitempty"`
	BlockHash                  string  `json:"blockHash"`
	TxCount                    uint32  `json:"txCount"`
	BaseFee                    string  `json:"baseFee"`
	GasUsed                    string  `json:"gasUsed"`
	GasLimit                   string  `json:"gasLimit"`
	GasCost                    string  `json:"gasCost"`
	ParentHash                 string  `json:"parentHash"`
	FeesSpent                  string  `json:"feesSpent"`
	CumulativeTransactions     string  `json:"cumulativeTransactions"`
}

// orZero is s, or "0" when the column is empty (gasCost without an
// Avalanche BlockGasCost header field, baseFee before London).
func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

func u64(n uint64) string { return strconv.FormatUint(n, 10) }

func renderBlock(b store.Block) evmBlock {
	return evmBlock{
		ChainID:                    u64(b.ChainID),
		BlockNumber:                u64(b.Number),
		BlockTimestamp:             b.Timestamp,
		BlockTimestampMilliseconds: b.TimestampMs,
		BlockMinDelayExcess:        b.MinDelayExcess,
		BlockHash:                  b.Hash.Hex(),
		TxCount:                    b.TxCount,
		BaseFee:                    orZero(b.BaseFee),
		GasUsed:                    u64(b.GasUsed),
		GasLimit:                   u64(b.GasLimit),
		GasCost:                    orZero(b.GasCost),
		ParentHash:                 b.ParentHash.Hex(),
		FeesSpent:                  orZero(b.FeesSpent),
		CumulativeTransactions:     u64(b.CumulativeTransactions),
	}
}

// txPage is the answer of every list of transactions (or of transfers and
// internal transactions, listed under "transactions" too).
type txPage[T any] struct {
	NextPageToken string `json:"nextPageToken,omitempty"`
	Transactions  []T    `json:"transactions"`
}

type listTransactionsResponse = txPage[nativeTransaction]

type nativeTransaction struct {
	BlockNumber                string      `json:"blockNumber"`
	BlockTimestamp             uint64      `json:"blockTimestamp"`
	BlockTimestampMilliseconds *uint64     `json:"blockTimestampMilliseconds,omitempty"`
	BlockMinDelayExcess        *uint64     `json:"blockMinDelayExcess,omitempty"`
	BlockHash                  string      `json:"blockHash"`
	ChainID                    string      `json:"chainId"`
	BlockIndex                 uint32      `json:"blockIndex"`
	TxHash                     string      `json:"txHash"`
	TxStatus                   string      `json:"txStatus"`
	TxType                     uint8       `json:"txType"`
	GasLimit                   string      `json:"gasLimit"`
	GasUsed                    string      `json:"gasUsed"`
	GasPrice                   string      `json:"gasPrice"`
	Nonce                      string      `json:"nonce"`
	From                       richAddress `json:"from"`
	To                         richAddress `json:"to"`
	Method                     *method     `json:"method,omitempty"`
	Value                      string      `json:"value"`
}

// richAddress carries only the address: moraine has no token metadata
// source for name, symbol, decimals or logoUri, so they are omitted.
type richAddress struct {
	Address string `json:"address"`
}

type method struct {
	CallType   string `json:"callType"`
	MethodHash string `json:"methodHash"`
	MethodName string `json:"methodName,omitempty"`
}

// Call types (OpenAPI TransactionMethodType).
const (
	callNativeTransfer   = "NATIVE_TRANSFER"
	callContractCall     = "CONTRACT_CALL"
	callContractCreation = "CONTRACT_CREATION"
)

// txMethod classifies a transaction. A creation has no `to`; a call whose
// input holds no 4-byte selector (none, or 1-3 bytes) is a native transfer,
// as the hosted writer decides (a contract call only with a selector;
// methodHash is "" unless the call type is CONTRACT_CALL); anything else is
// a contract call whose methodHash is the selector. methodName is the
// spec's fixed text for transfers and creations; for calls it would need a
// signature database, which moraine does not have, so it is omitted.
func txMethod(t store.Tx) method {
	switch {
	case len(t.To) == 0:
		return method{CallType: callContractCreation, MethodHash: "", MethodName: "Contract Created"}
	case t.InputLen < 4:
		return method{CallType: callNativeTransfer, MethodHash: "", MethodName: "Native Transfer"}
	default:
		return method{CallType: callContractCall, MethodHash: "0x" + hex.EncodeToString(t.Selector)}
	}
}

func renderTx(b store.Block, t store.Tx) nativeTransaction {
	to := t.To
	if len(to) == 0 {
		to = t.ContractAddress
	}
	price := t.GasPrice
	if price == "" {
		price = t.EffectiveGasPrice
	}
	m := txMethod(t)
	return nativeTransaction{
		BlockNumber:                u64(b.Number),
		BlockTimestamp:             b.Timestamp,
		BlockTimestampMilliseconds: b.TimestampMs,
		BlockMinDelayExcess:        b.MinDelayExcess,
		BlockHash:                  b.Hash.Hex(),
		ChainID:                    u64(b.ChainID),
		BlockIndex:                 t.BlockIndex,
		TxHash:                     t.Hash.Hex(),
		TxStatus:                   strconv.Itoa(int(t.Status)),
		TxType:                     t.Type,
		GasLimit:                   u64(t.Gas),
		GasUsed:                    u64(t.GasUsed),
		GasPrice:                   orZero(price),
		Nonce:                      u64(t.Nonce),
		From:                       richAddress{Address: checksumAddress(t.From)},
		To:                         richAddress{Address: checksumAddress(to)},
		Method:                     &m,
		Value:                      orZero(t.Value),
	}
}
