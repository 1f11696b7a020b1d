package usagesink

import (
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/testenv"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// TestStatementsRunOnCurrentClickHouse: the sink's statements, and the
// materialized views they feed, on current ClickHouse (chDB); the 18.16
// runs are the other tests.
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
		iRequests+" VALUES ('a', 1764180000123, '0123456789abcdef', 'k', 'mk', '/v1/chains', 'supportedChains', 'GET', '', 200, 1500, 1, 'ip', 'ua', 'h', '', 3, 7)",
		bind(qMarks, "(3, 4)"),
		bind(qTop, "0"),
		bind(qAccountNames, "('a')"),
		bind(chclient.PartitionsStatement, "'api_requests'"),
		"ALTER TABLE api_requests DROP PARTITION 202511",
		"ALTER TABLE api_usage_hours DROP PARTITION 202511",
	)
	testenv.OnCurrentClickHouse(t, stmts)
}
