package replay

import (
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/testenv"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

func bind(q string, lits ...string) string {
	for _, l := range lits {
		q = strings.Replace(q, "?", l, 1)
	}
	return q
}

// TestQueriesRunOnCurrentClickHouse runs the replay's reads on current
// ClickHouse (chDB); the external tables they join are made as Memory
// tables of the same shape (the 18.16 runs: TestReplayIntegration).
func TestQueriesRunOnCurrentClickHouse(t *testing.T) {
	ms, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for _, m := range ms {
		stmts = append(stmts, m.Statements...)
	}
	n := "1"
	stmts = append(stmts,
		"CREATE TABLE "+watchedTable+" (a String, t String) ENGINE = Memory",
		"CREATE TABLE "+wantedTable+" (h FixedString(32), t FixedString(32)) ENGINE = Memory",
		bind(qHead, n), bind(qCanonical, n, n, n), bind(qBlockVersion, n, n),
		bind(qCandidates, n, n, n, n, n, n), bind(qCandidatesInternal, n, n, n, n, n, n, n, n, n),
		bind(qTxs, n, n, n), bind(qLogs, n, n, n), bind(qInternal, n, n, n),
	)
	testenv.OnCurrentClickHouse(t, stmts)
}
