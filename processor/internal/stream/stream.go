package stream

import (
	"bytes"
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/watch"
	"github.com/moraine-data/moraine/processor/internal/payload"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// State is what this instance knows of every webhook's stream: the
// committed state on the webhook-stream topic plus its own commits. It is
// safe for one reader goroutine (ApplyRecord) and the matcher (Begin,
// Commit) at once.
type State struct {
	window uint64
	logger *slog.Logger

	mu       sync.Mutex
	versions *watch.Versions
	seq      map[string]uint64
	emitted  map[string]*record.EmittedBlock
	pending  map[string]*record.PendingBlock
	replays  map[string]*record.ReplayProgress

	// numbering is held by a batch from the first change it makes to a
	// sequence or to what a reorg retracts, until its Commit or Abort: the
	// matcher's transactions and the replays' (package replay) write the
	// same webhooks' sequences and blocks' emitted entries, each on top of
	// what the state holds when it starts, so one must end before the other
	// starts.
	numbering sync.Mutex
	// inDoubt: a batch that held the numbering lock ended without knowing
	// whether its transaction committed (AbortInDoubt). If it did, its
	// numbers are on the topic but not here, so the next holder must catch
	// the state up before its numbers can be committed (Settled, Doubted).
	// Guarded by mu.
	inDoubt bool
	// reorgs counts the committed batches that handled a reorg marker, per
	// chain: a replay that derived its messages from ClickHouse before one
	// derives them again (package replay).
	reorgs map[uint64]uint64
}

// New returns an empty state; window is the retraction window in blocks.
func New(window uint64, logger *slog.Logger) *State {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &State{
		window: window, logger: logger.With("component", "stream"), versions: watch.NewVersions(),
		seq: map[string]uint64{}, emitted: map[string]*record.EmittedBlock{}, pending: map[string]*record.PendingBlock{},
		replays: map[string]*record.ReplayProgress{}, reorgs: map[uint64]uint64{},
	}
}

// ApplyRecord applies one webhook-stream record (the TableReader callback)
// by the rule of watch.Versions. An undecodable record is logged and its
// key dropped.
func (s *State) ApplyRecord(r *kgo.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.versions.AdmitRecord(r) {
		return
	}
	key := string(r.Key)
	if err := s.apply(key, r.Value); err != nil {
		s.logger.Warn("malformed webhook-stream record; its key is dropped", "partition", r.Partition, "offset", r.Offset, "err", err)
		delete(s.seq, key)
		delete(s.emitted, key)
		delete(s.pending, key)
		delete(s.replays, key)
	}
}

// apply sets key to the decoded value (nil: delete). Called under s.mu.
func (s *State) apply(key string, value []byte) error {
	kind, err := codec.ParseStreamKey(key)
	if err != nil {
		return err
	}
	if value == nil {
		switch kind {
		case codec.StreamKeySequence:
			delete(s.seq, key)
		case codec.StreamKeyReplay:
			delete(s.replays, key)
		case codec.StreamKeyEmitted, codec.StreamKeyPending:
			delete(s.emitted, key)
			delete(s.pending, key)
			// A block's keys never come back once tombstoned (the block
			// left the window, was released or orphaned), so its version
			// is forgotten and the versions stay as few as the live keys;
			// the catch-up before each batch orders what the reader
			// applies after.
			s.versions.Forget([]byte(key))
		}
		return nil
	}
	e, err := codec.DecodeStreamEntry(value)
	if err != nil {
		return err
	}
	switch {
	case kind == codec.StreamKeySequence && e.GetSequence() != nil:
		s.seq[key] = e.GetSequence().GetLast()
	case kind == codec.StreamKeyEmitted && e.GetEmitted() != nil:
		s.emitted[key] = e.GetEmitted()
	case kind == codec.StreamKeyPending && e.GetPending() != nil:
		s.pending[key] = e.GetPending()
	case kind == codec.StreamKeyReplay && e.GetReplay() != nil:
		s.replays[key] = e.GetReplay()
	default:
		return fmt.Errorf("webhook-stream key %q holds a %T", key, e.GetEntry())
	}
	return nil
}

// HasChain reports whether the state holds anything of chain: a chain
// nobody watches any more may still have messages to release or retract.
func (s *State) HasChain(chain uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.emitted {
		if e.GetChainId() == chain {
			return true
		}
	}
	for _, p := range s.pending {
		if p.GetChainId() == chain {
			return true
		}
	}
	return false
}

// Sequence is a webhook's last sequence number as committed.
func (s *State) Sequence(webhookID string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq[codec.StreamSequenceKey(webhookID)]
}

// Replay is a replay job's committed progress (nil: none yet).
func (s *State) Replay(replayID string) *record.ReplayProgress {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replays[codec.StreamReplayKey(replayID)]
}

// versionsKept is how many keys' versions the state remembers.
func (s *State) versionsKept() int { return s.versions.Len() }

// Sizes are the numbers of emitted and pending entries (metrics).
func (s *State) Sizes() (emitted, pending int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.emitted), len(s.pending)
}

// Begin starts a batch: the changes of one matcher transaction. now stamps
// the retractions' MatchedAtUnixMs.
func (s *State) Begin(now int64) *Batch {
	return &Batch{
		s: s, now: now, seq: map[string]uint64{}, emitted: map[string]*record.EmittedBlock{},
		pending: map[string]*record.PendingBlock{}, replays: map[string]*record.ReplayProgress{}, versions: map[string]uint64{},
		seqHook: map[string]string{}, dirty: map[string]bool{},
	}
}

// Commit applies a committed batch's changes and ends it.
func (s *State) Commit(b *Batch) {
	defer b.unhold()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range b.order {
		if !s.versions.Admit([]byte(key), b.versions[key]) {
			continue // the reader already applied a newer record
		}
		if v, ok := b.seq[key]; ok {
			s.seq[key] = v
		}
		if e, ok := b.emitted[key]; ok {
			if e == nil {
				delete(s.emitted, key)
				s.versions.Forget([]byte(key))
			} else {
				s.emitted[key] = e
			}
		}
		if p, ok := b.pending[key]; ok {
			if p == nil {
				delete(s.pending, key)
				s.versions.Forget([]byte(key))
			} else {
				s.pending[key] = p
			}
		}
		if r, ok := b.replays[key]; ok {
			s.replays[key] = r
		}
	}
	for chain := range b.reorged {
		s.reorgs[chain]++
	}
}

// Reorgs is how many batches that handled a reorg marker of chain this
// instance committed.
func (s *State) Reorgs(chain uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reorgs[chain]
}

// Abort ends a batch whose transaction did not commit: its changes are
// dropped.
func (s *State) Abort(b *Batch) { b.unhold() }

// AbortInDoubt ends a batch whose transaction may have committed (its end
// failed, and nothing read since says how it ended): its changes are
// dropped, and the state is in doubt until a holder of the numbering lock
// catches it up from the topic (Settled). Catching up reads to the topic's
// end, which the transaction's records are below, so it waits until the
// transaction is committed or aborted.
func (s *State) AbortInDoubt(b *Batch) {
	if b.held {
		s.mu.Lock()
		s.inDoubt = true
		s.mu.Unlock()
	}
	b.unhold()
}

// InDoubt reports whether a transaction's end is in doubt (AbortInDoubt)
// and no catch-up has settled it yet.
func (s *State) InDoubt() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inDoubt
}

// Settled is called by a batch that holds the numbering lock once a
// catch-up that began while it held it has finished: the state now holds
// how every earlier transaction ended. A batch that had changed nothing
// yet may then number and commit (Doubted is false).
func (s *State) Settled(b *Batch) {
	if !b.held {
		return
	}
	s.mu.Lock()
	s.inDoubt = false
	s.mu.Unlock()
	if len(b.order) == 0 {
		b.doubted = false
	}
}

// Batch is one transaction's changes on top of the State. Not safe for
// concurrent use.
type Batch struct {
	s   *State
	now int64
	// Overlays: a key present maps to its new value (nil: deleted).
	seq      map[string]uint64
	emitted  map[string]*record.EmittedBlock
	pending  map[string]*record.PendingBlock
	versions map[string]uint64
	replays  map[string]*record.ReplayProgress
	// seqHook is the webhook id of each seq: key the batch changed.
	seqHook map[string]string
	// held: the batch holds the state's numbering lock; doubted: it took
	// the lock while the state was in doubt and has not settled it.
	held, doubted bool
	// reorged are the chains whose reorg markers the batch handled.
	reorged map[uint64]bool
	// order lists changed keys in first-change order; flushed is how many
	// of the out messages and which keys Records has already returned.
	order      []string
	dirty      map[string]bool
	out        []*record.Activity
	flushedOut int
}

// Out is the messages the batch produced so far, in stream order.
func (b *Batch) Out() []*record.Activity { return b.out }

func (b *Batch) touch(key string, version uint64) {
	if _, ok := b.versions[key]; !ok {
		b.order = append(b.order, key)
	}
	b.versions[key] = version
	b.dirty[key] = true
}

// Hold takes the state's numbering lock for the rest of the batch (until
// Commit or Abort): a replay holds it while it checks that no reorg
// happened since it read its blocks, numbers and commits.
func (b *Batch) Hold() { b.hold() }

// hold takes the state's numbering lock for the rest of the batch, before
// its first change to a sequence or to what a reorg retracts.
func (b *Batch) hold() {
	if !b.held {
		b.s.numbering.Lock()
		b.held = true
		b.s.mu.Lock()
		b.doubted = b.s.inDoubt
		b.s.mu.Unlock()
	}
}

// Doubted reports whether the batch took the numbering lock while another
// transaction's end was in doubt and has not settled it (State.Settled)
// before changing anything: its numbers may repeat ones that transaction
// committed, so it must not commit. Its owner aborts it, settles the state
// and builds it again.
func (b *Batch) Doubted() bool { return b.doubted }

func (b *Batch) unhold() {
	if b.held {
		b.held = false
		b.s.numbering.Unlock()
	}
}

func (b *Batch) nextSeq(webhookID string) uint64 {
	b.hold()
	key := codec.StreamSequenceKey(webhookID)
	v, ok := b.seq[key]
	if !ok {
		b.s.mu.Lock()
		v = b.s.seq[key]
		b.s.mu.Unlock()
	}
	v++
	b.seq[key] = v
	b.seqHook[key] = webhookID
	b.touch(key, v)
	return v
}

// emittedEntry returns the batch's copy of a block's emitted entry (nil if
// none), copying the state's on first use.
func (b *Batch) emittedEntry(key string) *record.EmittedBlock {
	if e, ok := b.emitted[key]; ok {
		return e
	}
	b.s.mu.Lock()
	e := b.s.emitted[key]
	b.s.mu.Unlock()
	if e == nil {
		return nil
	}
	c := &record.EmittedBlock{ChainId: e.GetChainId(), Number: e.GetNumber(), Hash: e.GetHash(), Messages: slices.Clone(e.GetMessages())}
	b.emitted[key] = c
	return c
}

// emit numbers msg and records it under its block's emitted entry.
func (b *Batch) emit(msg *record.Activity, version uint64) {
	msg.Sequence = b.nextSeq(msg.GetWebhookId())
	b.out = append(b.out, msg)
	key := codec.StreamEmittedKey(msg.GetChainId(), msg.GetBlockHash())
	e := b.emittedEntry(key)
	if e == nil {
		e = &record.EmittedBlock{ChainId: msg.GetChainId(), Number: msg.GetBlockNumber(), Hash: msg.GetBlockHash()}
		b.emitted[key] = e
	}
	e.Messages = append(e.Messages, &record.EmittedMessage{
		WebhookId: msg.GetWebhookId(), AccountId: msg.GetAccountId(), MessageId: msg.GetMessageId(), TxHash: msg.GetTxHash(),
	})
	b.touch(key, version)
}

// Block takes the messages matched in one block (in transaction, then
// webhook order; Sequence unset), produced from the blocks-topic record at
// offset version. confirmations gives each webhook's setting. Messages of
// webhooks without confirmations are produced at once; the others wait.
// Then every pending message the new head confirms is produced, and
// emitted entries that left the retraction window are dropped.
func (b *Batch) Block(version, chain, number uint64, hash []byte, msgs []*record.Activity, confirmations func(webhookID string) uint32) {
	for _, msg := range msgs {
		if confirmations(msg.GetWebhookId()) == 0 {
			b.emit(msg, version)
			continue
		}
		key := codec.StreamPendingKey(chain, hash, msg.GetWebhookId())
		p := b.pendingEntry(key)
		if p == nil {
			p = &record.PendingBlock{ChainId: chain, Number: number, Hash: hash, WebhookId: msg.GetWebhookId()}
			b.pending[key] = p
		}
		// A block record read twice (ingest's redelivery) matches the same
		// transactions: keep each message once.
		if !slices.ContainsFunc(p.Messages, func(m *record.Activity) bool { return m.GetMessageId() == msg.GetMessageId() }) {
			p.Messages = append(p.Messages, msg)
		}
		b.touch(key, version)
	}
	b.release(version, chain, number, confirmations)
	b.prune(version, chain, number)
}

func (b *Batch) pendingEntry(key string) *record.PendingBlock {
	if p, ok := b.pending[key]; ok {
		return p
	}
	b.s.mu.Lock()
	p := b.s.pending[key]
	b.s.mu.Unlock()
	if p == nil {
		return nil
	}
	c := &record.PendingBlock{ChainId: p.GetChainId(), Number: p.GetNumber(), Hash: p.GetHash(), WebhookId: p.GetWebhookId(),
		Messages: slices.Clone(p.GetMessages())}
	b.pending[key] = c
	return c
}

// pendingKeys returns the keys of chain's pending entries (the batch's
// over the state's) that keep selects, by block number, then key.
func (b *Batch) pendingKeys(chain uint64, keep func(*record.PendingBlock) bool) []string {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	return selectKeys(b.s.pending, b.pending, func(p *record.PendingBlock) (uint64, bool) {
		return p.GetNumber(), p.GetChainId() == chain && keep(p)
	})
}

// emittedKeys is pendingKeys for emitted entries.
func (b *Batch) emittedKeys(chain uint64, keep func(*record.EmittedBlock) bool) []string {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	return selectKeys(b.s.emitted, b.emitted, func(e *record.EmittedBlock) (uint64, bool) {
		return e.GetNumber(), e.GetChainId() == chain && keep(e)
	})
}

// selectKeys merges a state map and its overlay (a nil value: deleted) and
// returns the keys sel selects, ordered by the number it gives, then key.
func selectKeys[E comparable](state, overlay map[string]E, sel func(E) (uint64, bool)) []string {
	type kn struct {
		key string
		n   uint64
	}
	var zero E
	var out []kn
	for k, e := range overlay {
		if e == zero {
			continue
		}
		if n, ok := sel(e); ok {
			out = append(out, kn{k, n})
		}
	}
	for k, e := range state {
		if _, shadowed := overlay[k]; shadowed {
			continue
		}
		if n, ok := sel(e); ok {
			out = append(out, kn{k, n})
		}
	}
	slices.SortFunc(out, func(x, y kn) int { return cmp.Or(cmp.Compare(x.n, y.n), cmp.Compare(x.key, y.key)) })
	keys := make([]string, len(out))
	for i, x := range out {
		keys[i] = x.key
	}
	return keys
}

// release produces the pending messages of chain that head confirms.
func (b *Batch) release(version, chain, head uint64, confirmations func(string) uint32) {
	due := func(p *record.PendingBlock) bool {
		return p.GetNumber()+uint64(confirmations(p.GetWebhookId())) <= head
	}
	for _, key := range b.pendingKeys(chain, due) {
		p := b.pendingEntry(key)
		for _, msg := range p.GetMessages() {
			b.emit(msg, version)
		}
		b.pending[key] = nil
		b.touch(key, version)
	}
}

// prune drops the emitted entries of chain the retraction window left.
func (b *Batch) prune(version, chain, head uint64) {
	old := func(e *record.EmittedBlock) bool { return e.GetNumber()+b.s.window <= head }
	for _, key := range b.emittedKeys(chain, old) {
		b.emitted[key] = nil
		b.touch(key, version)
	}
}

// Reorg handles a reorg marker read at offset version: every message
// delivered for an orphaned block is followed by its retraction, and the
// orphaned blocks' pending messages are dropped.
func (b *Batch) Reorg(version uint64, r *record.Reorg) error {
	// What a replay added to an orphaned block's entry must be retracted
	// too: read the entries only once no replay can change them.
	b.hold()
	chain := r.GetChainId()
	if b.reorged == nil {
		b.reorged = map[uint64]bool{}
	}
	b.reorged[chain] = true
	orphaned := slices.Clone(r.GetOrphaned())
	slices.SortFunc(orphaned, func(x, y *record.OrphanedBlock) int { return cmp.Compare(x.GetNumber(), y.GetNumber()) })
	for _, o := range orphaned {
		key := codec.StreamEmittedKey(chain, o.GetHash())
		if e := b.emittedEntry(key); e != nil {
			for _, m := range e.GetMessages() {
				body, id, err := payload.Retraction(payload.Retracted{
					WebhookID: m.GetWebhookId(), MessageID: m.GetMessageId(), ChainID: chain,
					BlockNumber: e.GetNumber(), BlockHash: e.GetHash(), TxHash: m.GetTxHash(),
				})
				if err != nil {
					return err
				}
				msg := &record.Activity{
					WebhookId: m.GetWebhookId(), MessageId: id, AccountId: m.GetAccountId(), ChainId: chain,
					BlockNumber: e.GetNumber(), BlockHash: e.GetHash(), TxHash: m.GetTxHash(), Payload: body,
					MatchedAtUnixMs: b.now, Kind: record.ActivityKind_ACTIVITY_KIND_RETRACTION, RetractedMessageId: m.GetMessageId(),
				}
				msg.Sequence = b.nextSeq(m.GetWebhookId())
				b.out = append(b.out, msg)
			}
			b.emitted[key] = nil
			b.touch(key, version)
		}
		sameBlock := func(p *record.PendingBlock) bool { return bytes.Equal(p.GetHash(), o.GetHash()) }
		for _, pk := range b.pendingKeys(chain, sameBlock) {
			b.pending[pk] = nil
			b.touch(pk, version)
		}
	}
	return nil
}

// Replayed adds a replay's messages (package replay) to the batch, in the
// order given. A retransmission (Retransmission set) keeps the sequence
// number the stream gave it; every other message gets its webhook's next
// number, and when recent says its block can still be orphaned, it is
// recorded under the block's emitted entry like a live message, so that a
// reorg retracts it. Such an entry keeps the version the state holds for
// it: the replay is not a blocks-topic record.
func (b *Batch) Replayed(msgs []*record.Activity, recent func(blockNumber uint64) bool) {
	for _, msg := range msgs {
		if msg.GetRetransmission() {
			b.out = append(b.out, msg)
			continue
		}
		if !recent(msg.GetBlockNumber()) {
			msg.Sequence = b.nextSeq(msg.GetWebhookId())
			b.out = append(b.out, msg)
			continue
		}
		key := codec.StreamEmittedKey(msg.GetChainId(), msg.GetBlockHash())
		version, _ := b.s.versions.Version([]byte(key))
		if v, ok := b.versions[key]; ok {
			version = v
		}
		b.emit(msg, version)
	}
}

// SetReplay records a replay job's progress (version: its chunks).
func (b *Batch) SetReplay(p *record.ReplayProgress) {
	key := codec.StreamReplayKey(p.GetReplayId())
	b.replays[key] = p
	b.touch(key, p.GetChunks())
}

// Records returns what the batch changed since the last call, as records
// to produce in its transaction: the new messages (activity topic, key
// the webhook id, in stream order), then the state records (stream topic).
func (b *Batch) Records(activityTopic, streamTopic string) ([]*kgo.Record, error) {
	var out []*kgo.Record
	for _, msg := range b.out[b.flushedOut:] {
		v, err := codec.EncodeActivity(msg)
		if err != nil {
			return nil, err
		}
		out = append(out, &kgo.Record{
			Topic: activityTopic, Key: []byte(msg.GetWebhookId()), Value: v,
			Headers: []kgo.RecordHeader{{Key: codec.SchemaHeader, Value: []byte(codec.ActivitySchema)}},
		})
	}
	b.flushedOut = len(b.out)
	for _, key := range b.order {
		if !b.dirty[key] {
			continue
		}
		version := b.versions[key]
		e := &record.StreamEntry{Version: version}
		if v, ok := b.seq[key]; ok {
			e.Entry = &record.StreamEntry_Sequence{Sequence: &record.WebhookSequence{WebhookId: b.seqHook[key], Last: v}}
		} else if em, ok := b.emitted[key]; ok && em != nil {
			e.Entry = &record.StreamEntry_Emitted{Emitted: em}
		} else if p, ok := b.pending[key]; ok && p != nil {
			e.Entry = &record.StreamEntry_Pending{Pending: p}
		} else if rp, ok := b.replays[key]; ok && rp != nil {
			e.Entry = &record.StreamEntry_Replay{Replay: rp}
		}
		r := &kgo.Record{Topic: streamTopic, Key: []byte(key), Headers: []kgo.RecordHeader{
			{Key: codec.SchemaHeader, Value: []byte(codec.StreamEntrySchema)},
			{Key: codec.VersionHeader, Value: codec.FormatVersion(version)},
		}}
		if e.Entry != nil {
			v, err := codec.EncodeStreamEntry(e)
			if err != nil {
				return nil, err
			}
			r.Value = v
		}
		out = append(out, r)
	}
	clear(b.dirty)
	return out, nil
}
