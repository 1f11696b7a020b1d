package watch_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/watch"
)

// memStore is a watch.Store in memory: the rows last written.
type memStore struct {
	webhooks map[string]accountdb.Webhook
	addrs    []accountdb.Address
	accounts map[string]accountdb.Account
	secrets  map[string]accountdb.Secret
}

func newMemStore() *memStore {
	return &memStore{webhooks: map[string]accountdb.Webhook{}, accounts: map[string]accountdb.Account{}, secrets: map[string]accountdb.Secret{}}
}

func (m *memStore) Webhook(_ context.Context, accountID, id string) (accountdb.Webhook, error) {
	w, ok := m.webhooks[id]
	if !ok || w.AccountID != accountID {
		return w, accountdb.ErrNotFound
	}
	return w, nil
}

func (m *memStore) PutWebhook(_ context.Context, w accountdb.Webhook) error {
	m.webhooks[w.ID] = w
	return nil
}

func (m *memStore) PutAddresses(_ context.Context, rows []accountdb.Address) error {
	m.addrs = append(m.addrs, rows...)
	return nil
}

func (m *memStore) Account(_ context.Context, id string) (accountdb.Account, error) {
	a, ok := m.accounts[id]
	if !ok {
		return a, accountdb.ErrNotFound
	}
	return a, nil
}

func (m *memStore) Secret(_ context.Context, accountID string) (accountdb.Secret, error) {
	s, ok := m.secrets[accountID]
	if !ok {
		return s, accountdb.ErrNotFound
	}
	return s, nil
}

func (m *memStore) PutSecret(_ context.Context, s accountdb.Secret) error {
	m.secrets[s.AccountID] = s
	return nil
}

// recPublisher records what it is asked to produce and fails with err.
type recPublisher struct {
	keys []string
	err  error
}

func (p *recPublisher) Publish(_ context.Context, recs []*kgo.Record) error {
	for _, r := range recs {
		p.keys = append(p.keys, string(r.Key))
	}
	return p.err
}

// TestWriterReportsRowsThatCannotBePublished checks that a written row
// whose record cannot be built is reported in PublishErr (the change
// stands), that the other records are still produced, and that a failed
// produce is reported too.
func TestWriterReportsRowsThatCannotBePublished(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	pub := &recPublisher{}
	w := watch.Writer{Store: st, Publisher: pub, Locks: watch.NewLocks(), Clock: accountdb.NewClock(nil)}
	const acct = "0b7cc0d5-4a5e-4b8f-8d5f-4a4e0d9b8a11"

	wh := accountdb.Webhook{AccountID: acct, ID: hookA, URL: "https://x", ChainID: "43112", Status: accountdb.StatusActive, EventSignatures: []string{}}
	u, err := w.CreateWebhook(ctx, wh, []accountdb.Address{
		{WebhookID: hookA, Address: addr(1), Given: addr(1)},
		{WebhookID: hookA, Address: "0xnot-an-address", Given: "0xnot-an-address"},
	})
	require.NoError(t, err)
	require.True(t, u.Changed)
	require.Error(t, u.PublishErr, "the unencodable address is reported")
	require.Len(t, st.addrs, 2, "both rows written")
	require.NotZero(t, u.After.Version)
	for _, a := range st.addrs {
		require.Equal(t, u.After.Version, a.Version, "one version for the create")
	}
	require.ElementsMatch(t, []string{hookA, hookA + "/" + addr(1)}, pub.keys, "the other records produced")

	// A produce that fails is reported; the change stands.
	pub.err, pub.keys = errors.New("broker down"), nil
	u, err = w.UpdateAddresses(ctx, acct, hookA, func(cur accountdb.Webhook) ([]accountdb.Address, error) {
		return []accountdb.Address{{Address: addr(2), Given: addr(2), Version: cur.Version + 5}}, nil
	})
	require.NoError(t, err)
	require.ErrorContains(t, u.PublishErr, "broker down")
	require.Len(t, u.Addresses, 1)
	require.Equal(t, hookA, u.Addresses[0].WebhookID)
	require.Greater(t, u.Addresses[0].Version, wh.Version+5, "above the state it replaces")
	require.Equal(t, []string{hookA + "/" + addr(2)}, pub.keys)

	// Nothing to write: no steps, no produce.
	pub.err, pub.keys = nil, nil
	u, err = w.UpdateAddresses(ctx, acct, hookA, func(accountdb.Webhook) ([]accountdb.Address, error) { return nil, nil })
	require.NoError(t, err)
	require.False(t, u.Changed)
	require.Empty(t, pub.keys)

	// Another account's webhook is not found, and nothing is written.
	_, err = w.UpdateAddresses(ctx, "someone-else", hookA, func(accountdb.Webhook) ([]accountdb.Address, error) {
		t.Fatal("choose called for another account's webhook")
		return nil, nil
	})
	require.ErrorIs(t, err, accountdb.ErrNotFound)

	// A secret: above the account's and the previous secret's versions.
	st.accounts[acct] = accountdb.Account{ID: acct, Plan: "free", Version: 7}
	u, err = w.PutSecret(ctx, acct, "s1")
	require.NoError(t, err)
	require.NoError(t, u.PublishErr)
	require.Greater(t, u.Secret.Version, uint64(7))
	require.Equal(t, "s1", st.secrets[acct].Secret)
	_, err = w.PutSecret(ctx, "no-such-account", "s2")
	require.ErrorIs(t, err, accountdb.ErrNotFound)
}
