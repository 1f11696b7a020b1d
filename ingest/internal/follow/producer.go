package follow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/ingest/internal/lease"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/schemas/codec"
)

// producer sends a chain's records to Kafka strictly in order, one batch at
// a time, each batch one Kafka transaction: a batch is produced only once
// the previous one is committed, and after a failure nothing more is sent.
//
// Why not fire-and-forget Produce with the idempotent producer's ordering:
// when a batch fails for good, franz-go fails the records buffered behind it,
// but a record handed over a moment later starts a fresh sequence and can
// land, leaving a gap that a restart would then skip over. Here what
// consumers can see (they read committed records only) is always a prefix
// of what was queued, whole batches, so the checkpoint read back from Kafka
// after a failure is exact. Batches take everything queued meanwhile, so the
// pipeline keeps fetching and converting while a batch is in flight.
//
// The transactions are what fence a former writer of the chain (package
// lease): once another instance registered the chain's transactional id,
// this producer's next commit fails with a fencing error, and its open
// transaction has already been aborted.
type producer struct {
	f    *Follower
	pctx context.Context

	mu       sync.Mutex
	queue    []queued
	bytes    int
	err      error
	stopping bool

	wake   chan struct{} // a record was queued, or stop
	room   chan struct{} // the queue shrank
	failed chan struct{} // closed on the first failure
	done   chan struct{} // closed when the loop exits
}

type queued struct {
	rec   *kgo.Record
	onAck func()
}

const (
	// maxQueuedBytes holds back the sequencer when Kafka is slower than
	// the node: memory stays bounded.
	maxQueuedBytes = 64 << 20
	// maxBatchBytes and maxBatchRecords bound one ProduceSync.
	maxBatchBytes   = 32 << 20
	maxBatchRecords = 1000
)

func newProducer(f *Follower, pctx context.Context) *producer {
	p := &producer{f: f, pctx: pctx,
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1),
		failed: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return p
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// send queues one event for the chain. It blocks while the queue is full
// and returns the producer's error once it has failed. A non-zero seen is
// the record's timestamp (the block's arrival at ingest, see doc.go);
// otherwise the client stamps the record when it is produced.
func (p *producer) send(value []byte, seen time.Time, onAck func()) error {
	rec := &kgo.Record{
		Topic:     p.f.cfg.Topic,
		Key:       p.f.key,
		Value:     value,
		Headers:   []kgo.RecordHeader{{Key: codec.SchemaHeader, Value: []byte(codec.ChainEventSchema)}},
		Timestamp: seen,
	}
	p.mu.Lock()
	for p.err == nil && p.bytes > maxQueuedBytes {
		p.mu.Unlock()
		select {
		case <-p.room:
		case <-p.failed:
		case <-p.pctx.Done():
			return p.pctx.Err()
		}
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	p.queue = append(p.queue, queued{rec: rec, onAck: onAck})
	p.bytes += len(value)
	p.f.deps.Metrics.bufferedBytes.WithLabelValues(p.f.chain).Add(float64(len(value)))
	signal(p.wake)
	return nil
}

// close stops the loop once the queue is produced; wait for done.
func (p *producer) close() {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	signal(p.wake)
}

// wait waits for the loop to finish what was queued, or ctx.
func (p *producer) wait(ctx context.Context) error {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *producer) loop() {
	defer close(p.done)
	for {
		p.mu.Lock()
		if len(p.queue) == 0 {
			stop := p.stopping
			p.mu.Unlock()
			if stop {
				return
			}
			select {
			case <-p.wake:
			case <-p.pctx.Done():
				p.fail(p.pctx.Err())
				return
			}
			continue
		}
		n, size := 0, 0
		for n < len(p.queue) && n < maxBatchRecords && (n == 0 || size+len(p.queue[n].rec.Value) <= maxBatchBytes) {
			size += len(p.queue[n].rec.Value)
			n++
		}
		batch := p.queue[:n:n]
		p.queue = p.queue[n:]
		p.mu.Unlock()

		recs := make([]*kgo.Record, len(batch))
		for i, q := range batch {
			recs[i] = q.rec
		}
		start := time.Now()
		err := p.commit(recs)
		p.f.deps.Metrics.stage.WithLabelValues(p.f.chain, stageProduce).Observe(time.Since(start).Seconds())

		p.mu.Lock()
		p.bytes -= size
		p.mu.Unlock()
		p.f.deps.Metrics.bufferedBytes.WithLabelValues(p.f.chain).Sub(float64(size))
		signal(p.room)
		if err != nil {
			p.fail(err)
			return
		}
		for _, q := range batch {
			q.onAck()
		}
	}
}

// commit produces recs in one transaction and commits it. On any failure
// the transaction is aborted (a commit that failed ambiguously may still
// have landed: the checkpoint read after the failure tells).
func (p *producer) commit(recs []*kgo.Record) error {
	cl := p.f.deps.Kafka
	if err := cl.BeginTransaction(); err != nil {
		return classifyProduceError(err)
	}
	err := cl.ProduceSync(p.pctx, recs...).FirstErr()
	if err == nil {
		err = cl.EndTransaction(p.pctx, kgo.TryCommit)
		if err == nil {
			return nil
		}
	}
	// Drop what is buffered and end the transaction, so that the client
	// can begin a new one when the follower resumes from its checkpoint.
	actx, cancel := context.WithTimeout(context.WithoutCancel(p.pctx), 10*time.Second)
	defer cancel()
	if aerr := cl.AbortBufferedRecords(actx); aerr == nil {
		_ = cl.EndTransaction(actx, kgo.TryAbort)
	}
	return classifyProduceError(err)
}

// classifyProduceError marks the errors that mean another instance took
// the chain over.
func classifyProduceError(err error) error {
	if isFenced(err) {
		return fmt.Errorf("%w: %w", lease.ErrFenced, err)
	}
	return err
}

// isFenced reports whether err says this producer's transactional id was
// taken over by a newer producer.
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}

// fail records the first error and drops what is queued: it must not be
// sent after a failure.
func (p *producer) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return
	}
	if err == nil {
		err = errors.New("producer stopped")
	}
	p.err = err
	for _, q := range p.queue {
		p.f.deps.Metrics.bufferedBytes.WithLabelValues(p.f.chain).Sub(float64(len(q.rec.Value)))
	}
	p.queue, p.bytes = nil, 0
	close(p.failed)
}

// ProducerOpts are the Kafka client options for a chain's producer:
// kafkautil's (idempotent, acks=all, lz4, sticky key partitioner) without
// linger, and transactional with the chain's own id (TransactionalID). The
// producer sends synchronous batches of everything queued, so lingering
// would only add its delay to every batch.
func ProducerOpts(cfg kafkautil.Config, logger *slog.Logger, clientID, chain string) []kgo.Opt {
	return append(cfg.ProducerOpts(logger, clientID),
		kgo.ProducerLinger(0),
		kgo.TransactionalID(TransactionalID(cfg, chain)),
		// A transaction holds back every consumer of its partition until it
		// ends, and spans one batch (a few seconds at worst): a writer that
		// hangs is aborted by the broker after this long.
		kgo.TransactionTimeout(20*time.Second),
	)
}

// TransactionalID is the chain's transactional id: the identity that
// fences a former writer of the chain (package lease).
func TransactionalID(cfg kafkautil.Config, chain string) string {
	return cfg.TopicPrefix + "moraine-ingest." + chain
}
