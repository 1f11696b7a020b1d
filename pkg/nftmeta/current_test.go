package nftmeta

import (
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/testenv"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// TestStatementsRunOnCurrentClickHouse runs every statement of this package
// on current ClickHouse (chDB); TestStoreIntegration runs them on 18.16.
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
		iMetadata+" VALUES (43112, unhex('0102030405060708090a0b0c0d0e0f1011121314'), '1', 721, 'ipfs://x', 'INDEXED', 1, "+
			"'n', 's', 'd', 'i', 'a', 'e', 'b', '[]', '', -1, 1, 0, 0, '', 1)",
		bind(qMetadata, "43112", "['0102030405060708090a0b0c0d0e0f1011121314']", "['1', '2']"),
		iReindex+" VALUES (43112, unhex('0102030405060708090a0b0c0d0e0f1011121314'), '1', 1)",
		bind(qLastReindex, "43112", "'0102030405060708090a0b0c0d0e0f1011121314'", "'1'"),
	)
	testenv.OnCurrentClickHouse(t, stmts)
}
