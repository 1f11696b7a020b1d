package replay

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRevokedProducerIsNotReset: a replay transaction whose end failed
// because its partition moved away (Revoked closed its client) is not
// settled by initializing the transactional id again here, which would
// fence the new owner's replays: reset says the instance is not the owner,
// without asking Kafka (the broker below does not exist).
func TestRevokedProducerIsNotReset(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	require.NoError(t, err)
	pr := &producer{}
	pr.cl.Store(cl)
	ps := &Producers{owned: map[int32]*producer{3: pr}}
	ps.Revoked([]int32{3})
	_, owned := ps.of(3)
	require.False(t, owned)
	require.ErrorIs(t, pr.reset(t.Context(), 3), errNotOwner)
	require.Same(t, cl, pr.cl.Load(), "no new client")
}
