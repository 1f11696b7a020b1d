package follow

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/schemas/codec"
)

// producer sends a chain's records to Kafka strictly in order, one batch at
// a time: a batch is produced (ProduceSync) only once the previous one is
// fully acknowledged, and after a failure nothing more is sent.
//
// Why not fire-and-forget Produce with the idempotent producer's ordering:
// when a batch fails for good, franz-go fails the records buffered behind it,
// but a record handed over a moment later starts a fresh sequence and can
// land, leaving a gap that a restart would then skip over. Here what lands is
// always a prefix of what was queued, so the checkpoint read back from Kafka
// after a failure is exact. Batches take everything queued meanwhile, so the
// pipeline keeps fetching and converting while a batch is in flight.
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
// and returns the producer's error once it has failed.
func (p *producer) send(value []byte, onAck func()) error {
	rec := &kgo.Record{
		Topic:   p.f.cfg.Topic,
		Key:     p.f.key,
		Value:   value,
		Headers: []kgo.RecordHeader{{Key: codec.SchemaHeader, Value: []byte(codec.ChainEventSchema)}},
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
		res := p.f.deps.Kafka.ProduceSync(p.pctx, recs...)
		p.f.deps.Metrics.stage.WithLabelValues(p.f.chain, stageProduce).Observe(time.Since(start).Seconds())

		p.mu.Lock()
		p.bytes -= size
		p.mu.Unlock()
		p.f.deps.Metrics.bufferedBytes.WithLabelValues(p.f.chain).Sub(float64(size))
		signal(p.room)
		// Results are in record order; records of one partition fail
		// together from the first failure on, so the acknowledged ones are
		// a prefix.
		for i, r := range res {
			if r.Err != nil {
				p.fail(r.Err)
				return
			}
			batch[i].onAck()
		}
	}
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

// ProducerOpts are the Kafka client options for the followers' producer:
// kafkautil's (idempotent, lz4, sticky key partitioner) without linger. The
// producer sends synchronous batches of everything queued, so lingering
// would only add its delay to every batch.
func ProducerOpts(cfg kafkautil.Config, logger *slog.Logger, clientID string) []kgo.Opt {
	return append(cfg.ProducerOpts(logger, clientID), kgo.ProducerLinger(0))
}
