// Package admin holds the operator actions behind moraine-admin: accounts,
// plans and API keys, written straight to ClickHouse.
//
// The running query service picks the changes up by itself: key lookups
// are cached for at most --auth.cache-ttl (5 s), so a new or revoked key, or
// a plan change, takes effect within that time; account records (plan) reach
// the address-watch topic through the query service's reconciler within
// --watch.reconcile-interval.
package admin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/query/internal/access/auth"
	"github.com/moraine-data/moraine/query/internal/access/plan"
)

// Admin performs operator actions.
type Admin struct {
	DB    *accountdb.DB
	Clock *accountdb.Clock
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (a *Admin) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// ErrBadPlan is returned for a plan name that is not an account plan.
var ErrBadPlan = fmt.Errorf("plan must be one of %s", strings.Join(plan.Names, ", "))

// CreateAccount creates an account on a plan.
func (a *Admin) CreateAccount(ctx context.Context, name, planName string) (accountdb.Account, error) {
	if !plan.Valid(planName) {
		return accountdb.Account{}, ErrBadPlan
	}
	if strings.TrimSpace(name) == "" {
		return accountdb.Account{}, errors.New("account name must not be empty")
	}
	acc := accountdb.Account{
		ID: uuid.NewString(), Name: name, Plan: planName,
		CreatedAt: uint64(a.now().UnixMilli()), Version: a.Clock.Next(0),
	}
	return acc, a.DB.PutAccount(ctx, acc)
}

// SetPlan moves an account to another plan.
func (a *Admin) SetPlan(ctx context.Context, id, planName string) (accountdb.Account, error) {
	if !plan.Valid(planName) {
		return accountdb.Account{}, ErrBadPlan
	}
	acc, err := a.DB.Account(ctx, id)
	if err != nil {
		return accountdb.Account{}, err
	}
	acc.Plan, acc.Version = planName, a.Clock.Next(acc.Version)
	return acc, a.DB.PutAccount(ctx, acc)
}

// Accounts lists every account.
func (a *Admin) Accounts(ctx context.Context) ([]accountdb.Account, error) { return a.DB.Accounts(ctx) }

// ActiveWebhooks counts an account's active webhooks: what its plan's
// webhooks-per-account limit applies to.
func (a *Admin) ActiveWebhooks(ctx context.Context, accountID string) (int, error) {
	return a.DB.CountActiveWebhooks(ctx, accountID)
}

// CreateKey creates a key for an account; the returned NewKey.Key is the
// only time the key exists outside the caller's hands.
func (a *Admin) CreateKey(ctx context.Context, accountID string) (auth.NewKey, error) {
	if _, err := a.DB.Account(ctx, accountID); err != nil {
		return auth.NewKey{}, err
	}
	k, err := auth.GenerateKey()
	if err != nil {
		return auth.NewKey{}, err
	}
	err = a.DB.PutKey(ctx, accountdb.Key{
		Hash: k.Hash, ID: k.ID, Prefix: k.Prefix, AccountID: accountID,
		CreatedAt: uint64(a.now().UnixMilli()), Version: a.Clock.Next(0),
	})
	return k, err
}

// SetOperator marks a key an operator key, which reads every account's
// usage and request logs (getApiUsageMetrics, getApiLogs), or unmarks it.
func (a *Admin) SetOperator(ctx context.Context, keyID string, operator bool) error {
	if _, err := a.DB.KeyByID(ctx, keyID); err != nil {
		return err
	}
	return a.DB.SetOperator(ctx, keyID, operator, a.Clock.Next(0))
}

// IsOperator reports whether a key is an operator key.
func (a *Admin) IsOperator(ctx context.Context, keyID string) (bool, error) {
	return a.DB.IsOperator(ctx, keyID)
}

// Keys lists an account's keys.
func (a *Admin) Keys(ctx context.Context, accountID string) ([]accountdb.Key, error) {
	if _, err := a.DB.Account(ctx, accountID); err != nil {
		return nil, err
	}
	return a.DB.Keys(ctx, accountID)
}

// RevokeKey revokes a key by id; revoking a revoked key changes nothing.
func (a *Admin) RevokeKey(ctx context.Context, keyID string) (accountdb.Key, error) {
	k, err := a.DB.KeyByID(ctx, keyID)
	if err != nil || k.Revoked() {
		return k, err
	}
	k.RevokedAt, k.Version = uint64(a.now().UnixMilli()), a.Clock.Next(k.Version)
	return k, a.DB.PutKey(ctx, k)
}

// EnsureSecret gives the account a webhook signing secret (32 random
// bytes, 64 lowercase hex) unless it has one, so that its deliveries are
// signed; delivery sends unsigned messages for an account without one. The
// query service's reconciler publishes it to the address-watch topic.
func (a *Admin) EnsureSecret(ctx context.Context, accountID string) error {
	cur, err := a.DB.Secret(ctx, accountID)
	switch {
	case err == nil && cur.Secret != "":
		return nil
	case err != nil && !errors.Is(err, accountdb.ErrNotFound):
		return err
	}
	acc, err := a.DB.Account(ctx, accountID)
	if err != nil {
		return err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	return a.DB.PutSecret(ctx, accountdb.Secret{AccountID: accountID, Secret: hex.EncodeToString(raw), Version: a.Clock.Next(max(cur.Version, acc.Version))})
}

// DevAccountName names the development account of `make run`.
const DevAccountName = "development"

// DevKey returns the development key saved at path when it is still valid
// (well formed, known, not revoked, its account present); otherwise it
// creates a key (and the development account on planName if there is none),
// saves it at path (mode 0600) and returns it with created true. Either way
// the development account gets a shared secret if it has none (EnsureSecret),
// so `make run` delivers signed webhooks.
func (a *Admin) DevKey(ctx context.Context, path, planName string) (key string, created bool, err error) {
	if b, err := os.ReadFile(path); err == nil {
		key := strings.TrimSpace(string(b))
		if auth.WellFormed(key) {
			k, err := a.DB.KeyByHash(ctx, auth.HashKey(key))
			switch {
			case err == nil && !k.Revoked():
				if _, err := a.DB.Account(ctx, k.AccountID); err == nil {
					return key, false, a.EnsureSecret(ctx, k.AccountID)
				} else if !errors.Is(err, accountdb.ErrNotFound) {
					return "", false, err
				}
			case err != nil && !errors.Is(err, accountdb.ErrNotFound):
				return "", false, err
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, err
	}
	accs, err := a.DB.Accounts(ctx)
	if err != nil {
		return "", false, err
	}
	var acc accountdb.Account
	for _, x := range accs {
		if x.Name == DevAccountName {
			acc = x
			break
		}
	}
	if acc.ID == "" {
		if acc, err = a.CreateAccount(ctx, DevAccountName, planName); err != nil {
			return "", false, err
		}
	}
	if err := a.EnsureSecret(ctx, acc.ID); err != nil {
		return "", false, err
	}
	k, err := a.CreateKey(ctx, acc.ID)
	if err != nil {
		return "", false, err
	}
	if err := writeFileAtomic(path, []byte(k.Key+"\n")); err != nil {
		return "", false, err
	}
	return k.Key, true, nil
}

func writeFileAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".dev-api-key-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
