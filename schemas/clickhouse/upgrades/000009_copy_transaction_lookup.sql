-- Upgrading to migration 9: copies the rows the processor wrote to
-- transaction_lookup (migration 6) into transactions_by_hash, which the
-- query service reads from migration 9 on. Run it once per database after
-- the upgraded processors run, as 000008_copy_address_index.sql (docs/
-- transactions.md, "Upgrading"); then empty transaction_lookup (TRUNCATE).
-- Copied details lack the block's header fields: those transactions are
-- checked against block_lookup on every read, as before.
-- The expressions are schemas/clickhouse.SQLTxKey's and SQLTxEntryPlace's
-- (TestCopyTransactionLookupStatement).
INSERT INTO transactions_by_hash (tx_key, entry, version)
SELECT toFixedString(concat(unhex(concat(substring('0000000000000000', 1, 16 - length(hex(toUInt64(chain_id)))), hex(toUInt64(chain_id)))), hash, block_hash), 72),
    concat(concat(unhex(concat(substring('0000000000000000', 1, 16 - length(hex(toUInt64(block_number)))), hex(toUInt64(block_number)))), unhex(concat(substring('00000000', 1, 8 - length(hex(toUInt64(tx_index)))), hex(toUInt64(tx_index))))), detail), version
FROM transaction_lookup
