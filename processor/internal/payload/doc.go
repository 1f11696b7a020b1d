// Package payload builds the body of one webhook message: CONTRACT.md
// section 5.2's WebhookAddressActivityResponse
//
//	{"webhookId", "eventType": "address_activity", "messageId",
//	 "event": {"transaction": {...}, "logs"?: [...]}}
//
// serialized as RFC 8785 canonical JSON (package jcs), so the bytes delivery
// signs are the bytes a receiver canonicalizes. The builder is pure: token
// metadata and the chain's native token come in the Input.
//
// # Rules
//
//   - No null anywhere: optional fields are omitted (the official SDK's zod
//     schemas reject null); the encoder refuses nil, so a null cannot slip
//     out.
//   - Numbers vs strings as the contract says: wei amounts, gas, block
//     number, nonce, chainId and txStatus ("1"/"0") are decimal strings;
//     transactionIndex, type, blockTimestamp, logIndex, decimals are numbers.
//   - Addresses are EIP-55 checksummed, except transaction.to, which is
//     lowercase as in every hosted example. Hashes, topics, input and data
//     are lowercase hex ("0x" when empty).
//   - gasPrice is the transaction's gas price, for dynamic-fee (type >= 2)
//     transactions its fee cap (go-ethereum tx.GasPrice(); the hosted
//     payloads show maxFeePerGas there); legacy transactions have
//     maxFeePerGas = maxPriorityFeePerGas = gasPrice. What was paid is
//     receiptEffectiveGasPrice. receiptRoot is the block's receiptsRoot.
//   - Contract creation: "to" (required) is the created contract, lowercase,
//     as the callTracer root frame of a creation names it; contractAddress
//     (checksummed) is present only on creations (the real delivered payload
//     of a call has none).
//   - erc20Transfers, erc721Transfers, erc1155Transfers are always present,
//     possibly []. Items: transactionHash, type (ERC20/ERC721/ERC1155),
//     from, to, value (raw; 1 for ERC-721), tokenId (721/1155),
//     blockTimestamp, logIndex relative to the transaction (the log's
//     position among the transaction's logs, as in the hosted examples;
//     event.logs carries the block-level index). A TransferBatch gives one
//     item per (id, value), all with the log's index.
//   - erc20Token/erc721Token/erc1155Token {address, name, symbol, decimals,
//     valueWithDecimals} come from eth_call name()/symbol()/decimals()
//     (package tokenmeta) and are omitted when the token does not answer:
//     name and symbol are needed, and decimals for ERC-20 (an NFT without
//     decimals() counts 0).
//   - valueWithDecimals is JavaScript's (Number(value) / 10**decimals)
//     .toFixed(decimals), float rounding included (ValueWithDecimals).
//   - networkToken {tokenName, tokenSymbol, tokenDecimals,
//     valueWithDecimals} from the chains file, when value > 0.
//   - internalTransactions only with includeInternalTxs: the root call from
//     the transaction (from, to, gasLimit = gas, gasUsed = receipt gasUsed,
//     the root frame's type), then the callTracer frames below the root in
//     depth-first pre-order; the record's list already starts with the root
//     (trace_position 0), which is therefore not listed twice. Types are
//     upper case; a frame without an address (a failed CREATE) shows the
//     zero address. Without traces only the root is listed.
//   - accessList {accessAddresses (one address), storageKeys} when not empty.
//   - event.logs only with includeLogs: every log of the transaction
//     (address, topic0 ("0x" for an anonymous LOG0), topic1-3 only when
//     present, data, transactionIndex, block-level logIndex, removed false).
//
// messageId is codec.ActivityMessageID(webhookId, chainId, txHash): the same
// for every build of the same (webhook, transaction), whatever the settings
// or token answers of the moment.
package payload
