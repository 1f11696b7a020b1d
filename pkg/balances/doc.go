// Package balances is what addresses hold, as moraine keeps and serves it:
// ERC-20, ERC-721 and ERC-1155 balances derived from the indexed transfer
// logs, at any block, and native balances from the chains' nodes.
//
// The state is in ClickHouse (migration 12, docs/balances.md):
//   - balances: per (holder, token, kind, token id), signed amounts at four
//     levels: each block's net change (written by the processor's sink from
//     FromBlock, keyed by block hash), sums of settled buckets of 1,024 and
//     1,048,576 blocks (Roller), and opening balances of chains indexed
//     from a block after genesis (Opener);
//   - nft_transfers: every NFT transfer by token id (NFTs);
//   - balance_progress: per chain, the first block with deltas and how far
//     the sums go.
//
// Guarantees:
//   - Reorgs: a delta counts only while its block hash is the canonical
//     block's (Canonical); sums cover only blocks no reorg can reach
//     (RollerConfig.Settle), so no reorg changes them.
//   - Redelivery: rows are keyed so that writing a block or a sum twice
//     writes the same keys; reads drop unmerged copies.
//   - A read at any block touches a number of rows bounded by the bucket
//     sizes, not by the holder's number of transfers (Reader, plan).
//   - No state outside ClickHouse: the roller's progress is a table.
//
// Metrics (the subsystem is the service's name):
//
//	moraine_<subsystem>_balance_buckets_summed_total{level}        Roller (processor)
//	moraine_<subsystem>_balance_rollup_duration_seconds{level}     Roller
//	moraine_<subsystem>_balance_summed_block{chain}                Roller: every delta below it is summed
//	moraine_<subsystem>_balance_rollup_errors_total                Roller
//	moraine_<subsystem>_native_balance_lookups_total{result}       Native (query): hit, ok, no_state, node_down
//	moraine_<subsystem>_balance_checks_total{kind,result}          Verifier (query)
package balances
