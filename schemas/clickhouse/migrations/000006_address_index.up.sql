-- Transaction history: what the Data API's EVM transaction endpoints read
-- (transactions by hash, an address's transactions, transfers and internal
-- transactions, a token's transfers, contract deployments). Written by the
-- processor's sink with the block tables (--processor.address-index), with
-- their idempotence: ReplacingMergeTree(version), version = the Kafka offset
-- of the block record, so a redelivered record rewrites identical rows.
--
-- Reorgs: every row carries its block's hash, in the sort key. Readers serve
-- a row only while that hash is the canonical block's at its number
-- (block_lookup), so the rows of an orphaned block are never served and need
-- no deleting; the replacing block's rows have their own keys.
--
-- Addresses in keys are FixedString(20) (raw bytes); elsewhere String holding
-- the 20 raw bytes (empty when absent), as in the block tables.

-- Transaction hash -> its block and index, for GET /transactions/{txHash}:
-- ordered by hash so the lookup reads one small granule.
CREATE TABLE IF NOT EXISTS transaction_hashes (
    chain_id UInt64,
    hash FixedString(32),
    block_hash FixedString(32),
    block_number UInt64,
    tx_index UInt32,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (chain_id, hash, block_hash)
SETTINGS index_granularity = 256;

-- One table for every per-address list, ordered by (address, list, position
-- in the chain): a page of any list is one bounded key range. The list column
-- says which list a row belongs to (schemas/clickhouse/addressindex.go):
--
--   1 transactions   one row per (address, transaction) the address took part
--                    in; roles: 1 sender, 2 recipient (to, or the created
--                    contract), 4 token-transfer party, 8 the transferred
--                    token, 16 party of a listed internal transaction. The
--                    columns hold what a NativeTransaction needs (to_address
--                    empty for a creation, selector = input[:4]).
--   2, 3, 4          ERC-20, ERC-721, ERC-1155 transfers with the address as
--                    from or to; position = log index, sub_index = the element
--                    of a TransferBatch; token_kind 1/2/3; contract_address =
--                    the token.
--   5 token          every transfer of the token the address is.
--   6 internal       internal transactions (CALL/CALLCODE with value,
--                    CREATE*; never the root frame) with the address as from
--                    or to; position = trace position; status 0 when the frame
--                    or a frame it ran inside failed.
--   7 deployments    contracts the address created, as the transaction's
--                    sender or as the creating contract; 8 creation: the row
--                    of the contract itself. from_address = the transaction's
--                    sender, to_address = the creating contract ("" for a
--                    top-level creation), contract_address = the contract,
--                    position = trace position.
--
-- Unused columns of a list are empty or 0 and cost next to nothing compressed.
-- Small granules: a page reads a few rows of one address.
CREATE TABLE IF NOT EXISTS address_index (
    chain_id UInt64,
    address FixedString(20),
    list UInt8,
    block_number UInt64,
    tx_index UInt32,
    position UInt32,
    sub_index UInt32,
    block_hash FixedString(32),
    tx_hash FixedString(32),
    roles UInt8,
    tx_type UInt8,
    call_type String,
    token_kind UInt8,
    from_address String,
    to_address String,
    contract_address String,
    value String,
    token_id String,
    gas UInt64,
    gas_price String,
    nonce UInt64,
    selector String,
    status UInt8,
    gas_used UInt64,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (chain_id, address, list, block_number, tx_index, position, sub_index, block_hash)
SETTINGS index_granularity = 256
