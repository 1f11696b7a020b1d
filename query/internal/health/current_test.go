package health

import (
	"testing"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// TestStatementsRunOnCurrentClickHouse: the probe's write and read on
// current ClickHouse (chDB).
func TestStatementsRunOnCurrentClickHouse(t *testing.T) {
	testenv.OnMigratedCurrentClickHouse(t, iWrite+" VALUES ('i', 1)", testenv.Bind(qRead, "'i'"))
}
