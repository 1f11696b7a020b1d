package replay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/testenv"
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

// TestBrokenProducerIsResetBeforeItsNextTransaction: a producer whose reset
// failed (its client closed, Kafka unreachable for a minute) is initialized
// again before the partition's next replay transaction, instead of failing
// every transaction until the partition moves (the real broker).
func TestBrokenProducerIsResetBeforeItsNextTransaction(t *testing.T) {
	kcfg := testenv.Kafka(t)
	ps := NewProducers(kcfg, "replay-test-"+testenv.Suffix(), time.Minute, testenv.Logger(t))
	ps.Assigned(t.Context(), []int32{0})
	t.Cleanup(ps.closeAll)
	pr, ok := ps.of(0)
	require.True(t, ok)
	broken := pr.cl.Load()
	broken.Close()
	pr.broken = true

	require.NoError(t, pr.ready(t.Context(), 0))
	require.False(t, pr.broken)
	cl := pr.cl.Load()
	require.NotSame(t, broken, cl, "a new client")
	require.NoError(t, cl.BeginTransaction())
	require.NoError(t, cl.EndTransaction(t.Context(), kgo.TryAbort))

	ps.Revoked([]int32{0})
	require.ErrorIs(t, pr.ready(t.Context(), 0), errNotOwner)
}
