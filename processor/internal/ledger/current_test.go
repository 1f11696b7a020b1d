package ledger

import (
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/testenv"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// TestQueriesRunOnCurrentClickHouse runs the ledger's statements on current
// ClickHouse (chDB); the 18.16 runs are the processor's
// TestReplayIntegration.
func TestQueriesRunOnCurrentClickHouse(t *testing.T) {
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
	h := "'" + strings.Repeat("a", 32) + "'"
	stmts = append(stmts,
		iEntries+" VALUES ('w', 10, 1, 'm', 0, 43112, "+h+", "+h+", "+h+", '', 1, 0, '', 1700000000000, 1700000000000)",
		bind(qRange, "'w'", "1", "20"), bind(qComplete, "'w'", "1"),
	)
	testenv.OnCurrentClickHouse(t, stmts)
}
