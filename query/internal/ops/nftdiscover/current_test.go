package nftdiscover

import (
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/testenv"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// TestStatementsRunOnCurrentClickHouse runs this package's reads on current
// ClickHouse (chDB); TestDiscoverFromLogsIntegration runs them on 18.16.
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
	stmts = append(stmts, bind(qTransfers, "43112", "0", "100"), bind(qHead, "43112"))
	testenv.OnCurrentClickHouse(t, stmts)
}
