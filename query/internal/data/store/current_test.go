package store

import (
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/testenv"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// bind replaces each "?" of q with the next literal (client-side binding,
// as clickhouse-go does).
func bind(q string, lits ...string) string {
	for _, l := range lits {
		q = strings.Replace(q, "?", l, 1)
	}
	return q
}

// TestQueriesRunOnCurrentClickHouse runs every read of this package on
// current ClickHouse (chDB) over the migrated schema; the 18.16 runs are
// the other tests here.
func TestQueriesRunOnCurrentClickHouse(t *testing.T) {
	ms, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for _, m := range ms {
		stmts = append(stmts, m.Statements...)
	}
	n, h, set := "1", "'"+strings.Repeat("ab", 32)+"'", "(1, 2)"
	k := "'" + strings.Repeat("cd", schema.ListKeyLen) + "'"
	t72 := "'" + strings.Repeat("cd", schema.TxKeyLen) + "'"
	stmts = append(stmts,
		bind(qHeads, set), bind(qBlocksRange, n, n, n, n), bind(qBlockLookup, n, n), bind(qBlockByNumber, n, n),
		bind(qHashToNumber, n, h), bind(qBlockTxs, n, n, h, n, n), qMigrations, schema.CopyAddressIndex,
		bind(qListDesc, k, k, n), bind(qListDescRoles, k, k, n, n), bind(qListAsc, k, k, n), bind(qListAscRoles, k, k, n, n),
		bind(qActivity, k, k, n), bind(qActivityExcept, k, k, "(('"+strings.Repeat("00", 8)+"', '"+strings.Repeat("AB", 32)+"'))", n),
		bind(qActivityExcept, k, k, "(('"+strings.Repeat("00", 8)+"', '"+strings.Repeat("AB", 32)+"'), ('"+
			strings.Repeat("01", 8)+"', '"+strings.Repeat("CD", 32)+"'))", n),
		bind(qBlocksLookup, n, set), bind(qBlocksByNumbers, n, set),
		bind(qTxLookup, t72, t72), schema.CopyTransactionLookup, schema.CopyTransactions,
		bind(qLatestTxs, n, n, n, "2", "2", n), bind(qOrphanedBlocks, set, n),
		bind(qFirstBlock, n), bind(qBlockAtOrAfter, n, n), bind(qBlockAtOrBefore, n, n),
	)
	testenv.OnCurrentClickHouse(t, stmts)
}

// TestBlocksBetweenOnCurrentClickHouse: the export jobs' block range.
func TestBlocksBetweenOnCurrentClickHouse(t *testing.T) {
	ms, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for _, m := range ms {
		stmts = append(stmts, m.Statements...)
	}
	testenv.OnCurrentClickHouse(t, append(stmts, bind(qBlocksBetween, "1", "0", "10")))
}
