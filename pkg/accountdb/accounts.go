package accountdb

import (
	"context"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Account owns API keys, webhooks and a shared secret, and has a plan.
type Account struct {
	ID   string
	Name string
	Plan string
	// CreatedAt is Unix milliseconds.
	CreatedAt uint64
	Version   uint64
}

// Key is a stored API key: never the key itself, only its SHA-256.
type Key struct {
	// Hash is the hex SHA-256 of the whole key.
	Hash      string
	ID        string
	Prefix    string
	AccountID string
	CreatedAt uint64
	// RevokedAt is Unix milliseconds, 0 while the key is valid.
	RevokedAt uint64
	Version   uint64
}

// Revoked reports whether the key was revoked.
func (k Key) Revoked() bool { return k.RevokedAt != 0 }

const (
	accountCols = `id, name, plan, created_at, version`
	qAccount    = `SELECT ` + accountCols + ` FROM accounts FINAL WHERE id = ?`
	qAccounts   = `SELECT ` + accountCols + ` FROM accounts FINAL ORDER BY created_at, id`
	iAccount    = `INSERT INTO accounts (` + accountCols + `)`

	keyCols        = `key_hash, key_id, key_prefix, account_id, created_at, revoked_at, version`
	qKeyByHash     = `SELECT ` + keyCols + ` FROM api_keys FINAL WHERE key_hash = ?`
	qKeyByID       = `SELECT ` + keyCols + ` FROM (SELECT ` + keyCols + ` FROM api_keys FINAL) WHERE key_id = ?`
	qKeysByAccount = `SELECT ` + keyCols + ` FROM (SELECT ` + keyCols + ` FROM api_keys FINAL) WHERE account_id = ? ORDER BY created_at, key_id`
	iKey           = `INSERT INTO api_keys (` + keyCols + `)`
)

func scanAccount(r driver.Rows) (Account, error) {
	var a Account
	err := r.Scan(&a.ID, &a.Name, &a.Plan, &a.CreatedAt, &a.Version)
	return a, err
}

// PutAccount writes a (new version of an) account.
func (db *DB) PutAccount(ctx context.Context, a Account) error {
	return db.insert(ctx, "put_account", iAccount, [][]any{{a.ID, a.Name, a.Plan, a.CreatedAt, a.Version}})
}

// Account reads one account.
func (db *DB) Account(ctx context.Context, id string) (Account, error) {
	as, err := collect(ctx, db.query, "account", qAccount, scanAccount, id)
	return first(as, err, "account "+id)
}

// Accounts reads every account, oldest first.
func (db *DB) Accounts(ctx context.Context) ([]Account, error) {
	return collect(ctx, db.stream, "accounts", qAccounts, scanAccount)
}

func scanKey(r driver.Rows) (Key, error) {
	var k Key
	err := r.Scan(&k.Hash, &k.ID, &k.Prefix, &k.AccountID, &k.CreatedAt, &k.RevokedAt, &k.Version)
	return k, err
}

// PutKey writes a (new version of a) key.
func (db *DB) PutKey(ctx context.Context, k Key) error {
	return db.insert(ctx, "put_key", iKey, [][]any{{k.Hash, k.ID, k.Prefix, k.AccountID, k.CreatedAt, k.RevokedAt, k.Version}})
}

func (db *DB) keys(ctx context.Context, name, q string, arg string) ([]Key, error) {
	return collect(ctx, db.query, name, q, scanKey, arg)
}

// KeyByHash reads the key whose hex SHA-256 is hash.
func (db *DB) KeyByHash(ctx context.Context, hash string) (Key, error) {
	ks, err := db.keys(ctx, "key_by_hash", qKeyByHash, hash)
	return first(ks, err, "key")
}

// KeyByID reads a key by its id.
func (db *DB) KeyByID(ctx context.Context, id string) (Key, error) {
	ks, err := db.keys(ctx, "key_by_id", qKeyByID, id)
	return first(ks, err, "key "+id)
}

// Keys reads an account's keys, oldest first, revoked ones included.
func (db *DB) Keys(ctx context.Context, accountID string) ([]Key, error) {
	return db.keys(ctx, "keys", qKeysByAccount, accountID)
}
