package stream

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

const chain = 43112

func hash(n uint64, branch byte) []byte {
	h := make([]byte, 32)
	h[0], h[31] = branch, byte(n)
	return h
}

func tx(n uint64, i int) []byte { return []byte(fmt.Sprintf("tx-%d-%d-%026d", n, i, 0))[:32] }

// msg is the activity of tx i of block (n, branch) for webhook w.
func msg(w string, n uint64, branch byte, i int) *record.Activity {
	t := tx(n, i)
	return &record.Activity{WebhookId: w, AccountId: "acc", MessageId: codec.ActivityMessageID(w, chain, t), ChainId: chain,
		BlockNumber: n, BlockHash: hash(n, branch), TxHash: t, Payload: []byte(`{}`)}
}

// seen is what a receiver records of one message.
type seen struct {
	seq       uint64
	id        string
	retracts  string
	blockHash byte
}

func out(b *Batch) []seen {
	var s []seen
	for _, m := range b.Out() {
		s = append(s, seen{m.GetSequence(), m.GetMessageId(), m.GetRetractedMessageId(), m.GetBlockHash()[0]})
	}
	return s
}

func conf(n uint32) func(string) uint32 { return func(string) uint32 { return n } }

// TestConfirmationsZeroRetracts: messages go out at once, numbered 1, 2,
// ...; a reorg retracts each with its own numbered message naming the
// original, and a transaction included again is delivered again with its
// messageId and a new number.
func TestConfirmationsZeroRetracts(t *testing.T) {
	s := New(256, nil)
	b := s.Begin(1)
	b.Block(100, chain, 10, hash(10, 'a'), []*record.Activity{msg("w", 10, 'a', 0), msg("w", 10, 'a', 1)}, conf(0))
	b.Block(101, chain, 11, hash(11, 'a'), []*record.Activity{msg("w", 11, 'a', 0)}, conf(0))
	id0, id1, id2 := msg("w", 10, 'a', 0).MessageId, msg("w", 10, 'a', 1).MessageId, msg("w", 11, 'a', 0).MessageId
	require.Equal(t, []seen{{1, id0, "", 'a'}, {2, id1, "", 'a'}, {3, id2, "", 'a'}}, out(b))
	s.Commit(b)

	b = s.Begin(2)
	require.NoError(t, b.Reorg(102, &record.Reorg{ChainId: chain, ForkNumber: 10, Orphaned: []*record.OrphanedBlock{
		{Number: 11, Hash: hash(11, 'a')}, {Number: 10, Hash: hash(10, 'a')}}}))
	// The new branch includes tx 0 of block 10 again, in block 10'.
	again := msg("w", 10, 'b', 0)
	again.TxHash, again.MessageId = tx(10, 0), id0
	b.Block(103, chain, 10, hash(10, 'b'), []*record.Activity{again}, conf(0))
	got := out(b)
	require.Len(t, got, 4)
	require.Equal(t, seen{4, codec.RetractionMessageID(id0, hash(10, 'a')), id0, 'a'}, got[0], "retractions in block order")
	require.Equal(t, seen{5, codec.RetractionMessageID(id1, hash(10, 'a')), id1, 'a'}, got[1])
	require.Equal(t, seen{6, codec.RetractionMessageID(id2, hash(11, 'a')), id2, 'a'}, got[2])
	require.Equal(t, seen{7, id0, "", 'b'}, got[3])
	r := b.Out()[0]
	require.Equal(t, record.ActivityKind_ACTIVITY_KIND_RETRACTION, r.GetKind())
	var body map[string]any
	require.NoError(t, json.Unmarshal(r.GetPayload(), &body))
	require.Equal(t, "address_activity_retraction", body["eventType"])
	require.Equal(t, id0, body["event"].(map[string]any)["retractedMessageId"])
}

// TestConfirmationsHoldUntilConfirmed: with confirmations 2 a block's
// messages go out when block number+2 is matched; a reorg before that
// drops them (an orphaned block's activity is never delivered), and one
// after it retracts them.
func TestConfirmationsHoldUntilConfirmed(t *testing.T) {
	s := New(256, nil)
	b := s.Begin(1)
	b.Block(1, chain, 10, hash(10, 'a'), []*record.Activity{msg("w", 10, 'a', 0)}, conf(2))
	b.Block(2, chain, 11, hash(11, 'a'), []*record.Activity{msg("w", 11, 'a', 0)}, conf(2))
	require.Empty(t, b.Out())
	b.Block(3, chain, 12, hash(12, 'a'), nil, conf(2))
	require.Equal(t, []seen{{1, msg("w", 10, 'a', 0).MessageId, "", 'a'}}, out(b))
	s.Commit(b)
	_, pending := s.Sizes()
	require.Equal(t, 1, pending, "block 11 still waits")

	// Block 11 is orphaned before its second confirmation: dropped.
	b = s.Begin(2)
	require.NoError(t, b.Reorg(4, &record.Reorg{ChainId: chain, ForkNumber: 11, Orphaned: []*record.OrphanedBlock{
		{Number: 11, Hash: hash(11, 'a')}, {Number: 12, Hash: hash(12, 'a')}}}))
	require.Empty(t, b.Out())
	b.Block(5, chain, 11, hash(11, 'b'), nil, conf(2))
	b.Block(6, chain, 12, hash(12, 'b'), nil, conf(2))
	b.Block(7, chain, 13, hash(13, 'b'), nil, conf(2))
	require.Empty(t, b.Out(), "the orphaned block's message was delivered")
	// A reorg deeper than the confirmations retracts block 10's message.
	require.NoError(t, b.Reorg(8, &record.Reorg{ChainId: chain, ForkNumber: 10, Orphaned: []*record.OrphanedBlock{
		{Number: 10, Hash: hash(10, 'a')}, {Number: 11, Hash: hash(11, 'b')}, {Number: 12, Hash: hash(12, 'b')}, {Number: 13, Hash: hash(13, 'b')}}}))
	id := msg("w", 10, 'a', 0).MessageId
	require.Equal(t, []seen{{2, codec.RetractionMessageID(id, hash(10, 'a')), id, 'a'}}, out(b))
	s.Commit(b)
	emitted, pending := s.Sizes()
	require.Zero(t, emitted)
	require.Zero(t, pending)
}

// TestStateSurvivesOwnerChange: a batch's records, read back by another
// instance's State, continue the numbering and keep what waits and what
// can be retracted; an aborted batch changes nothing.
func TestStateSurvivesOwnerChange(t *testing.T) {
	a := New(256, nil)
	b := a.Begin(1)
	b.Block(1, chain, 10, hash(10, 'a'), []*record.Activity{msg("w", 10, 'a', 0), msg("x", 10, 'a', 0)},
		func(w string) uint32 { return map[string]uint32{"x": 3}[w] })
	recs, err := b.Records("activity", "stream")
	require.NoError(t, err)
	a.Commit(b)

	// Another instance reads the topic.
	other := New(256, nil)
	var activity int
	for _, r := range recs {
		if r.Topic == "stream" {
			other.ApplyRecord(r)
		} else {
			activity++
		}
	}
	require.Equal(t, 1, activity)
	require.Equal(t, uint64(1), other.Sequence("w"))
	e, p := other.Sizes()
	require.Equal(t, 1, e)
	require.Equal(t, 1, p)

	// An aborted batch on the new owner: nothing changes, and the retry
	// numbers the same way.
	for range 2 {
		nb := other.Begin(2)
		nb.Block(2, chain, 11, hash(11, 'a'), []*record.Activity{msg("w", 11, 'a', 0)}, conf(0))
		require.Equal(t, uint64(2), nb.Out()[0].GetSequence())
		other.Abort(nb)
	}
	nb := other.Begin(3)
	nb.Block(2, chain, 11, hash(11, 'a'), nil, func(w string) uint32 { return map[string]uint32{"x": 3}[w] })
	nb.Block(3, chain, 12, hash(12, 'a'), nil, func(w string) uint32 { return map[string]uint32{"x": 3}[w] })
	require.Empty(t, nb.Out())
	nb.Block(4, chain, 13, hash(13, 'a'), nil, func(w string) uint32 { return map[string]uint32{"x": 3}[w] })
	require.Equal(t, []seen{{1, msg("x", 10, 'a', 0).MessageId, "", 'a'}}, out(nb), "the pending message, released by the new owner")
	require.NoError(t, nb.Reorg(5, &record.Reorg{ChainId: chain, ForkNumber: 10, Orphaned: []*record.OrphanedBlock{{Number: 10, Hash: hash(10, 'a')}}}))
	got := out(nb)[1:]
	require.Len(t, got, 2, "both webhooks' messages of block 10 are retracted")
	require.Equal(t, uint64(2), got[0].seq) // w: 1 was its activity
	require.Equal(t, uint64(2), got[1].seq) // x: 1 was its released activity
}

// TestStaleStreamRecordIsDropped: the reader's late copy of a key does not
// undo this instance's newer commit.
func TestStaleStreamRecordIsDropped(t *testing.T) {
	s := New(256, nil)
	b := s.Begin(1)
	b.Block(1, chain, 10, hash(10, 'a'), []*record.Activity{msg("w", 10, 'a', 0)}, conf(0))
	first, err := b.Records("activity", "stream")
	require.NoError(t, err)
	s.Commit(b)
	b = s.Begin(2)
	b.Block(2, chain, 11, hash(11, 'a'), []*record.Activity{msg("w", 11, 'a', 0)}, conf(0))
	s.Commit(b)
	for _, r := range first {
		if r.Topic == "stream" {
			s.ApplyRecord(r)
		}
	}
	require.Equal(t, uint64(2), s.Sequence("w"))
}

// TestWindowPrunes: emitted entries leave the state once the head is the
// window past them (tombstones are produced), so a reorg reported later
// retracts nothing.
func TestWindowPrunes(t *testing.T) {
	s := New(4, nil)
	b := s.Begin(1)
	b.Block(1, chain, 10, hash(10, 'a'), []*record.Activity{msg("w", 10, 'a', 0)}, conf(0))
	for n := uint64(11); n <= 14; n++ {
		b.Block(n, chain, n, hash(n, 'a'), nil, conf(0))
	}
	recs, err := b.Records("activity", "stream")
	require.NoError(t, err)
	var tomb *kgo.Record
	for _, r := range recs {
		if string(r.Key) == codec.StreamEmittedKey(chain, hash(10, 'a')) {
			tomb = r
		}
	}
	require.NotNil(t, tomb)
	require.Nil(t, tomb.Value, "the emitted entry is tombstoned")
	s.Commit(b)
	e, _ := s.Sizes()
	require.Zero(t, e)
	// What is remembered stays as few as the live keys: the pruned block's
	// version is forgotten, the webhook's sequence is kept.
	require.Equal(t, 1, s.versionsKept())
	// The reader's copy of the records, the tombstone last, leaves the same.
	for _, r := range recs {
		if r.Topic == "stream" {
			s.ApplyRecord(r)
		}
	}
	e, _ = s.Sizes()
	require.Zero(t, e)
	require.Equal(t, uint64(1), s.Sequence("w"))
}

// TestReplayedMessages: a replay's retransmissions keep their numbers; its
// new messages continue the webhook's sequence after the live ones, and
// those of blocks a reorg can still orphan are recorded like live ones, so
// a reorg retracts them; the job's progress is part of the batch.
func TestReplayedMessages(t *testing.T) {
	s := New(256, nil)
	b := s.Begin(1)
	b.Block(100, chain, 10, hash(10, 'a'), []*record.Activity{msg("w", 10, 'a', 0), msg("w", 10, 'a', 1)}, conf(0))
	s.Commit(b)

	r := s.Begin(2)
	r.Hold()
	again := msg("w", 10, 'a', 0)
	again.Sequence, again.Retransmission = 1, true
	recent, old := msg("w", 11, 'a', 0), msg("w", 3, 'a', 0)
	r.Replayed([]*record.Activity{again, old, recent}, func(n uint64) bool { return n >= 10 })
	r.SetReplay(&record.ReplayProgress{ReplayId: "job", WebhookId: "w", ChainId: chain, NextBlock: 12, Chunks: 1})
	require.Equal(t, []uint64{1, 3, 4}, []uint64{r.Out()[0].GetSequence(), r.Out()[1].GetSequence(), r.Out()[2].GetSequence()})
	recs, err := r.Records("replay", "streams")
	require.NoError(t, err)
	var keys []string
	for _, rec := range recs {
		if rec.Topic == "streams" {
			keys = append(keys, string(rec.Key))
		}
	}
	require.ElementsMatch(t, []string{codec.StreamSequenceKey("w"), codec.StreamEmittedKey(chain, hash(11, 'a')), codec.StreamReplayKey("job")}, keys,
		"the sequence, the recent block's emitted entry and the progress; nothing for the old block")
	s.Commit(r)
	require.Equal(t, uint64(4), s.Sequence("w"))
	require.Equal(t, uint64(12), s.Replay("job").GetNextBlock())

	// A reorg of block 11 retracts the replay's message of it.
	b = s.Begin(3)
	require.NoError(t, b.Reorg(101, &record.Reorg{ChainId: chain, ForkNumber: 11, Orphaned: []*record.OrphanedBlock{{Number: 11, Hash: hash(11, 'a')}}}))
	require.Equal(t, []seen{{5, codec.RetractionMessageID(recent.GetMessageId(), hash(11, 'a')), recent.GetMessageId(), 'a'}}, out(b))
	require.Equal(t, uint64(0), s.Reorgs(chain), "counted once committed")
	s.Commit(b)
	require.Equal(t, uint64(1), s.Reorgs(chain))
	b = s.Begin(4)
	require.NoError(t, b.Reorg(102, &record.Reorg{ChainId: chain, ForkNumber: 10, Orphaned: []*record.OrphanedBlock{{Number: 10, Hash: hash(10, 'a')}}}))
	s.Abort(b)
	require.Equal(t, uint64(1), s.Reorgs(chain), "an aborted reorg batch is not counted")
}

// TestNumberingTakesTurns: a batch that has numbered holds the webhooks'
// numbers until it commits or aborts; another batch (a replay) numbers
// only then, from what the first committed.
func TestNumberingTakesTurns(t *testing.T) {
	s := New(256, nil)
	live := s.Begin(1)
	live.Block(100, chain, 10, hash(10, 'a'), []*record.Activity{msg("w", 10, 'a', 0)}, conf(0))
	numbered := make(chan uint64)
	go func() {
		r := s.Begin(2)
		r.Replayed([]*record.Activity{msg("w", 3, 'a', 0)}, func(uint64) bool { return false })
		numbered <- r.Out()[0].GetSequence()
		s.Commit(r)
	}()
	select {
	case n := <-numbered:
		t.Fatalf("the replay numbered %d while the live batch was open", n)
	case <-time.After(100 * time.Millisecond):
	}
	s.Commit(live)
	require.Equal(t, uint64(2), <-numbered, "after the live batch's 1")
}

// TestTransactionInDoubt: a batch whose transaction's end failed may have
// committed. The next batch to number finds the state in doubt (Doubted):
// its numbers may repeat the ones that committed, so its owner aborts it;
// once a catch-up made while holding the lock has applied the committed
// records (Settled), a new batch numbers after them.
func TestTransactionInDoubt(t *testing.T) {
	s := New(256, nil)
	live := s.Begin(1)
	live.Block(1, chain, 10, hash(10, 'a'), []*record.Activity{msg("w", 10, 'a', 0)}, conf(0))
	committed, err := live.Records("activity", "stream")
	require.NoError(t, err)
	s.AbortInDoubt(live) // it did commit: its records are on the topic
	require.True(t, s.InDoubt())
	catchUp := func() {
		for _, rec := range committed {
			if rec.Topic == "stream" {
				s.ApplyRecord(rec)
			}
		}
	}

	// Numbering first: the batch is doubted, and stays so after the
	// state is settled under it.
	r := s.Begin(2)
	r.Replayed([]*record.Activity{msg("w", 3, 'a', 0)}, func(uint64) bool { return false })
	require.Equal(t, uint64(1), r.Out()[0].GetSequence(), "numbered from a state without the committed transaction")
	require.True(t, r.Doubted(), "and so it must not commit")
	catchUp()
	s.Settled(r)
	require.True(t, r.Doubted())
	require.False(t, s.InDoubt())
	s.Abort(r)
	r = s.Begin(3)
	r.Replayed([]*record.Activity{msg("w", 3, 'a', 0)}, func(uint64) bool { return false })
	require.False(t, r.Doubted())
	require.Equal(t, uint64(2), r.Out()[0].GetSequence(), "after what committed")
	s.Abort(r)

	// Holding the lock first, then settling: the same batch numbers.
	s.AbortInDoubt(func() *Batch { b := s.Begin(4); b.Hold(); return b }())
	r = s.Begin(5)
	r.Hold()
	require.True(t, r.Doubted())
	catchUp()
	s.Settled(r)
	require.False(t, r.Doubted())
	r.Replayed([]*record.Activity{msg("w", 3, 'a', 0)}, func(uint64) bool { return false })
	require.Equal(t, uint64(2), r.Out()[0].GetSequence())
	s.Commit(r)

	// A plain abort leaves no doubt; neither does AbortInDoubt of a batch
	// that never held the lock (it numbered nothing).
	b := s.Begin(6)
	b.Block(2, chain, 11, hash(11, 'a'), []*record.Activity{msg("w", 11, 'a', 0)}, conf(0))
	s.Abort(b)
	s.AbortInDoubt(s.Begin(7))
	require.False(t, s.InDoubt())
	b = s.Begin(8)
	b.Block(3, chain, 12, hash(12, 'a'), []*record.Activity{msg("w", 12, 'a', 0)}, conf(0))
	require.False(t, b.Doubted())
	require.Equal(t, uint64(3), b.Out()[0].GetSequence())
	s.Commit(b)
}
