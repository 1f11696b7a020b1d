-- The logs and the call frames without their transaction's hash: each row
-- names its transaction by block hash and tx_index, as transactions_by_block
-- does, and the one reader that needs the hash (webhook replay) takes it
-- from there.
--
-- Why: about 21 call frames and 2 logs per transaction each repeated the
-- 32-byte hash: about 5% of the bytes a backfill leaves in ClickHouse and 6%
-- of what it inserts (and merges again), for a column no route reads
-- (bench/history.md, "The logs and call frames without their transaction's
-- hash").
--
-- Upgrading: the columns go with the rows they hold (the hashes stay in
-- transactions_by_block). A processor of an older version fails its inserts
-- into these tables once the migration ran, without committing what it
-- read, until it is replaced: upgrade the processors together (docs/
-- transactions.md, "Upgrading past migration 17").
ALTER TABLE logs DROP COLUMN tx_hash;

ALTER TABLE internal_transactions DROP COLUMN tx_hash
