package accountdb

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Secret is an account's webhook signing secret.
type Secret struct {
	AccountID string
	// Secret is 64 lowercase hex characters.
	Secret  string
	Version uint64
}

const (
	secretCols  = `account_id, secret, version`
	qSecret     = `SELECT ` + secretCols + ` FROM shared_secrets FINAL WHERE account_id = ?`
	qAllSecrets = `SELECT ` + secretCols + ` FROM shared_secrets FINAL`
	iSecret     = `INSERT INTO shared_secrets (` + secretCols + `)`
)

// PutSecret writes a (new version of an) account's secret.
func (db *DB) PutSecret(ctx context.Context, s Secret) error {
	return db.insert(ctx, "put_secret", iSecret, [][]any{{s.AccountID, s.Secret, s.Version}})
}

// Secret reads an account's secret, ErrNotFound before the first one.
func (db *DB) Secret(ctx context.Context, accountID string) (Secret, error) {
	ss, err := collect(ctx, db.query, "secret", qSecret, scanSecret, accountID)
	return first(ss, err, "secret of "+accountID)
}

// AllSecrets reads every account's secret.
func (db *DB) AllSecrets(ctx context.Context) ([]Secret, error) {
	return collect(ctx, db.stream, "all_secrets", qAllSecrets, scanSecret)
}

func scanSecret(r driver.Rows) (Secret, error) {
	var s Secret
	err := r.Scan(&s.AccountID, &s.Secret, &s.Version)
	return s, err
}
