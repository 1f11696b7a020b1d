// Package usage records every request the API answers on a /v1 route, for
// the request logs and usage metrics that account holders and operators
// read (getApiLogs, getApiUsageMetrics: package usageapi): who asked (key,
// account), what (route template and operationId from server.RouteOf,
// method, chain), how it went (status, duration, compute units charged),
// and from where (client address, user agent, host).
//
// # Off the request path
//
// The Recorder's middleware runs first in the shared middleware chain (so
// it sees every answer, 401s and 429s of access control included), and
// after the answer hands the record to a franz-go producer with TryProduce,
// which never blocks: no request waits on Kafka or ClickHouse. The records
// go to the API-requests topic (schemas/topics.APIRequests), which the
// processor's usage sink writes to ClickHouse; while ClickHouse (or the
// sink) is down they wait in Kafka, for the topic's retention (3 days).
//
// # When Kafka is down
//
// Records wait in the producer's buffer, retried until Kafka answers, and
// the buffer is bounded (--usage.buffer-records, --usage.buffer-bytes):
// once it is full, further records are dropped and counted
// (moraine_query_usage_records_total{result="buffer_full"}; the alert
// MoraineUsageRecordsDropped). Requests are answered as usual. So an outage
// of Kafka loses the records beyond the buffer, never a request; at 500
// requests a second the default buffer (100,000 records, about 25 MB) holds
// about three minutes. Records still buffered at shutdown get
// --shutdown.timeout to go out; the rest count as result="shutdown".
//
// Every answer carries the record's id in x-request-id (getApiLogs'
// logId), so a client can name a request to its operator.
//
// # Metrics
//
//	moraine_query_usage_records_total{result}          produced, buffer_full (dropped: the buffer is full), kafka_error (dropped: Kafka refused it), shutdown (dropped: still buffered at shutdown)
//	moraine_query_usage_buffered_records               records waiting in the producer's buffer
//	moraine_query_usage_compute_units_total{route}     compute units charged, by route template
package usage

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/query/internal/access/auth"
	"github.com/moraine-data/moraine/query/internal/access/ratelimit"
	"github.com/moraine-data/moraine/query/internal/server"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Config is the recorder's settings (the --usage.* flags of query).
type Config struct {
	// Enabled records requests; off, nothing is recorded and the usage
	// routes answer from what was recorded before.
	Enabled bool
	// BufferRecords and BufferBytes bound the records waiting for Kafka.
	BufferRecords int
	BufferBytes   int
	// Region is this instance's hostRegion in the request logs.
	Region string
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	return Config{Enabled: true, BufferRecords: 100_000, BufferBytes: 64 << 20}
}

// RegisterFlags adds the --usage.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.BoolVar(&c.Enabled, "usage.enabled", d.Enabled, "record every /v1 request (key, account, route, chain, status, duration, compute units, client) to the API-requests topic, for request logs and usage metrics")
	fs.IntVar(&c.BufferRecords, "usage.buffer-records", d.BufferRecords, "most request records waiting for Kafka; beyond it (Kafka down) new records are dropped and counted, requests are answered as usual")
	fs.IntVar(&c.BufferBytes, "usage.buffer-bytes", d.BufferBytes, "most bytes of request records waiting for Kafka (as --usage.buffer-records)")
	fs.StringVar(&c.Region, "usage.region", d.Region, "this instance's region or site, shown as hostRegion in request logs")
}

// Validate checks the values.
func (c Config) Validate() error {
	if c.BufferRecords < 1 || c.BufferBytes < 1<<20 {
		return errors.New("usage: --usage.buffer-records must be positive and --usage.buffer-bytes at least 1048576")
	}
	return nil
}

// Deps are the recorder's collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Kafka      kafkautil.Config
	// ChainID turns the chainId path parameter into the decimal EVM chain
	// id of a configured chain ("" when it names none).
	ChainID func(param string) string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Recorder records requests to the API-requests topic.
type Recorder struct {
	cfg    Config
	logger *slog.Logger
	cl     *kgo.Client
	topic  string
	chain  func(string) string
	now    func() time.Time

	records *prometheus.CounterVec
	units   *prometheus.CounterVec
}

// New builds the producer; it does no network I/O (franz-go connects on
// the first record).
func New(cfg Config, d Deps) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Logger == nil || d.Registerer == nil || d.ChainID == nil {
		return nil, errors.New("usage: Deps.Logger, Registerer and ChainID are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	opts := append(d.Kafka.ProducerOpts(d.Logger, "moraine-query-usage"),
		// Bounded memory while Kafka is away (see the package doc).
		kgo.MaxBufferedRecords(cfg.BufferRecords),
		kgo.MaxBufferedBytes(cfg.BufferBytes),
		// Records are small and nobody waits for them: batch more.
		kgo.ProducerLinger(500*time.Millisecond),
		// The topic may be created by another service a moment after the
		// first record: wait for it rather than fail the records.
		kgo.UnknownTopicRetries(-1),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	f := obs.NewMetrics(d.Registerer, "query")
	r := &Recorder{cfg: cfg, logger: d.Logger, cl: cl, topic: d.Kafka.Topic(topics.APIRequests), chain: d.ChainID, now: d.Now,
		records: f.CounterVec("usage_records_total",
			"Request records by result: produced, or dropped because the buffer was full (buffer_full), Kafka refused them (kafka_error) or they were still buffered at shutdown (shutdown).",
			"result"),
		units: f.CounterVec("usage_compute_units_total", "Compute units charged, by route template.", "route"),
	}
	f.GaugeFunc("usage_buffered_records", "Request records waiting in the producer's buffer for Kafka.",
		func() float64 { return float64(cl.BufferedProduceRecords()) })
	for _, res := range []string{"produced", "buffer_full", "kafka_error", "shutdown"} {
		r.records.WithLabelValues(res)
	}
	return r, nil
}

// Expect creates the compute-unit series of every /v1 route of the table,
// and of unmatched requests, at zero: a counter that appears only on its
// first increment is invisible to rate() at that increment.
func (r *Recorder) Expect(routes []server.Route) {
	r.units.WithLabelValues("unmatched")
	for _, rt := range routes {
		if strings.HasPrefix(rt.Path, "/v1/") {
			r.units.WithLabelValues(rt.Template())
		}
	}
}

// Ping reports whether a Kafka broker answers (the health check's).
func (r *Recorder) Ping(ctx context.Context) error {
	if err := r.cl.Ping(ctx); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	return nil
}

// Close sends what is buffered, waiting at most until ctx ends, and closes
// the producer; records it could not send count as dropped (shutdown).
func (r *Recorder) Close(ctx context.Context) {
	if err := r.cl.Flush(ctx); err != nil {
		r.logger.Warn("request records still buffered at shutdown are dropped", "records", r.cl.BufferedProduceRecords(), "err", err)
	}
	r.cl.Close()
}

// RequestIDHeader carries the request's id (getApiLogs' logId).
const RequestIDHeader = "x-request-id"

// maxHeaderText bounds the user agent and host kept per request.
const maxHeaderText = 512

// Middleware records every request under /v1 (unknown routes too, as
// "unmatched") once it is answered. It must run before access control, so
// that refused requests are recorded with what they were charged.
func (r *Recorder) Middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		if !strings.HasPrefix(c.Request.URL.Path, "/v1/") {
			c.Next()
			return
		}
		start := r.now()
		id := uuid.New()
		c.Header(RequestIDHeader, id.String())
		c.Next()
		r.record(c, id, start)
	}
}

func (r *Recorder) record(c *gin.Context, id uuid.UUID, start time.Time) {
	rt := server.RouteOf(c)
	route := "unmatched"
	if rt.Path != "" {
		route = rt.Template()
	}
	rec := &record.ApiRequest{
		Id: id[:], At: uint64(start.UnixMilli()), Route: route, Operation: rt.Operation, Method: c.Request.Method,
		Status: uint32(c.Writer.Status()), DurationMicros: uint64(r.now().Sub(start).Microseconds()),
		ComputeUnits: uint32(ratelimit.Charged(c)), ClientIp: c.ClientIP(),
		UserAgent: cut(c.Request.UserAgent()), Host: cut(c.Request.Host), Region: r.cfg.Region,
	}
	if p := auth.From(c).Principal; p != nil {
		rec.AccountId, rec.KeyId, rec.KeyAlias = p.Account.ID, p.KeyID, p.KeyPrefix
	}
	if ch := c.Param("chainId"); ch != "" {
		rec.ChainId = r.chain(ch)
	}
	if rec.ComputeUnits > 0 {
		r.units.WithLabelValues(route).Add(float64(rec.ComputeUnits))
	}
	value, err := codec.EncodeAPIRequest(rec)
	if err != nil {
		r.records.WithLabelValues("kafka_error").Inc()
		return
	}
	r.cl.TryProduce(context.Background(), &kgo.Record{
		Topic: r.topic, Value: value,
		Headers: []kgo.RecordHeader{{Key: codec.SchemaHeader, Value: []byte(codec.APIRequestSchema)}},
	}, r.produced)
}

// produced counts a record's fate.
func (r *Recorder) produced(_ *kgo.Record, err error) {
	switch {
	case err == nil:
		r.records.WithLabelValues("produced").Inc()
	case errors.Is(err, kgo.ErrMaxBuffered):
		r.records.WithLabelValues("buffer_full").Inc()
	case errors.Is(err, kgo.ErrClientClosed), errors.Is(err, context.Canceled):
		r.records.WithLabelValues("shutdown").Inc()
	default:
		r.records.WithLabelValues("kafka_error").Inc()
	}
}

func cut(s string) string {
	if len(s) > maxHeaderText {
		return s[:maxHeaderText]
	}
	return s
}
