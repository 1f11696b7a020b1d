package export

import (
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/testenv"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// TestStatementsRunOnCurrentClickHouse: the jobs' statements on current
// ClickHouse (chDB); the 18.16 runs are the other tests.
func TestStatementsRunOnCurrentClickHouse(t *testing.T) {
	ms, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for _, m := range ms {
		stmts = append(stmts, m.Statements...)
	}
	bind := func(q string, lits ...string) string {
		for _, l := range lits {
			q = strings.Replace(q, "?", l, 1)
		}
		return q
	}
	stmts = append(stmts,
		iOperation+" VALUES ('op', 'acc', 'TRANSACTION_EXPORT_EVM', 'RUNNING', '', '', '{}', '', 1, 0, 0, 0, 1764180000000, 1764180000000, 1)",
		bind(qOperation, "'op'"), bind(qStale, "1764180000001"),
		iFile+" VALUES ('op', 1, 0, 1764180000000, 'a,b')", bind(qFile, "'op'", "1", "1"),
		bind(chclient.PartitionsStatement, "'operations'"), "ALTER TABLE operation_files DROP PARTITION 20251126",
	)
	testenv.OnCurrentClickHouse(t, stmts)
}
