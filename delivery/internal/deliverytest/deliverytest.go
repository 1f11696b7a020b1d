// Package deliverytest runs the delivery service in-process for tests, on
// fresh Kafka topics and a fresh ClickHouse database of the real local
// services (pkg/testenv), with webhooks and accounts written the way the
// query service writes them (ClickHouse rows, then address-watch records),
// activity produced the way the matcher produces it, and an HTTP receiver
// that records what arrives.
package deliverytest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/delivery/internal/app"
	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// Secret is the shared secret test accounts get.
const Secret = "c13cc017c4ed63bcc842c8edfb49df37512280326a32826de3b885340b8a3d53"

// Env is a test's Kafka topics, ClickHouse database and producers.
type Env struct {
	t     testing.TB
	Kafka kafkautil.Config
	CH    chclient.Config
	Conn  driver.Conn
	DB    *accountdb.DB
	Clock *accountdb.Clock
	pub   *watch.Publisher
	prod  *kgo.Client
	locks *watch.Locks
}

// New creates fresh topics and a fresh database.
func New(t testing.TB) *Env {
	t.Helper()
	e := &Env{t: t, Kafka: testenv.Kafka(t), Clock: accountdb.NewClock(nil), locks: watch.NewLocks()}
	e.CH, e.Conn = testenv.ClickHouse(t)
	var err error
	if e.DB, err = accountdb.Open(e.Conn, accountdb.DefaultConfig(), nil); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	if e.pub, err = watch.NewPublisher(watch.DefaultConfig(), watch.PublisherDeps{
		Logger: logger, Registerer: prometheus.NewRegistry(), Kafka: e.Kafka, Subsystem: "test",
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.pub.Close)
	// Activity goes to partition 0 unless a record names another, so
	// tests exercise one partition's commit window.
	if e.prod, err = kgo.NewClient(append(e.Kafka.BaseOpts(logger, "deliverytest"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.prod.Close)
	return e
}

// Account creates an account on plan, with secret unless it is "".
func (e *Env) Account(plan, secret string) string {
	e.t.Helper()
	ctx := context.Background()
	a := accountdb.Account{ID: uuid.NewString(), Name: "test", Plan: plan, CreatedAt: 1, Version: e.Clock.Next(0)}
	must(e.t, e.DB.PutAccount(ctx, a))
	var s accountdb.Secret
	if secret != "" {
		s = accountdb.Secret{AccountID: a.ID, Secret: secret, Version: e.Clock.Next(a.Version)}
		must(e.t, e.DB.PutSecret(ctx, s))
	}
	rec, err := watch.AccountRecord(a, s)
	must(e.t, err)
	must(e.t, e.pub.Publish(ctx, []*kgo.Record{rec}))
	return a.ID
}

// Webhook creates an active webhook of account delivering to url.
func (e *Env) Webhook(accountID, url string) string {
	e.t.Helper()
	ctx := context.Background()
	w := accountdb.Webhook{
		AccountID: accountID, ID: uuid.NewString(), URL: url, ChainID: "43112", EventType: "address_activity",
		EventSignatures: []string{}, Status: accountdb.StatusActive, CreatedAt: uint64(time.Now().UnixMilli()),
		Version: e.Clock.Next(0),
	}
	must(e.t, e.DB.PutWebhook(ctx, w))
	rec, err := watch.WebhookRecord(w)
	must(e.t, err)
	must(e.t, e.pub.Publish(ctx, []*kgo.Record{rec}))
	return w.ID
}

// SetStatus changes a webhook's status the way the API's PATCH does.
func (e *Env) SetStatus(accountID, id, status string) {
	e.t.Helper()
	w := watch.Writer{Store: e.DB, Publisher: e.pub, Locks: e.locks, Clock: e.Clock}
	u, err := w.UpdateWebhook(context.Background(), accountID, id, func(_ accountdb.Webhook, next *accountdb.Webhook) error {
		next.Status = status
		return nil
	})
	must(e.t, err)
	must(e.t, u.PublishErr)
}

// Status reads a webhook's status from ClickHouse.
func (e *Env) Status(accountID, id string) string {
	e.t.Helper()
	w, err := e.DB.Webhook(context.Background(), accountID, id)
	must(e.t, err)
	return w.Status
}

// Payload is a canonical JSON body like the matcher's.
func Payload(webhookID, messageID string, n int) []byte {
	b, _ := json.Marshal(map[string]any{
		"webhookId": webhookID, "messageId": messageID, "eventType": "address_activity",
		"event": map[string]any{"transaction": map[string]any{"txHash": fmt.Sprintf("0x%064x", n), "value": "1"}},
	})
	return b // encoding/json sorts map keys: canonical for this ASCII payload
}

// Activity builds message n of a webhook.
func Activity(accountID, webhookID string, n int) *record.Activity {
	mid := uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%s/%d", webhookID, n)).String()
	return &record.Activity{
		WebhookId: webhookID, MessageId: mid, AccountId: accountID, ChainId: 43112, BlockNumber: uint64(n),
		TxHash: fmt.Appendf(nil, "%032d", n), Payload: Payload(webhookID, mid, n),
		BlockFetchedAtUnixMs: time.Now().UnixMilli(), MatchedAtUnixMs: time.Now().UnixMilli(),
	}
}

// Produce writes activities to partition 0 of the activity topic.
func (e *Env) Produce(acts ...*record.Activity) {
	e.t.Helper()
	e.ProduceTo(topics.Activity, acts...)
}

// ProduceTo writes activities to partition 0 of topic (topics.Activity or
// topics.Replay).
func (e *Env) ProduceTo(topic string, acts ...*record.Activity) {
	e.t.Helper()
	recs := make([]*kgo.Record, len(acts))
	for i, a := range acts {
		v, err := codec.EncodeActivity(a)
		must(e.t, err)
		recs[i] = &kgo.Record{
			Topic: e.Kafka.Topic(topic), Partition: 0, Key: []byte(a.WebhookId), Value: v,
			Headers: []kgo.RecordHeader{{Key: codec.SchemaHeader, Value: []byte(codec.ActivitySchema)}},
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(e.t, e.prod.ProduceSync(ctx, recs...).FirstErr())
}

// Deliveries reads a webhook's delivery-log rows, oldest first.
func (e *Env) Deliveries(webhookID string) []accountdb.Delivery {
	e.t.Helper()
	ds, err := e.DB.Deliveries(context.Background(), webhookID, accountdb.FirstDeliveryPage, 10_000)
	must(e.t, err)
	for i, j := 0, len(ds)-1; i < j; i, j = i+1, j-1 {
		ds[i], ds[j] = ds[j], ds[i]
	}
	return ds
}

// FreePort returns a loopback address nothing listens on.
func FreePort(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Config is a delivery configuration for this env: quick commits and
// flushes, private targets allowed (receivers are on loopback).
func (e *Env) Config() app.Config {
	c := app.DefaultConfig()
	c.Kafka, c.ClickHouse = e.Kafka, e.CH
	c.Ops.ListenAddress = FreePort(e.t)
	c.ChainsFile = repoFile(e.t, "deploy/chains/dev.json")
	c.ShutdownTimeout = 10 * time.Second
	c.Delivery.AllowPrivateTargets = true
	c.Delivery.CommitInterval = 100 * time.Millisecond
	c.Delivery.DrainTimeout = 3 * time.Second
	c.Delivery.SessionTimeout = 6 * time.Second
	c.Delivery.Log.FlushInterval = 50 * time.Millisecond
	c.Delivery.Group = "test-delivery-" + testenv.Suffix()
	return c
}

// Service is a delivery service running in-process.
type Service struct {
	Registry *prometheus.Registry
	Ops      string
	cancel   context.CancelFunc
	done     chan error
}

// Start runs delivery with cfg until Stop or the end of the test, and
// waits until /readyz answers 200.
func Start(t testing.TB, cfg app.Config) *Service {
	t.Helper()
	s := &Service{Registry: prometheus.NewRegistry(), Ops: cfg.Ops.ListenAddress, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	logger := testenv.Logger(t)
	go func() {
		a, err := app.New(cfg, app.Deps{Logger: logger, Registry: s.Registry})
		if err == nil {
			err = a.Run(ctx)
		}
		s.done <- err
	}()
	t.Cleanup(func() { s.Stop(t) })
	WaitReady(t, s.Ops, 60*time.Second)
	return s
}

// Stop cancels the service and waits for it (idempotent).
func (s *Service) Stop(t testing.TB) {
	t.Helper()
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("delivery returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("delivery did not stop within 30 s")
	}
}

// WaitReady polls http://addr/readyz until it answers 200.
func WaitReady(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = string(b)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery not ready within %s: %s", timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Request is one request a Receiver got.
type Request struct {
	At     time.Time
	Header http.Header
	Body   []byte
	// Code is the status the receiver answered.
	Code int
}

// Receiver is a webhook endpoint that records requests; Respond decides
// each answer (nil: 200).
type Receiver struct {
	URL string
	srv *httptest.Server

	mu      sync.Mutex
	reqs    []Request
	respond func(r *http.Request, body []byte) int
}

// NewReceiver starts a receiver on loopback.
func NewReceiver(t testing.TB) *Receiver {
	rc := &Receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		at := time.Now()
		rc.mu.Lock()
		respond := rc.respond
		rc.mu.Unlock()
		code := http.StatusOK
		if respond != nil {
			code = respond(r, body)
		}
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, Request{At: at, Header: r.Header.Clone(), Body: body, Code: code})
		rc.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(rc.srv.Close)
	rc.URL = rc.srv.URL + "/hook"
	return rc
}

// Respond sets how the receiver answers from now on.
func (rc *Receiver) Respond(fn func(r *http.Request, body []byte) int) {
	rc.mu.Lock()
	rc.respond = fn
	rc.mu.Unlock()
}

// Requests returns what arrived so far.
func (rc *Receiver) Requests() []Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Request(nil), rc.reqs...)
}

// ByMessage groups the requests by webhook-id header, in arrival order.
func (rc *Receiver) ByMessage() map[string][]Request {
	out := map[string][]Request{}
	for _, r := range rc.Requests() {
		id := r.Header.Get("webhook-id")
		out[id] = append(out[id], r)
	}
	return out
}

// Eventually polls cond every 20 ms until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// repoFile finds rel in the repository by walking up from the test's
// directory.
func repoFile(t testing.TB, rel string) string {
	dir, err := os.Getwd()
	must(t, err)
	for range 8 {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
		dir = filepath.Dir(dir)
	}
	t.Fatalf("%s not found above the test directory", rel)
	return ""
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// DiscardLogger drops everything.
func DiscardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
