-- NFT metadata: what the processor's metadata worker fetched for each NFT
-- (package pkg/nftmeta writes and reads it; the query service renders it in
-- the NFT and balance routes), and the reindexNft requests of the API.
--
-- Timestamps are Unix milliseconds in UInt64 (no DateTime64 on 18.16).

-- One row per NFT and fetch: a fetch inserts the whole new row with a higher
-- version (a nanosecond clock of the writing worker) and readers use FINAL.
-- The key is the token, not a block: metadata is the token's, whichever
-- block revealed it. A row written for a token of a block that a reorg
-- orphaned stays (its tokenURI answer came from the canonical chain's
-- state at the node, never from the orphaned block); the balance routes
-- only render tokens that canonical transfers give to a holder.
--
--   standard         721, 1155, or 0 when unknown (a token that answered neither call)
--   token_uri        what tokenURI(id) / uri(id) returned ("" when it did not answer)
--   status           the spec's NftTokenMetadataStatus (pkg/nftmeta.Status*)
--   fetched_at       when this row's fetch ended (metadataLastUpdatedTimestamp)
--   name ... background, attributes (ERC-721), properties (ERC-1155): the
--                    document's fields ("" when absent; attributes and
--                    properties as JSON text); decimals -1 when absent
--   attempt          the attempt this row records (1 for the first)
--   next_attempt_at  when the worker retries (0: it will not, the status is final)
--   reindexed_at     when the reindexNft request whose fetch this row records was accepted
--                    (0: the fetch of a discovered token)
--   error            the failure's detail, for operators (never served)
CREATE TABLE IF NOT EXISTS nft_metadata (
    chain_id UInt64,
    contract FixedString(20),
    token_id String,
    standard UInt16,
    token_uri String,
    status String,
    fetched_at UInt64,
    name String,
    symbol String,
    description String,
    image_uri String,
    animation_uri String,
    external_url String,
    background String,
    attributes String,
    properties String,
    decimals Int16,
    attempt UInt8,
    next_attempt_at UInt64,
    reindexed_at UInt64,
    error String,
    version UInt64
) ENGINE = ReplacingMergeTree(version)
ORDER BY (chain_id, contract, token_id);

-- One row per accepted reindexNft request (POST .../tokens/{tokenId}:reindex):
-- the API refuses another request for the token within an hour of
-- requested_at, on every query instance and across their restarts.
CREATE TABLE IF NOT EXISTS nft_reindex_requests (
    chain_id UInt64,
    contract FixedString(20),
    token_id String,
    requested_at UInt64
) ENGINE = ReplacingMergeTree(requested_at)
ORDER BY (chain_id, contract, token_id);
