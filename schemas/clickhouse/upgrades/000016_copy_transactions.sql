-- Upgrading to migration 16: copies the rows the processor wrote to
-- transactions (migrations 2 and 14) into transactions_by_block, which
-- every reader reads from migration 16 on. Run it once per database after
-- the upgraded processors run, as 000008_copy_address_index.sql (docs/
-- transactions.md, "Upgrading"; on a cluster, on one server: the table is
-- replicated). Running it again rewrites identical rows (same version),
-- which merges collapse. On a large table run it by block range, each range
-- one part. Then empty transactions (TRUNCATE TABLE, ON CLUSTER on a
-- cluster): moraine no longer reads or writes it.
INSERT INTO transactions_by_block (chain_id, block_number, block_hash, block_timestamp, tx_index, hash, type, from_address,
    to_address, value, gas, gas_price, max_fee_per_gas, max_priority_fee_per_gas, nonce, input, status, gas_used,
    cumulative_gas_used, effective_gas_price, contract_address, access_list, version)
SELECT chain_id, block_number, block_hash, block_timestamp, tx_index, hash, type, from_address,
    to_address, value, gas, gas_price, max_fee_per_gas, max_priority_fee_per_gas, nonce, input, status, gas_used,
    cumulative_gas_used, effective_gas_price, contract_address, access_list, version
FROM transactions
