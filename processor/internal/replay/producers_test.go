package replay

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/moraine-data/moraine/pkg/kafkautil"
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

// TestProducerFailedForGoodIsReplaced: a broker that refuses the
// re-initialization of a producer id after a failed produce
// (INVALID_PRODUCER_EPOCH, as a broker that died mid-transaction can leave
// it) makes franz-go fail the client's producer id for good: every later
// transaction of that client fails without asking Kafka. The partition's
// next replay transaction runs on a new client instead of failing every
// chunk until the partition moves (in-process broker: the real one cannot
// be made to answer so on cue).
func TestProducerFailedForGoodIsReplaced(t *testing.T) {
	const topic = "replay"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	c.ControlKey(kmsg.InitProducerID.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.InitProducerIDRequest)
		if req.ProducerID < 0 {
			return nil, nil, false // a new client: answered as usual
		}
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.Version = req.Version
		resp.ErrorCode = kerr.InvalidProducerEpoch.Code
		return resp, nil, true
	})
	ps := NewProducers(kafkautil.Config{Brokers: strings.Join(c.ListenAddrs(), ",")}, "replay-test", time.Minute, testenv.Logger(t))
	ps.Assigned(t.Context(), []int32{0})
	t.Cleanup(ps.closeAll)
	pr, ok := ps.of(0)
	require.True(t, ok)
	// transaction is a replay chunk's transaction, as commit runs it.
	transaction := func() error {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		if err := pr.ready(t.Context(), 0); err != nil {
			return err
		}
		cl := pr.cl.Load()
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		promise := kgo.AbortingFirstErrPromise(cl)
		cl.Produce(t.Context(), &kgo.Record{Topic: topic, Value: []byte("chunk")}, promise.Promise())
		if err := promise.Err(); err != nil {
			_ = cl.EndTransaction(t.Context(), kgo.TryAbort)
			return err
		}
		return cl.EndTransaction(t.Context(), kgo.TryCommit)
	}
	require.NoError(t, transaction())

	// One produce refused as from a producer the broker forgot: the client
	// asks for its producer id again, with its id and epoch, and is refused.
	c.ControlKey(kmsg.Produce.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		req := r.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		resp.Version = req.Version
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.UnknownProducerID.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	require.Error(t, transaction())
	failed := pr.cl.Load()
	require.ErrorIs(t, failed.BeginTransaction(), kerr.InvalidProducerEpoch, "the client is failed for good")

	require.NoError(t, transaction(), "the next transaction runs on a new client")
	require.NotSame(t, failed, pr.cl.Load())
	require.NoError(t, transaction())
}
