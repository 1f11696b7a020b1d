package nftdiscover

import (
	"testing"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// TestStatementsRunOnCurrentClickHouse runs this package's reads on current
// ClickHouse (chDB); TestDiscoverFromLogsIntegration runs them on 18.16.
func TestStatementsRunOnCurrentClickHouse(t *testing.T) {
	testenv.OnMigratedCurrentClickHouse(t, testenv.Bind(qTransfers, "43112", "0", "100"), testenv.Bind(qHead, "43112"))
}
