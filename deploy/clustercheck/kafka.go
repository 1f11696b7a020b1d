package clustercheck

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// wantBrokerConfig is what the cluster profile sets on every broker
// (templates/kafka-cluster-server.properties) and moraine relies on.
var wantBrokerConfig = map[string]string{
	"default.replication.factor":               "3",
	"min.insync.replicas":                      "2",
	"offsets.topic.replication.factor":         "3",
	"transaction.state.log.replication.factor": "3",
	"transaction.state.log.min.isr":            "2",
	"unclean.leader.election.enable":           "false",
}

// sendEvery paces the producer: about 500 records a second, enough to see
// every second of a pause, little enough to cost nothing.
const sendEvery = 2 * time.Millisecond

func (c *check) kafka(ctx context.Context, brokers []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	names, err := c.kafkaBrokers(ctx, adm, brokers)
	if err != nil {
		return err
	}
	// The worst case: the partition's leader is also the active KRaft controller, so the kill costs a
	// controller election before the dead broker can be fenced and a new leader chosen.
	topic := "moraine-clustercheck-" + c.suffix
	controller, qerr := quorumLeader(ctx, cl)
	if err := within(ctx, 30*time.Second, func(ctx context.Context) error {
		if qerr != nil {
			_, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": ptr("2")}, topic)
			return err
		}
		return createTopicLedBy(ctx, cl, topic, controller, slices.Sorted(maps.Keys(names)))
	}); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	defer func() {
		if err := within(context.WithoutCancel(ctx), 30*time.Second, func(ctx context.Context) error {
			_, err := adm.DeleteTopics(ctx, topic)
			return err
		}); err != nil {
			c.say("kafka: could not delete topic %s: %v", topic, err)
		}
	}()
	var part kadm.PartitionDetail
	if _, err := poll(ctx, 30*time.Second, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		part, err = partitionOf(ctx, adm, topic)
		return err == nil && part.Leader >= 0 && len(part.ISR) == 3, err
	}); err != nil {
		return fmt.Errorf("topic %s never had a leader and 3 in-sync replicas: %w", topic, err)
	}
	victim := names[part.Leader]
	role := "the partition's leader"
	switch q, err := quorumLeader(ctx, cl); {
	case err != nil:
		role += fmt.Sprintf(" (the active KRaft controller is unknown: %v)", err)
	case q == part.Leader:
		role += " and the active KRaft controller"
	default:
		role += ", " + names[q] + " the active KRaft controller"
	}
	c.say("kafka: topic %s, replication factor 3, min.insync.replicas 2; %s is %s", topic, victim, role)

	pcl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer pcl.Close()
	l := newLedger()
	pctx, stopProducing := context.WithCancel(ctx)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		l.produce(pctx, pcl)
	}()
	defer func() { stopProducing(); <-produced }()

	if _, err := poll(ctx, 30*time.Second, 50*time.Millisecond, func(context.Context) (bool, error) {
		return l.ackedCount() >= 500, l.firstError()
	}); err != nil {
		return fmt.Errorf("acks=all sends before the kill: %w", err)
	}
	if err := c.kill(ctx, victim); err != nil {
		return err
	}
	killedAt := time.Now()
	if _, err := poll(ctx, c.o.Limits.AckWait, 20*time.Millisecond, func(context.Context) (bool, error) {
		return !l.firstAckAfter(killedAt).IsZero(), l.firstError()
	}); err != nil {
		return fmt.Errorf("no acks=all send succeeded after %s died: %w", victim, err)
	}
	resumed := l.firstAckAfter(killedAt).Sub(killedAt)
	// Some seconds of sending with one broker down, then bring it back.
	time.Sleep(2 * time.Second)
	started, err := c.start(ctx, victim)
	if err != nil {
		return err
	}
	inSync, err := poll(ctx, c.o.Limits.BrokerInSync, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		p, err := partitionOf(ctx, adm, topic)
		return err == nil && slices.Contains(p.ISR, part.Leader) && len(p.ISR) == 3, err
	})
	if err != nil {
		return fmt.Errorf("%s did not rejoin the in-sync replicas: %w", victim, err)
	}
	time.Sleep(time.Second)
	stopProducing()
	<-produced
	if err := within(ctx, 60*time.Second, pcl.Flush); err != nil {
		return fmt.Errorf("flushing the producer: %w", err)
	}
	if err := l.firstError(); err != nil {
		return fmt.Errorf("an acks=all send failed with one broker down: %w", err)
	}
	acked, maxWait := l.summary()
	c.say("kafka: %s killed (SIGKILL) under acks=all sends: acks resumed %s after the kill; longest wait for an ack %s",
		victim, secs(resumed), secs(maxWait))
	c.say("kafka: %s restarted in %s; back in the in-sync replicas %s after the restart", victim, secs(started), secs(inSync))
	if maxWait > c.o.Limits.AckWait {
		return fmt.Errorf("a send waited %s for its ack (limit %s)", secs(maxWait), c.o.Limits.AckWait)
	}

	read, err := readAll(ctx, cl, adm, brokers, topic)
	if err != nil {
		return err
	}
	missing, dups := compareLedger(acked, read)
	if len(missing) > 0 {
		return fmt.Errorf("%d of %d acknowledged records are missing (first: #%d)", len(missing), len(acked), missing[0])
	}
	c.say("kafka: all %d acknowledged records read back (%d duplicates)", len(acked), dups)
	return nil
}

// kafkaBrokers checks the brokers and their settings, and names them:
// broker id N is node kafka-N (node.id in the profile's config), at the N-th
// address of MORAINE_KAFKA_BROKERS.
func (c *check) kafkaBrokers(ctx context.Context, adm *kadm.Client, brokers []string) (map[int32]string, error) {
	var meta kadm.Metadata
	if err := within(ctx, 15*time.Second, func(ctx context.Context) (err error) {
		meta, err = adm.BrokerMetadata(ctx)
		return err
	}); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if len(meta.Brokers) != len(brokers) {
		return nil, fmt.Errorf("%d brokers registered, %d in MORAINE_KAFKA_BROKERS", len(meta.Brokers), len(brokers))
	}
	names := map[int32]string{}
	for _, b := range meta.Brokers {
		if b.NodeID < 1 || int(b.NodeID) > len(brokers) {
			return nil, fmt.Errorf("broker id %d is not one of kafka-1..%d", b.NodeID, len(brokers))
		}
		if addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))); addr != brokers[b.NodeID-1] {
			return nil, fmt.Errorf("broker %d advertises %s, expected %s", b.NodeID, addr, brokers[b.NodeID-1])
		}
		names[b.NodeID] = fmt.Sprintf("kafka-%d", b.NodeID)
	}
	var configs kadm.ResourceConfigs
	if err := within(ctx, 15*time.Second, func(ctx context.Context) (err error) {
		configs, err = adm.DescribeBrokerConfigs(ctx, meta.Brokers.NodeIDs()...)
		return err
	}); err != nil {
		return nil, fmt.Errorf("broker configs: %w", err)
	}
	for _, rc := range configs {
		if rc.Err != nil {
			return nil, fmt.Errorf("broker %s configs: %w", rc.Name, rc.Err)
		}
		for _, cfg := range rc.Configs {
			want, ok := wantBrokerConfig[cfg.Key]
			if ok && (cfg.Value == nil || *cfg.Value != want) {
				return nil, fmt.Errorf("broker %s: %s is %v, the cluster profile sets %s", rc.Name, cfg.Key, deref(cfg.Value), want)
			}
		}
	}
	c.say("kafka: %d brokers, each with replication factor 3 (topics, offsets, transaction log), "+
		"min.insync.replicas 2 (also the transaction log), no unclean leader election", len(meta.Brokers))
	return names, nil
}

func partitionOf(ctx context.Context, adm *kadm.Client, topic string) (kadm.PartitionDetail, error) {
	var p kadm.PartitionDetail
	err := within(ctx, 5*time.Second, func(ctx context.Context) error {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		d, ok := td[topic]
		if !ok || d.Err != nil {
			return fmt.Errorf("topic %s: %v", topic, d.Err)
		}
		p, ok = d.Partitions[0]
		if !ok {
			return fmt.Errorf("topic %s has no partition 0", topic)
		}
		return p.Err
	})
	return p, err
}

// createTopicLedBy creates a one-partition topic on every broker with leader
// as its preferred (first) replica, so that broker leads it.
func createTopicLedBy(ctx context.Context, cl *kgo.Client, topic string, leader int32, brokers []int32) error {
	replicas := []int32{leader}
	for _, b := range brokers {
		if b != leader {
			replicas = append(replicas, b)
		}
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 15000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = topic
	t.NumPartitions, t.ReplicationFactor = -1, -1 // given by the assignment
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, replicas
	t.ReplicaAssignment = append(t.ReplicaAssignment, a)
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "min.insync.replicas", ptr("2")
	t.Configs = append(t.Configs, cfg)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("CreateTopics answered %d topics", len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return fmt.Errorf("%w: %s", err, deref(resp.Topics[0].ErrorMessage))
	}
	return nil
}

// quorumLeader asks for the KRaft controller quorum's leader (a broker
// forwards DescribeQuorum to the controllers).
func quorumLeader(ctx context.Context, cl *kgo.Client) (int32, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	var resp *kmsg.DescribeQuorumResponse
	err := within(ctx, 5*time.Second, func(ctx context.Context) (err error) {
		resp, err = req.RequestWith(ctx, cl)
		return err
	})
	if err != nil {
		return -1, err
	}
	if len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0 {
		return -1, errors.New("empty DescribeQuorum response")
	}
	return resp.Topics[0].Partitions[0].LeaderID, nil
}

// ledger records every send: when it was sent, whether and when it was acknowledged.
type ledger struct {
	mu      sync.Mutex
	sentAt  []time.Time
	ackedAt []time.Time // zero: not (yet) acknowledged
	err     error
}

func newLedger() *ledger { return &ledger{} }

// produce sends sequence numbers 0, 1, 2, ... every sendEvery until ctx ends.
// Produce blocks when the client's buffer is full, which is then the pace.
func (l *ledger) produce(ctx context.Context, cl *kgo.Client) {
	t := time.NewTicker(sendEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		seq := uint64(len(l.sentAt))
		l.sentAt = append(l.sentAt, time.Now())
		l.ackedAt = append(l.ackedAt, time.Time{})
		l.mu.Unlock()
		v := binary.BigEndian.AppendUint64(nil, seq)
		// Not ctx: a record already handed over must finish (ack or error), not be cancelled by the stop.
		cl.Produce(context.WithoutCancel(ctx), &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if err != nil {
				if l.err == nil {
					l.err = fmt.Errorf("record #%d: %w", seq, err)
				}
				return
			}
			l.ackedAt[seq] = time.Now()
		})
	}
}

func (l *ledger) firstError() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *ledger) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, t := range l.ackedAt {
		if !t.IsZero() {
			n++
		}
	}
	return n
}

// firstAckAfter returns the earliest acknowledgement after t (zero if none).
func (l *ledger) firstAckAfter(t time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for _, a := range l.ackedAt {
		if a.After(t) && (first.IsZero() || a.Before(first)) {
			first = a
		}
	}
	return first
}

// summary returns the acknowledged sequence numbers and the longest wait
// between a send and its acknowledgement.
func (l *ledger) summary() (acked []uint64, maxWait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for seq, a := range l.ackedAt {
		if a.IsZero() {
			continue
		}
		acked = append(acked, uint64(seq))
		maxWait = max(maxWait, a.Sub(l.sentAt[seq]))
	}
	return acked, maxWait
}

// readAll reads the topic from its start to the end offset it has now and
// returns how often each sequence number occurs.
func readAll(ctx context.Context, cl *kgo.Client, adm *kadm.Client, brokers []string, topic string) (map[uint64]int, error) {
	var ends kadm.ListedOffsets
	if err := within(ctx, 15*time.Second, func(ctx context.Context) (err error) {
		ends, err = adm.ListEndOffsets(ctx, topic)
		return err
	}); err != nil {
		return nil, fmt.Errorf("end offsets: %w", err)
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || end.Err != nil {
		return nil, fmt.Errorf("end offset of %s: %v", topic, end.Err)
	}
	ccl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer ccl.Close()
	seen := map[uint64]int{}
	next := int64(0)
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for next < end.Offset {
		fs := ccl.PollFetches(rctx)
		if err := rctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %s back: at offset %d of %d: %w", topic, next, end.Offset, err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return nil, fmt.Errorf("reading %s back: %w", topic, errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) == 8 {
				seen[binary.BigEndian.Uint64(r.Value)]++
			}
			next = r.Offset + 1
		})
	}
	return seen, nil
}

// compareLedger returns the acknowledged sequence numbers absent from read
// and how many extra copies read holds of any record.
func compareLedger(acked []uint64, read map[uint64]int) (missing []uint64, duplicates int) {
	for _, seq := range acked {
		if read[seq] == 0 {
			missing = append(missing, seq)
		}
	}
	for _, n := range read {
		duplicates += n - 1
	}
	return missing, duplicates
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "unset"
	}
	return *s
}
