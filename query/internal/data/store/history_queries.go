package store

import "strings"

// Named queries of the transaction-history reads (migrations 6 and 8). Like the
// block queries they are bounded by a key prefix and a LIMIT. They read
// without FINAL: rows with one key are identical copies (a redelivered
// record rewrites the same row; a reorg's replacement has another block
// hash, in the key), so "LIMIT 1 BY" the key drops the copies at a fraction
// of FINAL's merge, and the block hash is checked against the canonical
// block afterwards.
const (
	// The list reads (address_lists, migration 8): one list's rows of an
	// address are one range of list_key, which also orders them, so a page
	// is a key range, read newest or oldest first, up to a LIMIT. The range
	// holds the seek bound and the block window (store.listRange); rows of
	// two branches with the same seek differ by block hash, the end of the
	// key, so a read that stops at its LIMIT between them continues from
	// the exact row. The roles filter (? : the role bits, one of which a
	// row must have) is a form of its own: the others never read roles.
	listWhere = `
FROM address_lists
WHERE list_key >= unhex(?) AND list_key <= unhex(?)`
	listRoles = `
	AND bitAnd(roles, ?) != 0`
	listDesc = `
ORDER BY list_key DESC
LIMIT 1 BY list_key
LIMIT ?`
	listAsc = `
ORDER BY list_key
LIMIT 1 BY list_key
LIMIT ?`

	qListDesc      = `SELECT list_key, roles, entry` + listWhere + listDesc
	qListDescRoles = `SELECT list_key, roles, entry` + listWhere + listRoles + listDesc
	qListAsc       = `SELECT list_key, roles, entry` + listWhere + listAsc
	qListAscRoles  = `SELECT list_key, roles, entry` + listWhere + listRoles + listAsc

	// qActivity finds a few blocks with rows of an address's transactions
	// list (a key range): does it have any on the chain? Without ORDER BY
	// the read stops at the LIMIT (18.16 would read the whole key range to
	// sort it). The block is bytes 30-37 of the key (number) and 50-81
	// (hash). qActivityExcept skips blocks already found orphaned: the set
	// of (hex(number bytes), hex(hash)) tuples.
	activityBlock = `substring(list_key, 30, 8), substring(list_key, 50, 32)`
	activityWhere = `
FROM address_lists
WHERE list_key >= unhex(?) AND list_key <= unhex(?)`
	activityLimit = `
LIMIT 1 BY ` + activityBlock + `
LIMIT ?`
	qActivity       = `SELECT list_key` + activityWhere + activityLimit
	qActivityExcept = `SELECT list_key` + activityWhere + `
	AND (hex(substring(list_key, 30, 8)), hex(substring(list_key, 50, 32))) NOT IN ?` + activityLimit

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
)

// txLookupQuery reads the rows of n transaction hashes (transactions_by_hash,
// migration 9; one per block that included a hash: normally one): a range
// of tx_key per hash, joined by OR, which ClickHouse's index reads as that
// many ranges. Each hash's bounds are two parameters, then the LIMIT (64
// per hash).
func txLookupQuery(n int) string {
	ranges := strings.TrimSuffix(strings.Repeat("(tx_key >= unhex(?) AND tx_key <= unhex(?)) OR ", n), " OR ")
	return `SELECT tx_key, entry
FROM transactions_by_hash
WHERE ` + ranges + `
LIMIT 1 BY tx_key
LIMIT ?`
}
