// Package api is the HTTP surface of the query service: the chain, block,
// transaction, address-history and contract endpoints of the Avalanche Data
// API ("Glacier"), wire-compatible with the hosted service so the official
// SDK (@avalanche-sdk/chainkit) works unchanged (shared/spec/CONTRACT.md
// sections 1-3 and 6). The webhook routes are package webhookapi's.
//
// # Routes
//
// API.Routes is this package's part of the query service's route table
// (package server): each route's path, operationId, compute-unit weight and
// handler, declared once. GET /api-json documents them with the rest of the
// service's routes.
//
// chainId is the decimal EVM chain id or the base58 blockchain id of a chain
// in the chain file; every chainId in a response is the decimal id. blockId
// is a decimal number up to 2^64-1 or 0x + 64 hex digits (any case).
//
// Requests are read as Express reads them (package server): an escaped
// slash stays inside its segment, and a query value with an invalid percent
// escape is validated as its raw text.
//
// # Errors
//
// Every error body is {"message", "statusCode", "error"} (package apierr):
//
//   - 400: validation, with message an array in class-validator's wording
//     ("pageSize must not be greater than 100", "network must be one of the
//     following values: mainnet, fuji, testnet", ...), all failures of a
//     request at once; a malformed chainId or blockId; a page token that does
//     not verify, has expired, or belongs to another list, chain, block or
//     network filter.
//   - 404: "Chain X not found" for a well-formed but unconfigured chain id;
//     "Block X not found on chain Y"; "Cannot GET /v1/xyz" for any unknown
//     route, and for a known path with another method (NestJS answers 404
//     there, never 405).
//   - 503 "Chain data is temporarily unavailable": ClickHouse cannot answer
//     (not connected yet, down, timed out, overloaded). /v1/chains is
//     configuration and is still served, with every status UNAVAILABLE.
//   - reindexNft (POST .../nfts/collections/{address}/tokens/{tokenId}:reindex):
//     201 without a body when accepted; 429 "Reindexing can only be called
//     once per hour for each NFT token: ..." with Retry-After (seconds until
//     an hour after the last accepted request) within the hour; 400 for an
//     address or a token id (decimal, up to 2^256-1) that is malformed; 503
//     "NFT reindexing is temporarily unavailable" when ClickHouse or Kafka
//     cannot take it (package nftreindex).
//   - 500 "Internal server error": a bug (a panic, a query the server
//     rejects); the cause is logged, never sent.
//
// Optional fields are omitted, never null: blockTimestampMilliseconds and
// blockMinDelayExcess only for blocks that have them (Granite); empty
// baseFee, gasCost and feesSpent columns are "0"; RichAddress carries only
// the EIP-55 address; methodName only for NATIVE_TRANSFER ("Native
// Transfer") and CONTRACT_CREATION ("Contract Created"), since moraine has
// no signature database for contract calls. ChainInfo.rpcUrl is the chain's
// publicRpcUrl ("" without one): the indexer's rpcUrls and wsUrl may be
// private and are never published.
//
// # Chain status
//
// OK, or UNAVAILABLE when the heads cannot be read from ClickHouse, or when
// this process has not seen the chain's indexed head change for
// --chains.stale-after (default 10m; 0 disables). Staleness is measured by
// observation, not by block timestamps, so replayed chains with old
// timestamps are OK while they advance. An UNAVAILABLE chain's data is still
// served while ClickHouse answers.
//
// # Pagination
//
// nextPageToken appears only when another page exists. A token is an opaque,
// HMAC-signed cursor (package pagetoken):
//
//	base64url( 0x01 | kind | uvarint issuedAt | fields | HMAC-SHA256(key, domain | payload)[:16] )
//
// carrying, per kind, the chain and the next block number to read (chain
// blocks), one (chain, next block number) position per chain plus the
// network filter (all chains), or chain, block number, block hash and next
// transaction index (block transactions). Lists read "number <= cursor", so
// blocks appended after the first page never shift a later one: a page
// boundary neither skips nor repeats a block, also while the head moves and
// when blocks below the cursor are replaced by a reorg. The first page
// starts at the chain's head from chain_heads (cached for
// --query.head-cache-ttl); a chain without a head yet lists as empty.
//
// The all-chains list merges by blockTimestamp desc, then chain id asc, then
// number desc. Each page reads pageSize+1 blocks below every chain's
// position and serves a k-way merge of them, so what a chain contributes is
// always a prefix of its own descending list and its position moves exactly
// past what was served. Chains without a head at the first page, or that run
// out, leave the token.
//
// The signing key is --api.page-token-secret (every instance must share it)
// or the contents of --api.page-token-secret-file (created with a random key
// when missing); tokens expire after --api.page-token-ttl (24h, as hosted).
//
// # Metrics
//
//	moraine_query_clickhouse_query_duration_seconds{query}           histogram (package store): heads, blocks_range, blocks_lookup, block_hash, block_transactions, migrations, ...
//	moraine_query_clickhouse_point_read_keys{lookup}                 histogram (package store): keys per query of the coalesced reads: block_by_number, block_transactions, tx_lookup
//
// The HTTP series are package server's. Handlers validate with params,
// call their store with the request context, and send every error through
// apierr.Write.
package api
