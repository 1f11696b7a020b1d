// Package match joins blocks against the watch table: which webhooks a
// transaction concerns (CONTRACT.md section 5.6).
//
// # Rules
//
// A transaction matches a webhook of its chain when the webhook is ACTIVE
// (status and event type address_activity; a webhook whose settings are
// unknown never matches) and one of its watched addresses is
//
//   - the transaction's sender (from) or recipient (to);
//   - the contract it creates (receipt contractAddress);
//   - the emitter of one of its logs (so watching a token contract fires for
//     every transfer of that token);
//   - a party, from or to, of a token transfer in its logs (evm.Transfers):
//     ERC-20 Transfer (3 topics, 32-byte value), ERC-721 Transfer (4 topics,
//     tokenId indexed), ERC-1155 TransferSingle and TransferBatch (the
//     operator, topic 1, is not a party);
//   - only when the webhook sets includeInternalTxs: the from or to of one of
//     its internal calls (callTracer frames, root included).
//
// A non-empty eventSignatures list then admits the transaction only when one
// of its logs has a topic0 in the list (any log, not only a watched
// address's: the filter is a trigger, the payload still carries every log).
// Addresses and signatures are bytes, so case never matters.
//
// One match per (webhook, transaction), however many watched addresses or
// rules it touches. Matches come in transaction order, then webhook id
// order, so the same block and table always give the same output.
//
// # Speed
//
// Per transaction: one map lookup per distinct address role (from, to,
// created contract, log emitters, transfer parties, internal-call parties)
// on the chain's map[[20]byte]uint32; no allocation once the scratch
// buffers have grown. BenchmarkMatchBlock measures a busy block against a
// million watched addresses.
package match
