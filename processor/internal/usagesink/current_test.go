package usagesink

import (
	"testing"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/testenv"
)

// TestStatementsRunOnCurrentClickHouse: the sink's statements, and the
// materialized views they feed, on current ClickHouse (chDB); the 18.16
// runs are the other tests.
func TestStatementsRunOnCurrentClickHouse(t *testing.T) {
	testenv.OnMigratedCurrentClickHouse(t,
		iRequests+" VALUES ('a', 1764180000123, '0123456789abcdef', 'k', 'mk', '/v1/chains', 'supportedChains', 'GET', '', 200, 1500, 1, 'ip', 'ua', 'h', '', 3, 7)",
		testenv.Bind(qMarks, "(3, 4)"),
		testenv.Bind(qTop, "0"),
		testenv.Bind(qAccountNames, "('a')"),
		testenv.Bind(chclient.PartitionsStatement, "'api_requests'"),
		"ALTER TABLE api_requests DROP PARTITION 202511",
		"ALTER TABLE api_usage_hours DROP PARTITION 202511",
	)
}
