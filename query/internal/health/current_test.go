package health

import (
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/testenv"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// TestStatementsRunOnCurrentClickHouse: the probe's write and read on
// current ClickHouse (chDB).
func TestStatementsRunOnCurrentClickHouse(t *testing.T) {
	ms, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for _, m := range ms {
		stmts = append(stmts, m.Statements...)
	}
	testenv.OnCurrentClickHouse(t, append(stmts, iWrite+" VALUES ('i', 1)", strings.Replace(qRead, "?", "'i'", 1)))
}
