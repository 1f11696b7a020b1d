package kafkautil

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/moraine-data/moraine/pkg/obs"
)

// Client and consumer-group metrics.
//
// With Config.Metrics set, every client built from BaseOpts reports
// franz-go's own client metrics (package kprom) on it, namespace
// moraine_kafka, with the label client = the client id given to BaseOpts
// (this list is checked against what kprom registers, and deploy's
// dashboard checks against it):
//
//	moraine_kafka_connects_total{client,node_id}
//	moraine_kafka_connect_errors_total{client,node_id}
//	moraine_kafka_disconnects_total{client,node_id}
//	moraine_kafka_write_bytes_total{client,node_id}
//	moraine_kafka_write_errors_total{client,node_id}
//	moraine_kafka_read_bytes_total{client,node_id}
//	moraine_kafka_read_errors_total{client,node_id}
//	moraine_kafka_produce_compressed_bytes_total{client,node_id,topic}
//	moraine_kafka_produce_uncompressed_bytes_total{client,node_id,topic}
//	moraine_kafka_produce_batches_total{client,node_id,topic}
//	moraine_kafka_produce_records_total{client,node_id,topic}
//	moraine_kafka_fetch_compressed_bytes_total{client,node_id,topic}
//	moraine_kafka_fetch_uncompressed_bytes_total{client,node_id,topic}
//	moraine_kafka_fetch_batches_total{client,node_id,topic}
//	moraine_kafka_fetch_records_total{client,node_id,topic}
//	moraine_kafka_buffered_produce_records_total{client}  (a gauge, despite the name)
//	moraine_kafka_buffered_produce_bytes{client}
//	moraine_kafka_buffered_fetch_records_total{client}    (a gauge)
//	moraine_kafka_buffered_fetch_bytes{client}
//
// ExportLag adds the committed lag of consumer groups, from kadm:
//
//	moraine_kafka_consumer_lag_records{group,topic,partition}

// metricsNamespace prefixes kprom's series.
const metricsNamespace = obs.Namespace + "_kafka"

// clientMetrics are the kprom series of the clients of one id on one
// registry. Clients built from the same options (ingest reads its
// checkpoint with several short-lived clients), or with the same id, share
// them: kprom registers its collectors when a client starts and removes them
// when it closes, so one kprom instance per client would collide. The
// instance lives while any of its clients is open; it reports the first one's
// buffered-record gauges.
type clientMetrics struct {
	reg  prometheus.Registerer
	name string

	mu   sync.RWMutex
	refs int
	m    *kprom.Metrics
	// errs are kprom's error counters (connect, read, write), kept to
	// create each broker's series at zero when the client first meets the
	// broker: kprom creates them on the first error, and rate() over a
	// counter that appears with its first increment misses that error.
	errs []*prometheus.CounterVec
}

// errorCounters sits between kprom and the registry and keeps the error
// counters kprom registers.
type errorCounters struct {
	prometheus.Registerer
	c *clientMetrics
}

func (r errorCounters) Register(col prometheus.Collector) error {
	if vec, ok := col.(*prometheus.CounterVec); ok {
		ch := make(chan *prometheus.Desc, 1)
		vec.Describe(ch)
		if d := (<-ch).String(); strings.Contains(d, "_errors_total\"") {
			r.c.errs = append(r.c.errs, vec)
		}
	}
	return r.Registerer.Register(col)
}

func (r errorCounters) MustRegister(cs ...prometheus.Collector) {
	for _, col := range cs {
		if err := r.Register(col); err != nil {
			panic(err)
		}
	}
}

var (
	sharedMetricsMu sync.Mutex
	sharedMetrics   = map[prometheus.Registerer]map[string]*clientMetrics{}
)

// ClientMetrics is the hook that reports the kprom series of clients named
// name on reg (see the list above).
func ClientMetrics(reg prometheus.Registerer, name string) kgo.Opt {
	sharedMetricsMu.Lock()
	defer sharedMetricsMu.Unlock()
	byName := sharedMetrics[reg]
	if byName == nil {
		byName = map[string]*clientMetrics{}
		sharedMetrics[reg] = byName
	}
	cm := byName[name]
	if cm == nil {
		cm = &clientMetrics{reg: reg, name: name}
		byName[name] = cm
	}
	return kgo.WithHooks(cm)
}

func (c *clientMetrics) current() *kprom.Metrics {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m
}

// OnNewClient and OnClientClosed count the clients, creating (and
// registering) kprom's series for the first and removing them after the
// last.
func (c *clientMetrics) OnNewClient(cl *kgo.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs++
	if c.refs == 1 {
		c.errs = nil
		c.m = kprom.NewMetrics(metricsNamespace,
			kprom.Registerer(errorCounters{prometheus.WrapRegistererWith(prometheus.Labels{"client": c.name}, c.reg), c}),
			kprom.FetchAndProduceDetail(kprom.ByNode, kprom.ByTopic, kprom.Batches, kprom.Records,
				kprom.CompressedBytes, kprom.UncompressedBytes, kprom.ConsistentNaming))
		c.m.OnNewClient(cl)
	}
}

func (c *clientMetrics) OnClientClosed(cl *kgo.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs--
	if c.refs == 0 && c.m != nil {
		c.m.OnClientClosed(cl)
		c.m = nil
	}
}

// The other hooks forward to kprom.

func (c *clientMetrics) OnBrokerConnect(meta kgo.BrokerMetadata, d time.Duration, conn net.Conn, err error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.m == nil {
		return
	}
	for _, vec := range c.errs {
		vec.WithLabelValues(kgo.NodeName(meta.NodeID)) // the series at zero (errorCounters)
	}
	c.m.OnBrokerConnect(meta, d, conn, err)
}

func (c *clientMetrics) OnBrokerDisconnect(meta kgo.BrokerMetadata, conn net.Conn) {
	if m := c.current(); m != nil {
		m.OnBrokerDisconnect(meta, conn)
	}
}

func (c *clientMetrics) OnBrokerThrottle(meta kgo.BrokerMetadata, interval time.Duration, after bool) {
	if m := c.current(); m != nil {
		m.OnBrokerThrottle(meta, interval, after)
	}
}

func (c *clientMetrics) OnProduceBatchWritten(meta kgo.BrokerMetadata, topic string, p int32, bm kgo.ProduceBatchMetrics) {
	if m := c.current(); m != nil {
		m.OnProduceBatchWritten(meta, topic, p, bm)
	}
}

func (c *clientMetrics) OnFetchBatchRead(meta kgo.BrokerMetadata, topic string, p int32, fm kgo.FetchBatchMetrics) {
	if m := c.current(); m != nil {
		m.OnFetchBatchRead(meta, topic, p, fm)
	}
}

func (c *clientMetrics) OnBrokerRead(meta kgo.BrokerMetadata, key int16, n int, wait, read time.Duration, err error) {
	if m := c.current(); m != nil {
		m.OnBrokerRead(meta, key, n, wait, read, err)
	}
}

func (c *clientMetrics) OnBrokerWrite(meta kgo.BrokerMetadata, key int16, n int, wait, write time.Duration, err error) {
	if m := c.current(); m != nil {
		m.OnBrokerWrite(meta, key, n, wait, write, err)
	}
}

func (c *clientMetrics) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if m := c.current(); m != nil {
		m.OnBrokerE2E(meta, key, e2e)
	}
}

var (
	_ kgo.HookNewClient           = (*clientMetrics)(nil)
	_ kgo.HookClientClosed        = (*clientMetrics)(nil)
	_ kgo.HookBrokerConnect       = (*clientMetrics)(nil)
	_ kgo.HookBrokerDisconnect    = (*clientMetrics)(nil)
	_ kgo.HookBrokerThrottle      = (*clientMetrics)(nil)
	_ kgo.HookProduceBatchWritten = (*clientMetrics)(nil)
	_ kgo.HookFetchBatchRead      = (*clientMetrics)(nil)
	_ kgo.HookBrokerRead          = (*clientMetrics)(nil)
	_ kgo.HookBrokerWrite         = (*clientMetrics)(nil)
	_ kgo.HookBrokerE2E           = (*clientMetrics)(nil)
)

// LagInterval is how often ExportLag asks the brokers.
const LagInterval = 10 * time.Second

// ExportLag keeps moraine_kafka_consumer_lag_records{group,topic,partition}
// on reg: each group's committed lag per partition, as kadm computes it
// (end offset minus committed offset; a transactional topic's end counts its
// commit markers, so a caught-up reader of one shows a lag of about one per
// partition). It asks every interval until ctx ends; a failed ask keeps the
// last values and is logged once per change of error. Several instances of a
// service export the same group's lag: aggregate with max by (group, topic,
// partition).
func ExportLag(ctx context.Context, adm *kadm.Client, reg prometheus.Registerer, logger *slog.Logger, interval time.Duration, groups ...string) {
	lag := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: obs.Namespace, Subsystem: "kafka", Name: "consumer_lag_records",
		Help: "Records between a consumer group's committed offset and the end of each partition it consumes."},
		[]string{"group", "topic", "partition"})
	if err := reg.Register(lag); err != nil {
		// Another component of the process exports lag already: share it.
		are, ok := err.(prometheus.AlreadyRegisteredError)
		if !ok {
			logger.Warn("consumer lag metric not registered", "err", err)
			return
		}
		lag = are.ExistingCollector.(*prometheus.GaugeVec)
	}
	seen := map[[3]string]bool{}
	lastErr := ""
	for {
		qctx, cancel := context.WithTimeout(ctx, interval)
		lags, err := adm.Lag(qctx, groups...)
		cancel()
		if err == nil {
			// A group that has committed nothing yet does not exist for the
			// broker: it has no lag to report until it does, and it must not
			// hide the lag of the other groups.
			lags.EachError(func(l kadm.DescribedGroupLag) {
				if err == nil && !errors.Is(l.Error(), kerr.GroupIDNotFound) {
					err = l.Error()
				}
			})
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if err.Error() != lastErr {
				logger.Warn("reading consumer lag failed; keeping the last values", "groups", groups, "err", err)
				lastErr = err.Error()
			}
		} else {
			lastErr = ""
			now := map[[3]string]bool{}
			for _, g := range lags {
				if g.Error() != nil {
					continue
				}
				for _, pl := range g.Lag.Sorted() {
					if pl.Err != nil || pl.Lag < 0 {
						continue
					}
					k := [3]string{g.Group, pl.Topic, strconv.Itoa(int(pl.Partition))}
					lag.WithLabelValues(k[:]...).Set(float64(pl.Lag))
					now[k] = true
				}
			}
			// Partitions no longer consumed (a topic removed from a group).
			for k := range seen {
				if !now[k] {
					lag.DeleteLabelValues(k[:]...)
				}
			}
			seen = now
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}
