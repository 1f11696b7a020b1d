package usageapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// TestQueriesRunOnCurrentClickHouse: every metrics read (each interval and
// groupBy, all filters) and the logs read, on current ClickHouse (chDB);
// the 18.16 runs are the other tests.
func TestQueriesRunOnCurrentClickHouse(t *testing.T) {
	var stmts []string
	stmts = append(stmts, `INSERT INTO api_requests (account_id, at, request_id, key_id, key_alias, route, operation, method, chain_id,
    status, duration_us, compute_units, client_ip, user_agent, host, region, kafka_partition, kafka_offset)
    VALUES ('a', 1772445600000, '0123456789abcdef', 'k', 'mk', '/v1/chains', 'supportedChains', 'GET', '43114', 404, 1500, 1, 'ip', 'ua', 'h', '', 0, 1)`)
	bind := func(q string, args []any) string {
		for _, a := range args {
			lit := fmt.Sprint(a)
			if s, ok := a.(string); ok {
				lit = "'" + s + "'"
			}
			q = strings.Replace(q, "?", lit, 1)
		}
		return q
	}
	f := filters{from: d0, to: d0.AddDate(0, 0, 7), chainID: "43114", status: 404, keyID: "k", route: "/v1/chains"}
	for interval, r := range rollups {
		for group := range groupColumns {
			for _, sc := range []scope{{account: "a"}, {all: true}} {
				ff := f
				if sc.all {
					ff.keyID = ""
				}
				cond, args := where("bucket", uint64(f.from.Unix()), uint64(f.to.Unix()), sc, ff)
				stmts = append(stmts, bind(metricsQuery(table(r.table, sc, ff, group), interval, group, cond), args))
			}
		}
	}
	for _, r := range []string{"hours", "days"} {
		tbl := table(r, scope{all: true}, filters{}, "apiKeyId")
		if !perKey(tbl) {
			t.Fatalf("%s: not the per-key rollup", tbl)
		}
		cond, args := where("bucket", 0, 1, scope{all: true}, filters{})
		stmts = append(stmts, bind(metricsQuery(tbl, "daily", "apiKeyId", cond), args))
	}
	cond, args := where("bucket", 0, 1, scope{all: true}, filters{})
	stmts = append(stmts, bind(`SELECT countMerge(requests) FROM api_usage_global_hours WHERE `+cond, args))
	cond, args = where("at", uint64(f.from.UnixMilli()), uint64(f.to.UnixMilli()), scope{all: true}, filters{requestType: "rpc"})
	stmts = append(stmts, bind(`SELECT `+logColumns+` FROM api_requests_by_time WHERE `+cond+
		` AND (at < ? OR (at = ? AND request_id < ?)) ORDER BY at DESC, request_id DESC LIMIT 11`, append(args, 5, 5, "x")))
	testenv.OnMigratedCurrentClickHouse(t, stmts...)
}
