package accountdb

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Operator keys (table operator_keys, migration *_api_usage_and_operations):
// an API key marked operator reads every account's usage and request log through
// getApiUsageMetrics and getApiLogs, where an ordinary key reads its own
// account's. The mark belongs to the key, not the account, so an operator
// hands out one dedicated key (for a dashboard, say) and revokes it alone;
// revoking the key ends the mark with it.
const (
	iOperatorKey = `INSERT INTO operator_keys (key_id, operator, version)`
	qOperatorKey = `SELECT operator FROM operator_keys FINAL WHERE key_id = ?`
)

// SetOperator marks keyID an operator key (or unmarks it); version orders
// the changes (a Clock).
func (db *DB) SetOperator(ctx context.Context, keyID string, operator bool, version uint64) error {
	var v uint8
	if operator {
		v = 1
	}
	return db.insert(ctx, "set_operator", iOperatorKey, [][]any{{keyID, v, version}})
}

// IsOperator reports whether keyID is marked an operator key.
func (db *DB) IsOperator(ctx context.Context, keyID string) (bool, error) {
	var v uint8
	err := db.query(ctx, "is_operator", qOperatorKey, func(r driver.Rows) error { return r.Scan(&v) }, keyID)
	return v == 1, err
}
