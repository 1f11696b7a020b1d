package store

import (
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/testenv"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// TestQueriesRunOnCurrentClickHouse runs every read of this package on
// current ClickHouse (chDB) over the migrated schema; the 18.16 runs are
// the other tests here.
func TestQueriesRunOnCurrentClickHouse(t *testing.T) {
	bind := testenv.Bind
	n, h, set := "1", "'"+strings.Repeat("ab", 32)+"'", "(1, 2)"
	k := "'" + strings.Repeat("cd", schema.ListKeyLen) + "'"
	t72 := "'" + strings.Repeat("cd", schema.TxKeyLen) + "'"
	testenv.OnMigratedCurrentClickHouse(t,
		bind(qHeads, set), bind(qLookupRange, n, n, n), bind(qBlocksRange, n, n, n, n),
		bind(qHashToNumber, n, h), bind(qBlockTxLists, n, set), bind(qBlockTxs, n, set, n, n), qMigrations, schema.CopyAddressIndex,
		bind(qListDesc, k, k, n), bind(qListDescRoles, k, k, n, n), bind(qListAsc, k, k, n), bind(qListAscRoles, k, k, n, n),
		bind(qActivity, k, k, n), bind(qActivityExcept, k, k, "(('"+strings.Repeat("00", 8)+"', '"+strings.Repeat("AB", 32)+"'))", n),
		bind(qActivityExcept, k, k, "(('"+strings.Repeat("00", 8)+"', '"+strings.Repeat("AB", 32)+"'), ('"+
			strings.Repeat("01", 8)+"', '"+strings.Repeat("CD", 32)+"'))", n),
		bind(qBlocksLookup, n, set), bind(qBlocksByNumbers, n, set),
		bind(txLookupQuery(1), t72, t72, "64"), bind(txLookupQuery(2), t72, t72, t72, t72, "128"), schema.CopyTransactionLookup, schema.CopyTransactions,
		bind(qOrphanedBlocks, set, n),
		bind(qFirstBlock, n), bind(qBlockAtOrAfter, n, n), bind(qBlockAtOrBefore, n, n),
	)
}

// TestBlocksBetweenOnCurrentClickHouse: the export jobs' block range.
func TestBlocksBetweenOnCurrentClickHouse(t *testing.T) {
	testenv.OnMigratedCurrentClickHouse(t, testenv.Bind(qBlocksBetween, "1", "0", "10"))
}
