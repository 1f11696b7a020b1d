package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
)

// PublisherDeps are a Publisher's collaborators.
type PublisherDeps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Kafka      kafkautil.Config
	// Subsystem names the host service in the metric names
	// (moraine_<subsystem>_watch_records_produced_total).
	Subsystem string
	// ClientID is the Kafka client id.
	ClientID string
	// OnFail, when set, is told the version of every record not delivered
	// (the reconciler looks back far enough to publish them).
	OnFail func(version uint64)
}

// Publisher produces address-watch records synchronously. The query
// service's reconciler (query/internal/webhooks/reconcile) uses one; a service that only
// changes webhooks (delivery deactivating one) uses a Publisher alone and
// relies on the query service's reconciler for anything it fails to
// publish: its incremental pass compares every webhook and account row
// with the topic.
type Publisher struct {
	client  *kgo.Client
	timeout time.Duration
	metrics *publishMetrics
	onFail  func(version uint64)
}

// NewPublisher validates and allocates the producer; it does no I/O.
func NewPublisher(cfg Config, d PublisherDeps) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Logger == nil || d.Registerer == nil || d.Subsystem == "" {
		return nil, errors.New("watch: PublisherDeps.Logger, Registerer and Subsystem are required")
	}
	if err := d.Kafka.Validate(); err != nil {
		return nil, err
	}
	if d.ClientID == "" {
		d.ClientID = "moraine-" + d.Subsystem + "-watch"
	}
	cl, err := kgo.NewClient(ProducerOpts(d.Kafka, d.Logger.With("component", "watch"), d.ClientID, cfg)...)
	if err != nil {
		return nil, fmt.Errorf("watch: producer: %w", err)
	}
	return &Publisher{client: cl, timeout: cfg.ProduceTimeout, metrics: newPublishMetrics(d.Registerer, d.Subsystem), onFail: d.OnFail}, nil
}

// Close releases the producer.
func (p *Publisher) Close() { p.client.Close() }

// Publish produces recs and waits for the broker's acknowledgement (at most
// Config.ProduceTimeout). The caller holds the keys' Locks.
func (p *Publisher) Publish(ctx context.Context, recs []*kgo.Record) error {
	if len(recs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	start := time.Now()
	res := p.client.ProduceSync(ctx, recs...)
	p.metrics.produceDuration.Observe(time.Since(start).Seconds())
	var errs []error
	for _, r := range res {
		if r.Err != nil {
			errs = append(errs, r.Err)
			if p.onFail != nil {
				p.onFail(RecordVersion(r.Record))
			}
		}
	}
	p.metrics.produced.WithLabelValues("ok").Add(float64(len(recs) - len(errs)))
	if len(errs) > 0 {
		p.metrics.produced.WithLabelValues("error").Add(float64(len(errs)))
		return fmt.Errorf("watch: %d of %d records not delivered: %w", len(errs), len(recs), errors.Join(errs[:min(len(errs), 3)]...))
	}
	return nil
}
