package payload

import (
	"fmt"
	"strconv"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/processor/internal/jcs"
	"github.com/moraine-data/moraine/processor/internal/watchlist"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// EventType is the payload's eventType.
const EventType = "address_activity"

// Input is what one message is built from.
type Input struct {
	Webhook *watchlist.Webhook
	Block   *record.Block
	Tx      *record.Transaction
	// Native is the chain's native token (chains file); nil omits
	// networkToken.
	Native *chains.Token
	// Tokens holds the metadata of the tokens the transaction's transfers
	// move; a token absent or nil has no token object.
	Tokens map[evm.Address]*tokenmeta.Token
}

// TokenAddresses returns the distinct token contracts whose transfers the
// payload of tx lists: the tokens to resolve before Build.
func TokenAddresses(tx *record.Transaction, dst []evm.Address) []evm.Address {
	for _, l := range tx.GetLogs() {
		if evm.Transfers(l.GetTopics(), l.GetData(), nil) == 0 {
			continue
		}
		a, ok := evm.AddressFrom(l.GetAddress())
		if !ok {
			continue
		}
		seen := false
		for _, d := range dst {
			if d == a {
				seen = true
				break
			}
		}
		if !seen {
			dst = append(dst, a)
		}
	}
	return dst
}

// MessageID is the deterministic messageId of (webhook, chain, tx).
func MessageID(webhookID string, chainID uint64, txHash []byte) string {
	return codec.ActivityMessageID(webhookID, chainID, txHash)
}

// Build returns the WebhookAddressActivityResponse body of in, as RFC 8785
// canonical JSON, and its messageId.
func Build(in Input) (body []byte, messageID string, err error) {
	b, tx, w := in.Block, in.Tx, in.Webhook
	messageID = MessageID(w.ID, b.GetChainId(), tx.GetHash())
	event := map[string]any{"transaction": transaction(in)}
	if w.IncludeLogs {
		event["logs"] = logs(b, tx)
	}
	body, err = jcs.Marshal(map[string]any{
		"webhookId": w.ID,
		"eventType": EventType,
		"messageId": messageID,
		"event":     event,
	})
	if err != nil {
		return nil, "", fmt.Errorf("payload: webhook %s tx %x: %w", w.ID, tx.GetHash(), err)
	}
	return body, messageID, nil
}

func dec(n uint64) string { return strconv.FormatUint(n, 10) }

// or returns s, or def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checksum is the EIP-55 form of a 20-byte address, the zero address for
// anything else (a missing address is never null).
func checksum(b []byte) string {
	a, _ := evm.AddressFrom(b)
	return a.Checksum()
}

func lower(b []byte) string {
	a, _ := evm.AddressFrom(b)
	return a.Hex()
}

func isCreation(tx *record.Transaction) bool {
	return len(tx.GetTo()) == 0 && len(tx.GetContractAddress()) == 20
}

func transaction(in Input) map[string]any {
	b, tx := in.Block, in.Tx
	gasPrice := or(tx.GetGasPrice(), tx.GetEffectiveGasPrice())
	if tx.GetType() >= 2 && tx.GetMaxFeePerGas() != "" {
		// tx.GasPrice() semantics: a dynamic-fee transaction's gasPrice is
		// its fee cap (the hosted payloads show maxFeePerGas here; the
		// price paid is receiptEffectiveGasPrice).
		gasPrice = tx.GetMaxFeePerGas()
	}
	gasPrice = or(gasPrice, "0")
	to := lower(tx.GetTo())
	if isCreation(tx) {
		// A creation has no recipient; "to" is required, so it names the
		// created contract, as the callTracer root frame of a creation does.
		to = lower(tx.GetContractAddress())
	}
	t := map[string]any{
		"blockHash":                hash32(b.GetHash()),
		"blockNumber":              dec(b.GetNumber()),
		"from":                     checksum(tx.GetFrom()),
		"to":                       to,
		"gas":                      dec(tx.GetGas()),
		"gasPrice":                 gasPrice,
		"maxFeePerGas":             or(tx.GetMaxFeePerGas(), gasPrice),
		"maxPriorityFeePerGas":     or(tx.GetMaxPriorityFeePerGas(), gasPrice),
		"txHash":                   hash32(tx.GetHash()),
		"txStatus":                 strconv.FormatUint(uint64(tx.GetStatus()), 10),
		"input":                    evm.HexBytes(tx.GetInput()),
		"nonce":                    dec(tx.GetNonce()),
		"transactionIndex":         tx.GetIndex(),
		"value":                    or(tx.GetValue(), "0"),
		"type":                     tx.GetType(),
		"chainId":                  dec(b.GetChainId()),
		"receiptCumulativeGasUsed": dec(tx.GetCumulativeGasUsed()),
		"receiptGasUsed":           dec(tx.GetGasUsed()),
		"receiptEffectiveGasPrice": or(tx.GetEffectiveGasPrice(), gasPrice),
		"receiptRoot":              hash32(b.GetReceiptsRoot()),
		"blockTimestamp":           b.GetTimestamp(),
	}
	if isCreation(tx) {
		t["contractAddress"] = checksum(tx.GetContractAddress())
	}
	erc20, erc721, erc1155 := transfers(in)
	t["erc20Transfers"], t["erc721Transfers"], t["erc1155Transfers"] = erc20, erc721, erc1155
	if in.Webhook.IncludeInternalTxs {
		t["internalTransactions"] = internals(tx)
	}
	if al := tx.GetAccessList(); len(al) > 0 {
		list := make([]any, 0, len(al))
		for _, at := range al {
			keys := make([]any, 0, len(at.GetStorageKeys()))
			for _, k := range at.GetStorageKeys() {
				keys = append(keys, evm.HexBytes(k))
			}
			list = append(list, map[string]any{"accessAddresses": checksum(at.GetAddress()), "storageKeys": keys})
		}
		t["accessList"] = list
	}
	if in.Native != nil && tx.GetValue() != "" && tx.GetValue() != "0" {
		if vwd, ok := ValueWithDecimals(tx.GetValue(), in.Native.Decimals); ok {
			t["networkToken"] = map[string]any{
				"tokenName":         in.Native.Name,
				"tokenSymbol":       in.Native.Symbol,
				"tokenDecimals":     in.Native.Decimals,
				"valueWithDecimals": vwd,
			}
		}
	}
	return t
}

// hash32 is the hex of a 32-byte hash, the zero hash when absent.
func hash32(b []byte) string {
	if len(b) == 0 {
		b = make([]byte, 32)
	}
	return evm.HexBytes(b)
}

// transfers builds the three transfer arrays, always non-nil.
func transfers(in Input) (erc20, erc721, erc1155 []any) {
	erc20, erc721, erc1155 = []any{}, []any{}, []any{}
	b, tx := in.Block, in.Tx
	txHash := hash32(tx.GetHash())
	for i, l := range tx.GetLogs() {
		token, ok := evm.AddressFrom(l.GetAddress())
		if !ok {
			continue
		}
		evm.Transfers(l.GetTopics(), l.GetData(), func(x evm.Transfer) {
			item := map[string]any{
				"transactionHash": txHash,
				"type":            x.Kind.String(),
				"from":            x.From.Checksum(),
				"to":              x.To.Checksum(),
				"value":           evm.Decimal(x.Value),
				"blockTimestamp":  b.GetTimestamp(),
				// Transaction-relative, as in the hosted examples; event.logs
				// carries the block-level index.
				"logIndex": i,
			}
			if x.TokenID != nil {
				item["tokenId"] = evm.Decimal(x.TokenID)
			}
			switch x.Kind {
			case evm.ERC20:
				if t := tokenObject(token, in.Tokens[token], item["value"].(string), true); t != nil {
					item["erc20Token"] = t
				}
				erc20 = append(erc20, item)
			case evm.ERC721:
				if t := tokenObject(token, in.Tokens[token], item["value"].(string), false); t != nil {
					item["erc721Token"] = t
				}
				erc721 = append(erc721, item)
			case evm.ERC1155:
				if t := tokenObject(token, in.Tokens[token], item["value"].(string), false); t != nil {
					item["erc1155Token"] = t
				}
				erc1155 = append(erc1155, item)
			}
		})
	}
	return erc20, erc721, erc1155
}

// tokenObject is the ERCToken of a transfer, or nil when the token did not
// answer: name and symbol always needed, decimals needed for ERC-20 (NFTs
// without decimals() count 0).
func tokenObject(addr evm.Address, tok *tokenmeta.Token, value string, needDecimals bool) map[string]any {
	if tok == nil || needDecimals && !tok.HasDecimals {
		return nil
	}
	decimals := 0
	if tok.HasDecimals {
		decimals = tok.Decimals
	}
	vwd, ok := ValueWithDecimals(value, decimals)
	if !ok {
		return nil
	}
	return map[string]any{
		"address":           addr.Checksum(),
		"name":              tok.Name,
		"symbol":            tok.Symbol,
		"decimals":          decimals,
		"valueWithDecimals": vwd,
	}
}

// internals is internalTransactions: the root call built from the
// transaction (from, to, gas limit, receipt gasUsed), then the callTracer
// frames below the root in depth-first pre-order. The record's list already
// is that pre-order with the root first (trace_position 0), so the root
// frame is skipped rather than listed twice.
func internals(tx *record.Transaction) []any {
	frames := tx.GetInternalTransactions()
	rootType := "CALL"
	if isCreation(tx) {
		rootType = "CREATE"
	}
	if len(frames) > 0 && frames[0].GetTracePosition() == 0 && frames[0].GetType() != "" {
		rootType = frames[0].GetType()
	}
	txHash := hash32(tx.GetHash())
	toChecksum := "0x0000000000000000000000000000000000000000"
	if a, ok := evm.AddressFrom(tx.GetTo()); ok {
		toChecksum = a.Checksum()
	} else if isCreation(tx) {
		toChecksum = checksum(tx.GetContractAddress())
	}
	out := make([]any, 0, len(frames)+1)
	out = append(out, map[string]any{
		"from":            checksum(tx.GetFrom()),
		"to":              toChecksum,
		"internalTxType":  rootType,
		"value":           or(tx.GetValue(), "0"),
		"gasUsed":         dec(tx.GetGasUsed()),
		"gasLimit":        dec(tx.GetGas()),
		"transactionHash": txHash,
	})
	for i, f := range frames {
		if i == 0 && f.GetTracePosition() == 0 && f.GetDepth() == 0 {
			continue // the root, already listed from the transaction
		}
		out = append(out, map[string]any{
			"from":            checksum(f.GetFrom()),
			"to":              checksum(f.GetTo()),
			"internalTxType":  or(f.GetType(), "CALL"),
			"value":           or(f.GetValue(), "0"),
			"gasUsed":         dec(f.GetGasUsed()),
			"gasLimit":        dec(f.GetGas()),
			"transactionHash": txHash,
		})
	}
	return out
}

// logs is event.logs: every log of the transaction, topics present only as
// far as the log has them.
func logs(b *record.Block, tx *record.Transaction) []any {
	out := make([]any, 0, len(tx.GetLogs()))
	for _, l := range tx.GetLogs() {
		m := map[string]any{
			"address":          checksum(l.GetAddress()),
			"data":             evm.HexBytes(l.GetData()),
			"transactionIndex": tx.GetIndex(),
			"logIndex":         l.GetLogIndex(),
			"removed":          false,
		}
		topics := l.GetTopics()
		// topic0 is required; an anonymous LOG0 event has none and gets "0x".
		m["topic0"] = "0x"
		for i, t := range topics {
			if i > 3 {
				break
			}
			m["topic"+strconv.Itoa(i)] = evm.HexBytes(t)
		}
		out = append(out, m)
	}
	return out
}
