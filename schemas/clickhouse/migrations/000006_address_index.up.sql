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
-- Addresses in keys are FixedString(20) (raw bytes); what the API renders is
-- a protobuf in a detail column (schemas/proto/moraine/v1/history.proto).

-- Transaction hash -> its block, index and detail (a protobuf
-- moraine.v1.TxDetail: the transaction and receipt, its decoded token
-- transfers and internal transactions), for GET /transactions/{txHash}: one
-- row in a small granule instead of the transaction's, its logs' and its
-- call frames' granules of the block tables.
CREATE TABLE IF NOT EXISTS transaction_lookup (
    chain_id UInt64,
    hash FixedString(32),
    block_hash FixedString(32),
    block_number UInt64,
    tx_index UInt32,
    detail String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (chain_id, hash, block_hash)
SETTINGS index_granularity = 256;

-- One table for every per-address list, ordered by (address, list, position
-- in the chain): a page of any list is one bounded key range. The list column
-- says which list a row belongs to (schemas/clickhouse/addressindex.go), and
-- which protobuf the detail column holds (proto/moraine/v1/history.proto):
--
--   1 transactions   one row per (address, transaction) the address took part
--                    in; roles: 1 sender, 2 recipient (to, or the created
--                    contract), 4 token-transfer party, 8 the transferred
--                    token, 16 party of a listed internal transaction.
--                    detail: TxDetail (input cut to its selector; only the
--                    transfers and internal transactions the address sent or
--                    received).
--   2, 3, 4          ERC-20, ERC-721, ERC-1155 transfers with the address as
--                    from or to; position = log index, sub_index = the element
--                    of a TransferBatch. detail: TokenTransfer.
--   5 token          every transfer of the token the address is.
--   6 internal       internal transactions (CALL/CALLCODE with value,
--                    CREATE*; never the root frame) with the address as from
--                    or to; position = trace position. detail: CallDetail.
--   7 deployments    contracts the address created, as the transaction's
--                    sender or as the creating contract; 8 creation: the row
--                    of the contract itself. position = trace position.
--                    detail: Deployment.
--
-- What a page shows sits in one String column beside the key: reading a
-- page decompresses a block of each column read, so fewer columns make a
-- cheaper page. Small granules: a page reads a few rows of one address.
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
    detail String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (chain_id, address, list, block_number, tx_index, position, sub_index, block_hash)
SETTINGS index_granularity = 256
