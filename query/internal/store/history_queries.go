package store

// Named queries of the transaction-history reads (migration 6). Like the
// block queries they are bounded by a key prefix and a LIMIT. They read
// without FINAL: rows with one key are identical copies (a redelivered
// record rewrites the same row; a reorg's replacement has another block
// hash, in the key), so "LIMIT 1 BY" the key drops the copies at a fraction
// of FINAL's merge, and the block hash is checked against the canonical
// block afterwards.
const (
	indexColumns = `block_number, tx_index, position, sub_index, block_hash, tx_hash, roles, detail`

	indexKey = `block_number, tx_index, position, sub_index, block_hash`

	// The list reads: one list's rows of an address within the block window
	// [?, ?], from a bound on (seek, block hash) on, in list order, the
	// roles filter keeping rows with one of the given role bits (0: all).
	// The block hash is part of the bound because rows of two branches can
	// share a seek: a read that stops at its LIMIT between them continues
	// from the exact row. Four forms: newest first up to (<=) or strictly
	// before (<) the bound, oldest first from (>=) or strictly after (>) it.
	listWhere = `
FROM address_index
WHERE chain_id = ? AND address = unhex(?) AND list = ?
	AND block_number >= ? AND block_number <= ?
	AND (? = 0 OR bitAnd(roles, ?) != 0)
	AND (block_number, tx_index, position, sub_index, block_hash) `
	listBoundArgs = ` (?, ?, ?, ?, unhex(?))`
	listDesc      = `
ORDER BY block_number DESC, tx_index DESC, position DESC, sub_index DESC, block_hash DESC
LIMIT 1 BY ` + indexKey + `
LIMIT ?`
	listAsc = `
ORDER BY block_number, tx_index, position, sub_index, block_hash
LIMIT 1 BY ` + indexKey + `
LIMIT ?`

	qListDescUpTo  = `SELECT ` + indexColumns + listWhere + `<=` + listBoundArgs + listDesc
	qListDescBelow = `SELECT ` + indexColumns + listWhere + `<` + listBoundArgs + listDesc
	qListAscFrom   = `SELECT ` + indexColumns + listWhere + `>=` + listBoundArgs + listAsc
	qListAscAbove  = `SELECT ` + indexColumns + listWhere + `>` + listBoundArgs + listAsc

	// qActivity finds a few blocks with rows of an address's transactions
	// list: does it have any on the chain? Without ORDER BY the read stops
	// at the LIMIT (18.16 would read the whole key range to sort it).
	// qActivityExcept skips blocks already found orphaned: the set of
	// (block_number, hex(block_hash)) tuples.
	activityWhere = `
FROM address_index
WHERE chain_id = ? AND address = unhex(?) AND list = 1`
	activityLimit = `
LIMIT 1 BY block_number, block_hash
LIMIT ?`
	qActivity       = `SELECT block_number, block_hash` + activityWhere + activityLimit
	qActivityExcept = `SELECT block_number, block_hash` + activityWhere + `
	AND (block_number, hex(block_hash)) NOT IN ?` + activityLimit

	// qBlocksLookup reads the newest version of several blocks from
	// block_lookup (migration 5); the caller checks removed.
	qBlocksLookup = `SELECT number, argMax(header, version), argMax(removed, version)
FROM block_lookup
WHERE chain_id = ? AND number IN ?
GROUP BY number`

	// qBlocksByNumbers reads canonical blocks written before block_lookup
	// existed.
	qBlocksByNumbers = `SELECT ` + blockColumns + `
FROM blocks FINAL
WHERE chain_id = ? AND number IN ? AND removed = 0`

	// qTxLookup finds where a transaction hash was included, with its detail
	// (one row per block that included it: normally one).
	qTxLookup = `SELECT block_number, block_hash, tx_index, detail
FROM transaction_lookup
WHERE chain_id = ? AND hash = unhex(?)
LIMIT 1 BY block_hash
LIMIT 64`

	// qLatestTxs reads the transactions of a block range, newest first,
	// optionally of one receipt status (? = 2: any).
	qLatestTxs = `SELECT block_number, block_hash, tx_index, hash, type, from_address, to_address, contract_address, value,
	gas, gas_price, effective_gas_price, nonce, substring(input, 1, 4), length(input), status, gas_used
FROM transactions
WHERE chain_id = ? AND block_number >= ? AND block_number <= ? AND (? = 2 OR status = ?)
ORDER BY block_number DESC, tx_index DESC
LIMIT 1 BY block_number, block_hash, tx_index
LIMIT ?`
)
