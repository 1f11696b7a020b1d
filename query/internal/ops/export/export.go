package export

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/query/internal/access/auth"
	"github.com/moraine-data/moraine/query/internal/access/plan"
	"github.com/moraine-data/moraine/query/internal/server"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
	"github.com/moraine-data/moraine/query/internal/server/openapi"
	"github.com/moraine-data/moraine/query/internal/server/pagetoken"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Config is the export jobs' settings (the --export.* flags).
type Config struct {
	// Workers is how many jobs this instance runs at once (0: none; other
	// instances run them).
	Workers int
	// Group is the workers' consumer group (not a flag).
	Group       string
	Retention   time.Duration
	PublicURL   string
	MaxDays     int
	MaxAddress  int
	MaxAttempts int
	// RetryPause is the first wait before a failed attempt is tried again
	// (it doubles, up to a minute; not a flag).
	RetryPause time.Duration
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	return Config{Workers: 1, Group: "moraine-query-export", Retention: 7 * 24 * time.Hour, MaxDays: 366, MaxAddress: 100, MaxAttempts: 3,
		RetryPause: 5 * time.Second}
}

// RegisterFlags adds the --export.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	*c = d
	fs.IntVar(&c.Workers, "export.workers", d.Workers, "transaction export jobs this instance runs at once (0: none here; any instance's workers take the jobs any instance accepted)")
	fs.DurationVar(&c.Retention, "export.retention", d.Retention, "how long an export job and its file are kept after the day it was created (whole days are dropped)")
	fs.StringVar(&c.PublicURL, "export.public-url", d.PublicURL, "base URL of export download links, e.g. https://api.example.com (empty: the scheme and Host of the request that asks for the job's status)")
	fs.IntVar(&c.MaxDays, "export.max-days", d.MaxDays, "longest date range of one export job, in days")
	fs.IntVar(&c.MaxAddress, "export.max-addresses", d.MaxAddress, "most addresses of one export job")
	fs.IntVar(&c.MaxAttempts, "export.max-attempts", d.MaxAttempts, "attempts of an export job whose workers died or failed before it fails for good")
}

// Validate checks the values.
func (c Config) Validate() error {
	var errs []error
	if c.Workers < 0 || c.MaxDays < 1 || c.MaxAddress < 1 || c.MaxAttempts < 1 {
		errs = append(errs, errors.New("export: --export.workers must not be negative; --export.max-days, --export.max-addresses and --export.max-attempts must be positive"))
	}
	if c.Retention < 24*time.Hour {
		errs = append(errs, errors.New("export: --export.retention must be at least a day"))
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, errors.New("export: --export.public-url must be an absolute http or https URL"))
		}
	}
	return errors.Join(errs...)
}

// Deps are the jobs' collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Kafka      kafkautil.Config
	// Conn is ClickHouse, set once it answers; Timeout bounds each
	// statement (the service's --query.timeout).
	Conn    *chclient.Lazy
	Timeout time.Duration
	History History
	Chains  *chains.Config
	Plans   *plan.Set
	// LinkKey signs download links (the service's shared page-token key).
	LinkKey []byte
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Export serves the operations routes and runs the workers.
type Export struct {
	cfg    Config
	d      Deps
	db     *db
	links  *pagetoken.Envelope
	clock  *accountdb.Clock
	m      *metrics
	prod   *kgo.Client
	topic  string
	logger *slog.Logger
}

// linkTTL is how long a download link stays valid.
const linkTTL = 24 * time.Hour

// New validates and builds the producer; no network I/O.
func New(cfg Config, d Deps) (*Export, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Logger == nil || d.Registerer == nil || d.Conn == nil || d.History == nil || d.Chains == nil || d.Plans == nil || d.Timeout <= 0 {
		return nil, errors.New("export: Deps.Logger, Registerer, Conn, History, Chains, Plans and a positive Timeout are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	links, err := pagetoken.NewEnvelope(d.LinkKey, "moraine-export-link", linkTTL, d.Now)
	if err != nil {
		return nil, err
	}
	prod, err := kgo.NewClient(append(d.Kafka.ProducerOpts(d.Logger, "moraine-query-export"), kgo.UnknownTopicRetries(-1))...)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	return &Export{cfg: cfg, d: d, db: &db{conn: d.Conn, timeout: d.Timeout}, links: links, clock: accountdb.NewClock(nil),
		m: newMetrics(d.Registerer), prod: prod, topic: d.Kafka.Topic(topics.Operations), logger: d.Logger}, nil
}

// getOperationFile documents the download route, a moraine extension.
var getOperationFile = &openapi.Extension{Like: "getOperationResult", Operation: `{
  "summary": "Download an export's file",
  "description": "The CSV file of a completed transaction export: the downloadUrl of getOperationResult, signed so that it works without an API key for 24 hours.",
  "parameters": [
    {"name": "operationId", "required": true, "in": "path", "description": "UUID of the operation", "schema": {"type": "string"}},
    {"name": "token", "required": true, "in": "query", "description": "The signature of the download link", "schema": {"type": "string"}}
  ],
  "responses": {"200": {"description": "The CSV file", "content": {"text/csv": {"schema": {"type": "string"}}}}}
}`}

// Routes are the operations routes of the table.
func (e *Export) Routes() []server.Route {
	return []server.Route{
		{Method: http.MethodPost, Path: "/v1/operations/transactions:export", Operation: "postTransactionExportJob",
			Weight: server.WeightMedium, Access: server.Account, Handler: e.post},
		{Method: http.MethodGet, Path: "/v1/operations/{operationId}", Operation: "getOperationResult",
			Weight: server.WeightSmall, Access: server.Account, Handler: e.get},
		{Method: http.MethodGet, Path: "/v1/operations/{operationId}:download", Operation: "getOperationFile",
			Weight: server.WeightMedium, Access: server.Public, Extension: getOperationFile, Handler: e.download},
	}
}

// maxBody bounds a job request: 100 addresses and a few chains are a few
// kilobytes.
const maxBody = 1 << 20

// statusResponse is OperationStatusResponse.
type statusResponse struct {
	OperationID     string          `json:"operationId"`
	OperationType   string          `json:"operationType"`
	OperationStatus string          `json:"operationStatus"`
	Message         string          `json:"message,omitempty"`
	Metadata        *exportMetadata `json:"metadata,omitempty"`
	CreatedAt       uint64          `json:"createdAtTimestamp"`
	UpdatedAt       uint64          `json:"updatedAtTimestamp"`
}

// exportMetadata is TransactionExportMetadata.
type exportMetadata struct {
	Code        string `json:"code,omitempty"`
	DownloadURL string `json:"downloadUrl,omitempty"`
	NextDate    string `json:"nextDate,omitempty"`
}

func (e *Export) post(c *gin.Context) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxBody))
	if err != nil {
		apierr.Write(c, apierr.New(http.StatusBadRequest, fmt.Sprintf("Request body could not be read (at most %d bytes)", maxBody)))
		return
	}
	now := e.d.Now()
	s, msgs := parseRequest(body, e.d.Chains, limits{maxDays: e.cfg.MaxDays, maxAddresses: e.cfg.MaxAddress,
		today: now.UTC().Truncate(24 * time.Hour)})
	if msgs != nil {
		apierr.Write(c, apierr.Validation(msgs...))
		return
	}
	p := auth.From(c).Principal
	s.Limit = e.d.Plans.GetOrFree(p.Account.Plan).ExportTransactions
	spec, _ := json.Marshal(s)
	at := uint64(now.UnixMilli())
	o := operation{ID: uuid.NewString(), AccountID: p.Account.ID, Type: typeEVM, Status: statusRunning, Request: string(spec),
		CreatedAt: at, UpdatedAt: at, Version: e.clock.Next(0)}
	ctx := c.Request.Context()
	if err := e.db.put(ctx, o); err != nil {
		apierr.Write(c, storeError(err))
		return
	}
	if err := e.enqueue(ctx, o.ID); err != nil {
		// Not queued: say so in the job too, so that it is not mistaken
		// for one running (the republisher would run it otherwise).
		o.Status, o.Code, o.Message = statusFailed, codeInternal, "the job could not be queued; ask for a new one"
		o.UpdatedAt, o.Version = uint64(e.d.Now().UnixMilli()), e.clock.Next(o.Version)
		_ = e.db.put(context.WithoutCancel(ctx), o)
		apierr.Write(c, apierr.Unavailable("The export could not be queued (Kafka is unavailable); try again", err))
		return
	}
	c.JSON(http.StatusCreated, e.status(c, o))
}

// enqueue hands a job to the workers.
func (e *Export) enqueue(ctx context.Context, id string) error {
	v, err := codec.EncodeOperationTask(&record.OperationTask{OperationId: id})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return e.prod.ProduceSync(ctx, &kgo.Record{Topic: e.topic, Key: []byte(id), Value: v,
		Headers: []kgo.RecordHeader{{Key: codec.SchemaHeader, Value: []byte(codec.OperationTaskSchema)}}}).FirstErr()
}

func (e *Export) get(c *gin.Context) {
	o, err := e.db.operation(c.Request.Context(), c.Param("operationId"))
	if errors.Is(err, errNotFound) || err == nil && o.AccountID != auth.From(c).Principal.Account.ID {
		apierr.Write(c, apierr.NotFound("Operation "+c.Param("operationId")+" not found"))
		return
	}
	if err != nil {
		apierr.Write(c, storeError(err))
		return
	}
	c.JSON(http.StatusOK, e.status(c, o))
}

// status renders an operation, with a fresh download link when it has a
// file.
func (e *Export) status(c *gin.Context, o operation) statusResponse {
	r := statusResponse{OperationID: o.ID, OperationType: o.Type, OperationStatus: o.Status, Message: o.Message,
		CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt}
	md := &exportMetadata{Code: o.Code, NextDate: o.NextDate}
	if o.Status == statusCompleted || o.Status == statusWarning {
		md.DownloadURL = e.linkBase(c) + "/v1/operations/" + o.ID + ":download?token=" + url.QueryEscape(e.sealLink(o))
	}
	if *md != (exportMetadata{}) {
		r.Metadata = md
	}
	return r
}

// linkBase is where download links point: --export.public-url, or the
// scheme and host the request came to.
func (e *Export) linkBase(c *gin.Context) string {
	if e.cfg.PublicURL != "" {
		return strings.TrimRight(e.cfg.PublicURL, "/")
	}
	scheme := "http"
	if c.Request.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + c.Request.Host
}

// tokenKindLink is the kind of a download link's token.
const tokenKindLink = 1

// sealLink signs a link to an operation's file: its id and attempt.
func (e *Export) sealLink(o operation) string {
	return e.links.Seal(tokenKindLink, append(pagetoken.AppendString(nil, o.ID), byte(o.Attempt>>24), byte(o.Attempt>>16),
		byte(o.Attempt>>8), byte(o.Attempt)))
}

func (e *Export) download(c *gin.Context) {
	id := c.Param("operationId")
	r, _, err := e.links.Open(c.Query("token"), tokenKindLink)
	var attempt [4]byte
	var signed string
	if err == nil {
		signed = r.String()
		r.Fixed(attempt[:])
		err = r.Done()
	}
	if err != nil || signed != id {
		apierr.Write(c, apierr.Validation("token must be the token of this operation's downloadUrl (links expire after 24 hours: ask getOperationResult for a new one)"))
		return
	}
	o, err := e.db.operation(c.Request.Context(), id)
	if errors.Is(err, errNotFound) || err == nil && (o.Status != statusCompleted && o.Status != statusWarning ||
		o.Attempt != uint32(attempt[0])<<24|uint32(attempt[1])<<16|uint32(attempt[2])<<8|uint32(attempt[3])) {
		apierr.Write(c, apierr.NotFound("Operation "+id+" has no file (expired, or not complete)"))
		return
	}
	if err != nil {
		apierr.Write(c, storeError(err))
		return
	}
	h := c.Writer.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="transactions-`+o.ID+`.csv"`)
	h.Set("Content-Length", fmt.Sprint(o.Bytes))
	c.Status(http.StatusOK)
	if c.Request.Method == http.MethodHead {
		return
	}
	if err := e.db.copyFile(c.Request.Context(), o, c.Writer); err != nil {
		// Headers are gone: cut the answer short (its length says so).
		_ = c.Error(err)
		e.logger.Warn("export download cut short", "operation", o.ID, "err", err)
		c.Abort()
	}
}

// storeError maps a ClickHouse failure to the API error.
func storeError(err error) error {
	if errors.Is(err, ErrUnavailable) {
		return apierr.Unavailable("Operations are temporarily unavailable", err)
	}
	return apierr.Internal(err)
}

type metrics struct {
	jobs     *prometheus.CounterVec
	rows     prometheus.Counter
	duration prometheus.Histogram
	running  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := obs.NewMetrics(reg, "query")
	m := &metrics{
		jobs: f.CounterVec("export_jobs_total",
			"Export job attempts by result: completed, truncated (at the plan's size), failed (the request's fault), error (the attempt failed; retried), abandoned (attempts used up).",
			"result"),
		rows:     f.Counter("export_transactions_total", "Transactions written to export files."),
		duration: f.Histogram("export_job_duration_seconds", "Time of one export attempt.", prometheus.ExponentialBuckets(0.1, 2, 14)),
		running:  f.Gauge("export_running", "Export jobs this instance runs now."),
	}
	for _, r := range []string{"completed", "truncated", "failed", "error", "abandoned"} {
		m.jobs.WithLabelValues(r)
	}
	return m
}

// Close closes the producer.
func (e *Export) Close() { e.prod.Close() }
