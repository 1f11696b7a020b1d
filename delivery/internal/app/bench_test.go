package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/delivery/internal/deliverytest"
	"github.com/moraine-data/moraine/delivery/internal/sign"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/topics"
)

// BenchmarkDeliverySustained measures sustained signed deliveries per
// second through the whole service (app.New, Run) on the real stack: N activity
// messages (MORAINE_BENCH_DELIVERIES, default 50,000; ~1.4 KB canonical
// JSON each, 100 webhooks of one account, spread over the activity topic's
// partitions) are produced first; delivery then consumes them, signs each
// (x-signature and webhook-signature), POSTs it to one local receiver on
// loopback that verifies the x-signature and answers 200, logs every
// attempt to ClickHouse and commits. The rate is N over the time from the
// first to the last receipt. Per-host concurrency is raised to 128 (the
// default 16 protects third-party endpoints; one local receiver is the
// only host here).
//
//	cd delivery && go test -run '^$' -bench BenchmarkDeliverySustained -benchtime 1x ./internal/app
//
// prints "deliveries/s" as a benchmark metric and a line
// "delivery-sustained: N deliveries in T s = R deliveries/s".
func BenchmarkDeliverySustained(b *testing.B) {
	n := 50_000
	if v, err := strconv.Atoi(os.Getenv("MORAINE_BENCH_DELIVERIES")); err == nil && v > 0 {
		n = v
	}
	env := deliverytest.New(b)
	key, _ := sign.Key(deliverytest.Secret, sign.Hex)
	var got, bad atomic.Int64
	var first, last atomic.Int64
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !sign.Verify(key, body, r.Header.Get(sign.HeaderSignature)) {
			bad.Add(1)
		}
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		if got.Add(1) == int64(n) {
			last.Store(now)
			close(done)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	acc := env.Account("pro", deliverytest.Secret)
	hooks := make([]string, 100)
	for i := range hooks {
		hooks[i] = env.Webhook(acc, srv.URL+"/hook/"+strconv.Itoa(i))
	}

	// Produce everything first, spread over the partitions.
	prod, err := kgo.NewClient(append(env.Kafka.BaseOpts(deliverytest.DiscardLogger(), "bench"),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20))...)
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	filler := strings.Repeat("ab", 400)
	ctx := context.Background()
	for i := range n {
		a := deliverytest.Activity(acc, hooks[i%len(hooks)], i)
		a.Payload, _ = json.Marshal(map[string]any{
			"webhookId": a.WebhookId, "messageId": a.MessageId, "eventType": "address_activity",
			"event": map[string]any{"transaction": map[string]any{"txHash": fmt.Sprintf("0x%064x", i), "input": "0x" + filler}},
		})
		v, _ := codec.EncodeActivity(a)
		prod.Produce(ctx, &kgo.Record{Topic: env.Kafka.Topic(topics.Activity), Key: []byte(a.WebhookId), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		b.Fatal(err)
	}

	cfg := env.Config()
	if v, err := strconv.Atoi(os.Getenv("MORAINE_BENCH_MAX_PER_HOST")); err == nil && v > 0 {
		cfg.Delivery.MaxPerHost = v
	}
	cfg.Delivery.CommitInterval = time.Second
	cfg.Delivery.Log.FlushInterval = 200 * time.Millisecond
	b.ResetTimer()
	deliverytest.Start(b, cfg)
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		b.Fatalf("only %d of %d deliveries in 10 minutes", got.Load(), n)
	}
	b.StopTimer()
	secs := float64(last.Load()-first.Load()) / 1e9
	rate := float64(n) / secs
	if bad.Load() > 0 {
		b.Fatalf("%d deliveries with a bad signature", bad.Load())
	}
	b.ReportMetric(rate, "deliveries/s")
	fmt.Printf("delivery-sustained: %d deliveries in %.2f s = %.0f deliveries/s (max-per-host %d)\n", n, secs, rate, cfg.Delivery.MaxPerHost)
}
