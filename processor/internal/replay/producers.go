package replay

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
)

// Producers are the transactional producers of the replays, one per
// blocks-topic partition this instance's matcher owns, with the
// transactional id <prefix><matcher group>-replay-<partition>: the same
// for whichever instance owns the partition, so the new owner's
// InitProducerID fences the old owner's producer (and aborts its open
// transaction) before the new owner matches a record of the partition.
// The matcher's own transactions are fenced by the group generation (their
// offsets); a replay's carry no offsets of the partition, so they need this,
// and the group fence of each transaction (doc.go, "Membership") for an
// instance that lost the partition without knowing it yet.
type Producers struct {
	kafka  kafkautil.Config
	base   string
	logger *slog.Logger
	// txTimeout is each producer's transaction timeout.
	txTimeout time.Duration

	mu    sync.Mutex
	owned map[int32]*producer
}

// producer is one partition's; mu serializes its transactions.
type producer struct {
	mu    sync.Mutex
	txnID string
	// cl is replaced by reset (under mu) and closed by Revoked (not under
	// mu: that is how a transaction in flight is made to fail).
	cl   atomic.Pointer[kgo.Client]
	opts []kgo.Opt
	log  *slog.Logger
	// revoked: the partition moved away. The transactional id is the new
	// owner's now; initializing it here again would fence the new owner's
	// replays (and leave a client nobody closes).
	revoked atomic.Bool
	// broken: a reset failed, the client is closed. Guarded by mu.
	broken bool
}

// ready makes the producer usable for a transaction: an error if the
// partition moved away, and a new client first if the last reset failed or
// the client's producer id failed for good. franz-go keeps an
// initialization error Kafka does not call retriable (INVALID_PRODUCER_EPOCH,
// when a broker that died mid-transaction left the client's epoch behind)
// and fails every later transaction of the client without asking Kafka
// again. Asking for the id costs nothing then, nor while it is loaded; an
// id due for reloading is loaded here rather than at the first produce.
// Called under pr.mu.
func (pr *producer) ready(ctx context.Context, p int32) error {
	if pr.revoked.Load() {
		return errNotOwner
	}
	if !pr.broken {
		_, _, err := pr.cl.Load().ProducerID(ctx)
		if err == nil || ctx.Err() != nil {
			return ctx.Err()
		}
		pr.log.Warn("replay producer failed; initializing a new one", "partition", p, "err", err)
	}
	return pr.reset(ctx, p)
}

// fence initializes a new client under the transactional id, which ends
// (commits or aborts) any transaction an earlier client left in doubt. Each
// try is a new client: one whose initialization got an error Kafka does not
// call retriable (INVALID_PRODUCER_EPOCH after a broker died mid-request,
// among others) keeps that error for good and never asks again.
func fence(ctx context.Context, opts []kgo.Opt, log *slog.Logger, what string, p int32) (*kgo.Client, error) {
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var cl *kgo.Client
	again := obs.Retry{Initial: 200 * time.Millisecond, Max: 5 * time.Second, Log: log, Msg: what + " failed, retrying",
		Attrs: []any{"partition", p}}
	err := again.Do(fctx, func() error {
		c, err := kgo.NewClient(opts...)
		if err != nil {
			return obs.Permanent(err)
		}
		ictx, cancel := context.WithTimeout(fctx, 10*time.Second)
		defer cancel()
		if _, _, err := c.ProducerID(ictx); err != nil {
			c.Close()
			return err
		}
		cl = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// reset replaces the client after a transaction whose end is unknown (an
// error from EndTransaction): the new client's initialization settles it
// before the caller lets anyone else number. A revoked producer is not
// reset: the new owner's initialization settles the transaction. A reset
// that failed (no broker answered for a minute) leaves the closed client
// in place and the producer due for another (ready), so that the
// partition's replays resume once Kafka does. Called under pr.mu.
func (pr *producer) reset(ctx context.Context, p int32) error {
	if pr.revoked.Load() {
		return errNotOwner
	}
	pr.cl.Load().Close()
	pr.broken = true
	cl, err := fence(context.WithoutCancel(ctx), pr.opts, pr.log, "re-initializing the replay producer", p)
	if err != nil {
		return err
	}
	pr.broken = false
	pr.cl.Store(cl)
	if pr.revoked.Load() {
		// Revoked while it was initialized: Revoked closed the old client.
		cl.Close()
		return errNotOwner
	}
	return nil
}

func NewProducers(kafka kafkautil.Config, matcherGroup string, txTimeout time.Duration, logger *slog.Logger) *Producers {
	return &Producers{kafka: kafka, base: kafka.TopicPrefix + matcherGroup + "-replay-", logger: logger, txTimeout: txTimeout,
		owned: map[int32]*producer{}}
}

// Assigned fences the partitions' replay producers (matcher.Partitions):
// it returns once each is initialized under this instance, retrying for
// up to a minute; a partition it could not fence runs no replay here.
func (ps *Producers) Assigned(ctx context.Context, parts []int32) {
	for _, p := range parts {
		txnID := ps.base + strconv.Itoa(int(p))
		opts := append(ps.kafka.ProducerOpts(ps.logger, "moraine-replay"),
			kgo.TransactionalID(txnID),
			kgo.TransactionTimeout(ps.txTimeout),
			kgo.ProducerLinger(0),
		)
		cl, err := fence(ctx, opts, ps.logger, "fencing the replay producer", p)
		if err != nil {
			ps.logger.Error("replay producer not fenced; no replay runs for the partition here", "partition", p, "err", err)
			continue
		}
		ps.mu.Lock()
		old := ps.owned[p]
		pr := &producer{txnID: txnID, opts: opts, log: ps.logger}
		pr.cl.Store(cl)
		ps.owned[p] = pr
		ps.mu.Unlock()
		if old != nil {
			old.close()
		}
	}
}

// Revoked closes the partitions' producers; a replay transaction in flight
// on one fails.
func (ps *Producers) Revoked(parts []int32) {
	ps.mu.Lock()
	var gone []*producer
	for _, p := range parts {
		if pr := ps.owned[p]; pr != nil {
			gone = append(gone, pr)
			delete(ps.owned, p)
		}
	}
	ps.mu.Unlock()
	for _, pr := range gone {
		// Not under pr.mu: a transaction in flight would hold it; closing
		// the client makes it fail instead.
		pr.revoked.Store(true)
		pr.cl.Load().Close()
	}
}

// of is the producer of partition p, if this instance owns it.
func (ps *Producers) of(p int32) (*producer, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	pr, ok := ps.owned[p]
	return pr, ok
}

// closeAll closes every producer (shutdown).
func (ps *Producers) closeAll() {
	ps.mu.Lock()
	all := ps.owned
	ps.owned = map[int32]*producer{}
	ps.mu.Unlock()
	for _, pr := range all {
		pr.close()
	}
}

func (pr *producer) close() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.cl.Load().Close()
}

// chainPartition is the blocks-topic partition of a chain: ingest keys
// block records by the decimal chain id with the default partitioner.
func chainPartition(topic string, chain uint64, n int) int32 {
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic(topic).Partition(
		&kgo.Record{Topic: topic, Key: []byte(strconv.FormatUint(chain, 10))}, n))
}

// errNotOwner: the instance no longer owns the chain's partition.
var errNotOwner = fmt.Errorf("replay: the chain's blocks partition moved to another instance")
