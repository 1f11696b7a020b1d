package kafkautil_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/topics"
)

// familyNames gathers reg and returns the names of the families whose name
// starts with prefix.
func familyNames(t *testing.T, reg *prometheus.Registry, prefix string) map[string]bool {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), prefix) {
			out[f.GetName()] = true
		}
	}
	return out
}

// TestClientMetricsOnRealBroker builds several clients with one id (two
// from the same options, as ingest's checkpoint readers are, one from
// options built again): they share one set of kprom series, labelled with
// the id, which stays while one of them is open and goes with the last.
func TestClientMetricsOnRealBroker(t *testing.T) {
	cfg := testenv.Kafka(t)
	reg := prometheus.NewRegistry()
	cfg.Metrics = reg
	logger := testenv.Logger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := cfg.ProducerOpts(logger, "metrics-test")
	a, err := kafkautil.NewClient(ctx, logger, opts...)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kafkautil.NewClient(ctx, logger, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kafkautil.NewClient(ctx, logger, cfg.BaseOpts(logger, "metrics-test")...)
	if err != nil {
		t.Fatal(err)
	}
	topic := cfg.Topic(topics.Blocks)
	for _, cl := range []*kgo.Client{a, b} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	names := familyNames(t, reg, "moraine_kafka_")
	// The error counters exist at zero once a broker is met, before any
	// error: rate() over a series born with its first increment misses it.
	for _, want := range []string{"moraine_kafka_produce_records_total", "moraine_kafka_connects_total", "moraine_kafka_produce_compressed_bytes_total",
		"moraine_kafka_connect_errors_total", "moraine_kafka_read_errors_total", "moraine_kafka_write_errors_total"} {
		if !names[want] {
			t.Errorf("no %s among %v", want, names)
		}
	}
	// Both producers count into the one series of their id and topic.
	// franz-go calls the batch-written hook from a goroutine of its own
	// after the produce answer, so the count may lag ProduceSync a moment.
	produced := func() float64 {
		fams, _ := reg.Gather()
		var records float64
		for _, f := range fams {
			if f.GetName() != "moraine_kafka_produce_records_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["client"] != "metrics-test" || labels["topic"] != topic {
					t.Errorf("series with labels %v", labels)
				}
				records += m.GetCounter().GetValue()
			}
		}
		return records
	}
	records := produced()
	for deadline := time.Now().Add(5 * time.Second); records < 2 && time.Now().Before(deadline); records = produced() {
		time.Sleep(10 * time.Millisecond)
	}
	if records != 2 {
		t.Errorf("produce_records_total = %v, want 2", records)
	}
	// A consumer too, for the fetch series.
	cons, err := kafkautil.NewClient(ctx, logger, append(cfg.BaseOpts(logger, "metrics-test-consumer"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 2; {
		n += len(cons.PollFetches(ctx).Records())
	}
	checkDocumented(t, reg)
	cons.Close()
	a.Close()
	c.Close()
	if len(familyNames(t, reg, "moraine_kafka_")) == 0 {
		t.Error("series removed while a client of the id is still open")
	}
	b.Close()
	if names := familyNames(t, reg, "moraine_kafka_"); len(names) != 0 {
		t.Errorf("series left after every client closed: %v", names)
	}
	// A new client of the id registers them again.
	d, err := kafkautil.NewClient(ctx, logger, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if len(familyNames(t, reg, "moraine_kafka_connects_total")) != 1 {
		t.Error("no series for a client opened after the others closed")
	}
}

// TestExportLagOnRealBroker commits an offset for a group and reads its lag
// back from the gauge.
func TestExportLagOnRealBroker(t *testing.T) {
	cfg := testenv.Kafka(t)
	logger := testenv.Logger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kafkautil.NewClient(ctx, logger, cfg.ProducerOpts(logger, "lag-test")...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topic := cfg.Topic(topics.Blocks)
	for range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The key partitioner picks the partition: find it.
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	var part int32 = -1
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset == 5 {
			part = o.Partition
		}
	})
	if part < 0 {
		t.Fatalf("no partition holds the 5 records: %v", ends)
	}
	group := cfg.TopicPrefix + "lag-group"
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: part, At: 2, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, group, offs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteGroups(context.Background(), group) })

	reg := prometheus.NewRegistry()
	ectx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A group that never committed (unknown to the broker) beside it
		// has no lag and does not hide the other group's.
		kafkautil.ExportLag(ectx, adm, reg, logger, 100*time.Millisecond, group, cfg.TopicPrefix+"never-committed")
	}()
	defer func() { stop(); <-done }()
	// A group without members (Empty) is taken to consume every partition
	// of the topics it committed for: the others show no lag.
	want := `
# HELP moraine_kafka_consumer_lag_records Records between a consumer group's committed offset and the end of each partition it consumes.
# TYPE moraine_kafka_consumer_lag_records gauge
`
	for p := range int32(4) {
		lag := "0"
		if p == part {
			lag = "3"
		}
		want += `moraine_kafka_consumer_lag_records{group="` + group + `",partition="` + itoa(p) + `",topic="` + topic + `"} ` + lag + "\n"
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := testutil.GatherAndCompare(reg, strings.NewReader(want), "moraine_kafka_consumer_lag_records")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }

// TestKafkaLogsWarnAndAbove: franz-go's info lines stay out of the
// service's log even at --log.level debug; its warnings get in.
func TestKafkaLogsWarnAndAbove(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cl, err := kgo.NewClient(kafkautil.Config{Brokers: "127.0.0.1:1"}.BaseOpts(logger, "log-test")...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lg := cl.OptValue(kgo.WithLogger).(kgo.Logger)
	if lg.Level() != kgo.LogLevelWarn {
		t.Errorf("franz-go log level %v, want warn", lg.Level())
	}
	lg.Log(kgo.LogLevelInfo, "info line")
	lg.Log(kgo.LogLevelWarn, "warn line", "k", "v")
	if out := buf.String(); strings.Contains(out, "info line") || !strings.Contains(out, "warn line") || !strings.Contains(out, "component=kafka") {
		t.Errorf("log: %q", out)
	}
}

// checkDocumented compares the kprom series gathered from reg with the list
// in the doc comment of metrics.go: names and label sets, both ways.
func checkDocumented(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	src, err := os.ReadFile("metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^//\t(moraine_kafka_\w+)\{([^}]*)\}`).FindAllStringSubmatch(string(src), -1) {
		if m[1] != "moraine_kafka_consumer_lag_records" {
			documented[m[1]] = m[2]
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "moraine_kafka_") {
			continue
		}
		seen[f.GetName()] = true
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		want, ok := documented[f.GetName()]
		if !ok {
			t.Errorf("%s is exported but not listed in metrics.go", f.GetName())
			continue
		}
		wl := strings.Split(want, ",")
		sort.Strings(wl)
		sort.Strings(labels)
		if strings.Join(wl, ",") != strings.Join(labels, ",") {
			t.Errorf("%s has labels %v, metrics.go lists %v", f.GetName(), labels, wl)
		}
	}
	for name := range documented {
		// Series of events that did not happen have no sample yet.
		if !seen[name] && !strings.Contains(name, "_errors_") && !strings.Contains(name, "disconnects") {
			t.Errorf("metrics.go lists %s, which is not exported", name)
		}
	}
}
