package export

import (
	"testing"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/testenv"
)

// TestStatementsRunOnCurrentClickHouse: the jobs' statements on current
// ClickHouse (chDB); the 18.16 runs are the other tests.
func TestStatementsRunOnCurrentClickHouse(t *testing.T) {
	testenv.OnMigratedCurrentClickHouse(t,
		iOperation+" VALUES ('op', 'acc', 'TRANSACTION_EXPORT_EVM', 'RUNNING', '', '', '{}', '', 1, 0, 0, 0, 1764180000000, 1764180000000, 1)",
		testenv.Bind(qOperation, "'op'"), testenv.Bind(qStale, "1764180000001"),
		iFile+" VALUES ('op', 1, 0, 1764180000000, 'a,b')", testenv.Bind(qFile, "'op'", "1", "1"),
		testenv.Bind(chclient.PartitionsStatement, "'operations'"), "ALTER TABLE operation_files DROP PARTITION 20251126",
	)
}
