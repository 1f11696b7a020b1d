package ledger

import (
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// TestQueriesRunOnCurrentClickHouse runs the ledger's statements on current
// ClickHouse (chDB); the 18.16 runs are the processor's
// TestReplayIntegration.
func TestQueriesRunOnCurrentClickHouse(t *testing.T) {
	h := "'" + strings.Repeat("a", 32) + "'"
	testenv.OnMigratedCurrentClickHouse(t,
		iEntries+" VALUES ('w', 10, 1, 'm', 0, 43112, "+h+", "+h+", "+h+", '', 1, 0, '', 1700000000000, 1700000000000)",
		testenv.Bind(qRange, "'w'", "1", "20"), testenv.Bind(qComplete, "'w'", "1"),
	)
}
