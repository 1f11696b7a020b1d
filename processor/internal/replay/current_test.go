package replay

import (
	"testing"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// TestQueriesRunOnCurrentClickHouse runs the replay's reads on current
// ClickHouse (chDB); the external tables they join are made as Memory
// tables of the same shape (the 18.16 runs: TestReplayIntegration).
func TestQueriesRunOnCurrentClickHouse(t *testing.T) {
	bind := testenv.Bind
	n := "1"
	testenv.OnMigratedCurrentClickHouse(t,
		"CREATE TABLE "+watchedTable+" (a String, t String) ENGINE = Memory",
		"CREATE TABLE "+wantedTable+" (h FixedString(32), t FixedString(32)) ENGINE = Memory",
		"CREATE TABLE "+placesTable+" (h FixedString(32), i UInt32) ENGINE = Memory",
		bind(qHead, n), bind(qCanonical, n, n, n), bind(qBlockVersion, n, n),
		bind(qCandidates, n, n, n, n, n, n), bind(qCandidatesInternal, n, n, n, n, n, n, n, n, n),
		bind(qTxs, n, n, n), bind(qLogs, n, n, n), bind(qInternal, n, n, n),
	)
}
