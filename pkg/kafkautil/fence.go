package kafkautil

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupMember is a consumer group member in one generation of its group
// (kgo.Client.GroupMetadata, with the group and the static instance id).
type GroupMember struct {
	Group, MemberID, InstanceID string
	Generation                  int32
}

// FenceByGroup makes cl's open transaction commit only if m is still a
// member of its group's current generation: it adds to the transaction an
// offset commit in m's group (offset 0 of partition 0 of topic, a topic
// that carries no records), which the group's coordinator refuses once the
// group moved to another generation or forgot the member (KIP-447). An
// error means the transaction must be aborted.
//
// It is how a transactional producer that is not itself the group's
// consumer is held to the group's ownership of partitions: the member's
// instance commits only while the generation in which it owns them lasts.
// txnID is cl's transactional id.
func FenceByGroup(ctx context.Context, cl *kgo.Client, txnID string, m GroupMember, topic string) error {
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("group fence: producer id: %w", err)
	}
	// Brokers before KIP-890's second phase add a group to a transaction
	// only by this request; later ones accept it too.
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, id, epoch, m.Group
	added, err := add.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(added.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("group fence: add group %s to the transaction: %w", m.Group, err)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = txnID, m.Group, id, epoch
	commit.Generation, commit.MemberID = m.Generation, m.MemberID
	if m.InstanceID != "" {
		commit.InstanceID = kmsg.StringPtr(m.InstanceID)
	}
	part := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	part.Partition, part.Offset, part.LeaderEpoch = 0, 0, -1
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic, t.Partitions = topic, []kmsg.TxnOffsetCommitRequestTopicPartition{part}
	commit.Topics = []kmsg.TxnOffsetCommitRequestTopic{t}
	resp, err := commit.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("group fence: commit in group %s: %w", m.Group, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("group fence: member %s of generation %d of group %s: %w", m.MemberID, m.Generation, m.Group, err)
			}
		}
	}
	return nil
}
