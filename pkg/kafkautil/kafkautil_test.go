package kafkautil_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/proto"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// TestTopicsOnRealBroker creates the topics twice (idempotent) and checks
// partitions and that the address-watch topic is compacted; a config
// changed by hand is set back to its spec, and an ensure with nothing to
// do creates nothing.
func TestTopicsOnRealBroker(t *testing.T) {
	cfg := testenv.Kafka(t) // creates the topics once
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logger := testenv.Logger(t)
	cl, err := kafkautil.NewClient(ctx, logger, cfg.BaseOpts(logger, "test")...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cfg.EnsureTopics(ctx, cl, logger); err != nil {
		t.Fatalf("second ensure: %v", err)
	}
	adm := kadm.NewClient(cl)
	details, err := adm.ListTopics(ctx, topics.Names(cfg.Topics())...)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg.Topics() {
		d, ok := details[s.Name]
		if !ok || d.Err != nil {
			t.Fatalf("topic %s missing: %v", s.Name, d.Err)
		}
		if got := int32(len(d.Partitions)); got != s.Partitions {
			t.Errorf("topic %s has %d partitions, want %d", s.Name, got, s.Partitions)
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, cfg.Topic(topics.AddressWatch))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(cfg.Topic(topics.AddressWatch), nil)
	if err != nil {
		t.Fatal(err)
	}
	var policy string
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			policy = c.MaybeValue()
		}
	}
	if policy != "compact" {
		t.Fatalf("address-watch cleanup.policy = %q, want compact", policy)
	}

	blocks := cfg.Topic(topics.Blocks)
	changed := "3600000"
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &changed}}, blocks); err != nil {
		t.Fatal(err)
	}
	// A broker applies an alteration a moment after acknowledging it, and on
	// a cluster each broker once the controller's metadata reaches it: wait
	// for every broker, or the ensure below may read the old value from one
	// that has not applied it yet and leave the change in place.
	brokers, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range brokers.Brokers {
		for deadline := time.Now().Add(10 * time.Second); brokerTopicConfig(ctx, t, cl, b.NodeID, blocks, "retention.ms") != changed; {
			if time.Now().After(deadline) {
				t.Fatalf("the altered retention.ms never showed on broker %d", b.NodeID)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	res, err := topics.Ensure(ctx, adm, cfg.Topics(), cfg.Replication())
	if err != nil || len(res.Created) != 0 || len(res.UnderReplicated) != 0 {
		t.Fatalf("ensure with every topic present: %+v, err %v", res, err)
	}
	// The derived replication: one copy on the single-node stack, three
	// copies with two in sync on the local cluster's three brokers.
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := topics.Replication{Factor: 1, MinInsyncReplicas: 1}
	if len(meta.Brokers) >= 3 {
		want = topics.Replication{Factor: 3, MinInsyncReplicas: 2}
	}
	if res.Replication != want {
		t.Fatalf("replication derived for %d brokers = %+v, want %+v", len(meta.Brokers), res.Replication, want)
	}
	if got := topicConfig(ctx, t, adm, blocks, "min.insync.replicas"); got != strconv.Itoa(want.MinInsyncReplicas) {
		t.Fatalf("blocks min.insync.replicas = %q, want %d", got, want.MinInsyncReplicas)
	}
	details, err = adm.ListTopics(ctx, blocks)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range details[blocks].Partitions {
		if len(p.Replicas) != int(want.Factor) {
			t.Fatalf("blocks partition %d has %d replicas, want %d", p.Partition, len(p.Replicas), want.Factor)
		}
	}
	spec, _ := topics.Lookup(cfg.Topics(), topics.Blocks)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := topicConfig(ctx, t, adm, blocks, "retention.ms")
		if got == spec.Configs["retention.ms"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("blocks retention.ms = %s after ensure, want the spec's %s", got, spec.Configs["retention.ms"])
		}
	}
}

func topicConfig(ctx context.Context, t *testing.T, adm *kadm.Client, topic, key string) string {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c.MaybeValue()
		}
	}
	return ""
}

// brokerTopicConfig is a topic's config value as one broker has it.
func brokerTopicConfig(ctx context.Context, t *testing.T, cl *kgo.Client, broker int32, topic, key string) string {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{key}
	req.Resources = append(req.Resources, res)
	kresp, err := cl.Broker(int(broker)).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range kresp.(*kmsg.DescribeConfigsResponse).Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("describe %s on broker %d: %v", topic, broker, err)
		}
		for _, c := range r.Configs {
			if c.Name == key && c.Value != nil {
				return *c.Value
			}
		}
	}
	return ""
}

// TestRecordRoundTripOnRealBroker produces encoded chain events through the
// real broker with the producer options the services use and consumes them
// back with the consumer options, checking order and content.
func TestRecordRoundTripOnRealBroker(t *testing.T) {
	cfg, ctx, logger, prod := producerOnRealBroker(t, 60*time.Second)
	topic := cfg.Topic(topics.Blocks)
	var sent []*record.ChainEvent
	var recs []*kgo.Record
	for i := uint64(0); i < 50; i++ {
		ev := &record.ChainEvent{Event: &record.ChainEvent_Block{Block: &record.Block{
			ChainId: 43112, Number: i, Hash: make([]byte, 32), FeesSpent: "12345678901234567890123",
			Transactions: []*record.Transaction{{Index: 0, Value: "1", Input: make([]byte, 2000)}},
		}}}
		b, err := codec.EncodeChainEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, ev)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("43112"), Value: b,
			Headers: []kgo.RecordHeader{{Key: codec.SchemaHeader, Value: []byte(codec.ChainEventSchema)}}})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons, err := kafkautil.NewClient(ctx, logger, cfg.ConsumerOpts(logger, "test-consumer", "test-group-"+testenv.Suffix(), topic)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []*record.ChainEvent
	for len(got) < len(sent) && ctx.Err() == nil {
		f := cons.PollRecords(ctx, 100)
		f.EachRecord(func(r *kgo.Record) {
			ev, err := codec.DecodeChainEvent(r.Value)
			if err != nil {
				t.Errorf("decode: %v", err)
				return
			}
			got = append(got, ev)
		})
		cons.AllowRebalance()
	}
	if len(got) != len(sent) {
		t.Fatalf("got %d events, want %d", len(got), len(sent))
	}
	for i := range sent {
		if !proto.Equal(got[i], sent[i]) {
			t.Fatalf("event %d differs", i)
		}
	}
}

// TestMarkingConsumerCommitsMarksOnRealBroker checks MarkingConsumerOpts on
// the real broker: nothing is committed per batch, the marked records are
// committed when the group is left and every interval, and records polled
// but not marked are read again by the group's next member.
func TestMarkingConsumerCommitsMarksOnRealBroker(t *testing.T) {
	cfg, ctx, logger, prod := producerOnRealBroker(t, 90*time.Second)
	topic := cfg.Topic(topics.Blocks)
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("43112"), Value: []byte(strconv.Itoa(i))})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	partition, end := recs[0].Partition, recs[len(recs)-1].Offset+1
	group := "test-marks-" + testenv.Suffix()
	adm := kadm.NewClient(prod)
	committed := func() int64 {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatalf("fetch offsets: %v", err)
		}
		o, ok := offs.Lookup(topic, partition)
		if !ok {
			return -1
		}
		return o.At
	}
	poll := func(cl *kgo.Client, n int) []*kgo.Record {
		var got []*kgo.Record
		for len(got) < n && ctx.Err() == nil {
			got = append(got, cl.PollRecords(ctx, n-len(got)).Records()...)
			cl.AllowRebalance()
		}
		if len(got) != n {
			t.Fatalf("polled %d records, want %d", len(got), n)
		}
		return got
	}

	// A member whose interval never comes: only leaving commits.
	first, err := kafkautil.NewClient(ctx, logger, cfg.MarkingConsumerOpts(logger, "test-marks", group, time.Hour, topic)...)
	if err != nil {
		t.Fatal(err)
	}
	got := poll(first, 20)
	first.MarkCommitRecords(got[:12]...)
	if c := committed(); c != -1 {
		t.Fatalf("committed offset %d before the group was left, want none", c)
	}
	if err := first.LeaveGroupContext(ctx); err != nil {
		t.Fatalf("leave group: %v", err)
	}
	first.Close()
	if c, want := committed(), got[11].Offset+1; c != want {
		t.Fatalf("committed offset %d after leaving, want %d (the marked records)", c, want)
	}

	// The next member reads the records polled but not marked again, and
	// commits its marks within its interval without leaving.
	second, err := kafkautil.NewClient(ctx, logger, cfg.MarkingConsumerOpts(logger, "test-marks", group, 200*time.Millisecond, topic)...)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	again := poll(second, 8)
	if string(again[0].Value) != "12" {
		t.Fatalf("the next member read from record %s, want 12", again[0].Value)
	}
	second.MarkCommitRecords(again...)
	for deadline := time.Now().Add(10 * time.Second); committed() != end; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("committed offset %d 10 s after marking, want %d", committed(), end)
		}
	}
}

// producerOnRealBroker returns the test's Kafka (topics of its own), a
// context that ends after timeout, a logger and a producer with the
// services' options.
func producerOnRealBroker(t *testing.T, timeout time.Duration) (kafkautil.Config, context.Context, *slog.Logger, *kgo.Client) {
	t.Helper()
	cfg := testenv.Kafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	logger := testenv.Logger(t)
	prod, err := kafkautil.NewClient(ctx, logger, cfg.ProducerOpts(logger, "test-producer")...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	return cfg, ctx, logger, prod
}
