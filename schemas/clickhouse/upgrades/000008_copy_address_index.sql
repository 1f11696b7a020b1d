-- Upgrading to migration 8: copies the rows the processor wrote to
-- address_index (migration 6) into address_lists, which the query service
-- reads from migration 8 on. Run it once per database after the upgraded
-- processors run (rows they write go to address_lists already), e.g.
--   clickhouse-client --database moraine --queries-file 000008_copy_address_index.sql
-- On a cluster, on one server: address_lists is replicated. Running it
-- again rewrites identical rows (same version), which merges collapse.
-- It reads all of address_index and needs free disk for its copy and the
-- parts merges replace: on a large table run it by address range, each
-- range one part (docs/transactions.md, "Upgrading": 6 minutes for
-- 139,203,824 rows on 2 cores). Then empty address_index (TRUNCATE TABLE,
-- ON CLUSTER on a cluster): moraine no longer reads or writes it.
-- The key expression is schemas/clickhouse.SQLListKey's (TestCopyAddressIndexStatement).
INSERT INTO address_lists (list_key, roles, entry, version)
SELECT toFixedString(concat(unhex(concat(substring('0000000000000000', 1, 16 - length(hex(toUInt64(chain_id)))), hex(toUInt64(chain_id)))), address, unhex(hex(toUInt8(list))), unhex(concat(substring('0000000000000000', 1, 16 - length(hex(toUInt64(block_number)))), hex(toUInt64(block_number)))), unhex(concat(substring('00000000', 1, 8 - length(hex(toUInt64(tx_index)))), hex(toUInt64(tx_index)))), unhex(concat(substring('00000000', 1, 8 - length(hex(toUInt64(position)))), hex(toUInt64(position)))), unhex(concat(substring('00000000', 1, 8 - length(hex(toUInt64(sub_index)))), hex(toUInt64(sub_index)))), block_hash), 81),
    roles, concat(tx_hash, detail), version
FROM address_index
