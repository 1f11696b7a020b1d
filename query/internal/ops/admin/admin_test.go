package admin_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/accountdb/accountdbtest"
	"github.com/moraine-data/moraine/query/internal/access/auth"
	"github.com/moraine-data/moraine/query/internal/ops/admin"
)

func TestAccountsAndKeys(t *testing.T) {
	db, _, _ := accountdbtest.Open(t)
	ctx := t.Context()
	a := &admin.Admin{DB: db, Clock: accountdb.NewClock(nil)}
	_, err := a.CreateAccount(ctx, "x", "gold")
	require.ErrorIs(t, err, admin.ErrBadPlan)
	acc, err := a.CreateAccount(ctx, "acme", "base")
	require.NoError(t, err)
	k, err := a.CreateKey(ctx, acc.ID)
	require.NoError(t, err)
	require.True(t, auth.WellFormed(k.Key))
	keys, err := a.Keys(ctx, acc.ID)
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.Equal(t, k.ID, keys[0].ID)
	require.Equal(t, auth.HashKey(k.Key), keys[0].Hash, "only the hash is stored")
	require.False(t, keys[0].Revoked())
	r, err := a.RevokeKey(ctx, k.ID)
	require.NoError(t, err)
	require.True(t, r.Revoked())
	again, err := a.RevokeKey(ctx, k.ID)
	require.NoError(t, err)
	require.Equal(t, r.RevokedAt, again.RevokedAt, "revoking twice changes nothing")
	_, err = a.CreateKey(ctx, "no-such-account")
	require.ErrorIs(t, err, accountdb.ErrNotFound)
	up, err := a.SetPlan(ctx, acc.ID, "pro")
	require.NoError(t, err)
	require.Equal(t, "pro", up.Plan)
}

func TestDevKeyIsIdempotent(t *testing.T) {
	db, _, _ := accountdbtest.Open(t)
	ctx := t.Context()
	a := &admin.Admin{DB: db, Clock: accountdb.NewClock(nil)}
	path := filepath.Join(t.TempDir(), "state", "dev-api-key")

	k1, created, err := a.DevKey(ctx, path, "free")
	require.NoError(t, err)
	require.True(t, created)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, k1+"\n", string(b))
	st, _ := os.Stat(path)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// The development account signs its webhooks: it has a secret.
	acc, err := db.KeyByHash(ctx, auth.HashKey(k1))
	require.NoError(t, err)
	sec, err := db.Secret(ctx, acc.AccountID)
	require.NoError(t, err)
	require.Regexp(t, `^[0-9a-f]{64}$`, sec.Secret)

	// Still valid: reused, and so is the secret.
	k2, created, err := a.DevKey(ctx, path, "free")
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, k1, k2)
	sec2, err := db.Secret(ctx, acc.AccountID)
	require.NoError(t, err)
	require.Equal(t, sec, sec2)

	// Revoked: a new key for the same development account.
	keyRow, err := db.KeyByHash(ctx, auth.HashKey(k1))
	require.NoError(t, err)
	_, err = a.RevokeKey(ctx, keyRow.ID)
	require.NoError(t, err)
	k3, created, err := a.DevKey(ctx, path, "free")
	require.NoError(t, err)
	require.True(t, created)
	require.NotEqual(t, k1, k3)
	accs, err := a.Accounts(ctx)
	require.NoError(t, err)
	require.Len(t, accs, 1)
	require.Equal(t, admin.DevAccountName, accs[0].Name)
	require.Equal(t, "free", accs[0].Plan)

	// Garbage in the file: replaced.
	require.NoError(t, os.WriteFile(path, []byte("junk"), 0o600))
	k4, created, err := a.DevKey(ctx, path, "free")
	require.NoError(t, err)
	require.True(t, created)
	require.True(t, auth.WellFormed(k4))
}
