package kafkautil_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/topics"
)

// TestTableReaderOnRealBroker checks that the reader applies what the
// compacted topic held before it started (then reports ready), applies
// tombstones, and that CatchUp returns only after later writes are applied.
func TestTableReaderOnRealBroker(t *testing.T) {
	cfg := testenv.Kafka(t)
	logger := testenv.Logger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := cfg.Topic(topics.AddressWatch)
	prod, err := kafkautil.NewClient(ctx, logger, cfg.ProducerOpts(logger, "test")...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	put := func(k, v string) {
		r := &kgo.Record{Topic: topic, Key: []byte(k)}
		if v != "" {
			r.Value = []byte(v)
		}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	put("a", "1")
	put("b", "2")
	put("a", "") // tombstone

	var mu sync.Mutex
	table := map[string]string{}
	reader := kafkautil.NewTableReader(cfg, topic, func(r *kgo.Record) {
		mu.Lock()
		defer mu.Unlock()
		if r.Value == nil {
			delete(table, string(r.Key))
		} else {
			table[string(r.Key)] = string(r.Value)
		}
	}, logger)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- reader.Run(rctx) }()
	defer func() { stop(); <-done }()

	for !reader.Ready() {
		if ctx.Err() != nil {
			t.Fatal("reader never became ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	if len(table) != 1 || table["b"] != "2" {
		t.Fatalf("table after start-up = %v, want only b=2", table)
	}
	mu.Unlock()

	put("c", "3")
	if err := reader.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if table["c"] != "3" {
		t.Fatalf("CatchUp returned before c=3 was applied: %v", table)
	}
	mu.Unlock()

	// CatchUpOffsets also names the end it waited for: past d's offset.
	res := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("d"), Value: []byte("4")})
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	d := res[0].Record
	ends, err := reader.CatchUpOffsets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ends[d.Partition] <= d.Offset {
		t.Fatalf("CatchUpOffsets ends %v, want partition %d past offset %d", ends, d.Partition, d.Offset)
	}
	mu.Lock()
	defer mu.Unlock()
	if table["d"] != "4" {
		t.Fatalf("CatchUpOffsets returned before d=4 was applied: %v", table)
	}
	if err := reader.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady on a ready reader: %v", err)
	}
}

// TestTableReaderWaitReadyEndsWithContext checks that waiting on a reader
// that never started returns when the caller gives up.
func TestTableReaderWaitReadyEndsWithContext(t *testing.T) {
	reader := kafkautil.NewTableReader(kafkautil.Config{Brokers: "127.0.0.1:1"}, "t", func(*kgo.Record) {}, testenv.Logger(t))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := reader.WaitReady(ctx); err == nil {
		t.Fatal("WaitReady returned nil on a reader that never ran")
	}
}
