package kafkautil_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/topics"
)

// TestFenceByGroupOnRealBroker: a transaction fenced by a group member
// commits while the member's generation is the group's, and cannot once
// another member joined (the group moved to a new generation); fenced with
// the new generation it commits again. Only the committed transactions'
// records are visible to a read_committed reader.
func TestFenceByGroupOnRealBroker(t *testing.T) {
	cfg := testenv.Kafka(t)
	logger := testenv.Logger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	group := cfg.TopicPrefix + "fence-test"
	fenceTopic, out := cfg.Topic(topics.ReplayFence), cfg.Topic(topics.Replay)

	// join starts a static member of the group and waits until it is
	// assigned partitions.
	join := func(instance string) *kgo.Client {
		assigned := make(chan struct{}, 1)
		cl, err := kafkautil.NewClient(ctx, logger, append(cfg.BaseOpts(logger, "fence-"+instance),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(cfg.Topic(topics.Blocks)), kgo.InstanceID(instance),
			kgo.DisableAutoCommit(), kgo.HeartbeatInterval(200*time.Millisecond),
			// Bounds how long closing a member waits for a join in flight.
			kgo.SessionTimeout(6*time.Second), kgo.RebalanceTimeout(3*time.Second),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
				if len(parts[cfg.Topic(topics.Blocks)]) == 0 {
					return
				}
				select {
				case assigned <- struct{}{}:
				default:
				}
			}))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		go func() {
			for ctx.Err() == nil && cl.PollFetches(ctx).Err0() == nil {
			}
		}()
		select {
		case <-assigned:
		case <-ctx.Done():
			t.Fatalf("member %s was not assigned partitions", instance)
		}
		return cl
	}
	memberOf := func(cl *kgo.Client, instance string) kafkautil.GroupMember {
		id, gen := cl.GroupMetadata()
		return kafkautil.GroupMember{Group: group, MemberID: id, InstanceID: instance, Generation: gen}
	}

	txnID := cfg.TopicPrefix + "fence-test-producer"
	prod, err := kafkautil.NewClient(ctx, logger, append(cfg.ProducerOpts(logger, "fence-producer"), kgo.TransactionalID(txnID))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	// transact produces value and ends the transaction, committing it only
	// if the fence with m holds.
	transact := func(value string, m kafkautil.GroupMember) error {
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: out, Key: []byte("k"), Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		fenceErr := kafkautil.FenceByGroup(ctx, prod, txnID, m, fenceTopic)
		if err := prod.EndTransaction(ctx, kgo.TransactionEndTry(fenceErr == nil)); err != nil {
			t.Fatalf("end transaction of %q: %v", value, err)
		}
		return fenceErr
	}

	a := join("a")
	first := memberOf(a, "a")
	if err := transact("first", first); err != nil {
		t.Fatalf("fenced by the member of the current generation: %v", err)
	}
	// A cooperative rebalance takes two generations (b is assigned
	// partitions in the second): wait until both members are in the last.
	b := join("b")
	for g := memberOf(a, "a").Generation; g == first.Generation || g != memberOf(b, "b").Generation; g = memberOf(a, "a").Generation {
		if ctx.Err() != nil {
			t.Fatal("the group did not settle in a new generation")
		}
		time.Sleep(50 * time.Millisecond)
	}
	err = transact("stale", first)
	if !errors.Is(err, kerr.IllegalGeneration) && !errors.Is(err, kerr.FencedInstanceID) {
		t.Fatalf("fenced by a member of an older generation: got %v, want ILLEGAL_GENERATION", err)
	}
	if err := transact("second", memberOf(a, "a")); err != nil {
		t.Fatalf("fenced by the member's new generation: %v", err)
	}

	reader, err := kgo.NewClient(append(cfg.BaseOpts(logger, "fence-reader"), kgo.ConsumeTopics(out),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var got []string
	for len(got) < 2 && ctx.Err() == nil {
		reader.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != 2 || got[0] != "first" || got[1] != "second" {
		t.Fatalf("committed records: %q, want [first second]", got)
	}
}
