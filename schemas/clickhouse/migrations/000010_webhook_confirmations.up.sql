-- A webhook's confirmations (a moraine extension): how many blocks must be
-- on top of a block before its activity is delivered; 0, the default and
-- every existing webhook's value, delivers at once and retracts the
-- messages of a block a reorg orphans (processor/internal/stream).
ALTER TABLE webhooks ADD COLUMN confirmations UInt32 DEFAULT 0
