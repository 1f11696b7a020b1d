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
	n, h, a, set := "1", "'"+strings.Repeat("ab", 32)+"'", "'"+strings.Repeat("cd", 20)+"'", "(1, 2)"
	stmts = append(stmts,
		bind(qHeads, set), bind(qBlocksRange, n, n, n, n), bind(qBlockLookup, n, n), bind(qBlockByNumber, n, n),
		bind(qHashToNumber, n, h), bind(qBlockTxs, n, n, h, n, n), qMigrations,
		bind(qListDescUpTo, n, a, n, n, n, n, n, n, n, n, n, h, n), bind(qListDescBelow, n, a, n, n, n, n, n, n, n, n, n, h, n),
		bind(qListAscFrom, n, a, n, n, n, n, n, n, n, n, n, h, n), bind(qListAscAbove, n, a, n, n, n, n, n, n, n, n, n, h, n),
		bind(qActivity, n, a, n), bind(qActivityExcept, n, a, "((1, '"+strings.Repeat("AB", 32)+"'))", n),
		bind(qActivityExcept, n, a, "((1, '"+strings.Repeat("AB", 32)+"'), (2, '"+strings.Repeat("CD", 32)+"'))", n),
		bind(qBlocksLookup, n, set), bind(qBlocksByNumbers, n, set),
		bind(qTxLookup, n, h),
		bind(qLatestTxs, n, n, n, "2", "2", n), bind(qOrphanedBlocks, set, n),
	)
	testenv.OnCurrentClickHouse(t, stmts)
}
