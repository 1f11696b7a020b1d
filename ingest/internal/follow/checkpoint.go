package follow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// checkpoint is the follower's position, recovered from the blocks topic.
type checkpoint struct {
	// found is false when the topic holds nothing of this chain.
	found bool
	// win holds the most recent blocks produced (after applying the reorg
	// events found in the tail), newest last.
	win *window
	// partition and offset locate where the tail was read (for logs).
	partition int32
	endOffset int64
}

// partitionFor is the partition the producer writes key to among n: the
// same partitioner the producer uses (kafkautil.ProducerOpts: franz-go's
// sticky key partitioner, murmur2 like the Java client), so the two cannot
// disagree.
func partitionFor(topic string, key []byte, n int) int32 {
	p := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	return int32(p.Partition(&kgo.Record{Topic: topic, Key: key}, n))
}

// recoverCheckpoint reads the tail of the chain's partition of the blocks
// topic and rebuilds the last produced block and the window of recent
// hashes. Nothing else stores ingest state.
func (f *Follower) recoverCheckpoint(ctx context.Context) (*checkpoint, error) {
	adm := kadm.NewClient(f.deps.Kafka)
	// The high watermark, not the last stable offset: a transaction of
	// another chain's writer still open on the partition holds the last
	// stable offset back, and this chain's committed records may follow it.
	// The read-committed reader waits for that transaction to end (it spans
	// one batch) and passes its marker.
	ends, err := adm.ListEndOffsets(ctx, f.cfg.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", f.cfg.Topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, f.cfg.Topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %s: %w", f.cfg.Topic, err)
	}
	n := len(ends[f.cfg.Topic])
	if n == 0 {
		return nil, fmt.Errorf("topic %s has no partitions (not created?)", f.cfg.Topic)
	}
	bounds := func(p int32) (int64, int64) {
		s, _ := starts.Lookup(f.cfg.Topic, p)
		e, _ := ends.Lookup(f.cfg.Topic, p)
		return s.Offset, e.Offset
	}
	p := partitionFor(f.cfg.Topic, f.key, n)
	start, end := bounds(p)
	cp, err := f.scanPartition(ctx, p, start, end, true)
	if err != nil || cp.found {
		return cp, err
	}
	// Nothing on the partition the key maps to. If the partition count was
	// changed by hand since the chain was last produced (EnsureTopics never
	// changes it), its records are on another partition: look at the tails
	// of the others before starting over, which would double count. Only
	// the tails: reading every partition of a shared topic to its start
	// would make the first start of every new chain read everything.
	var best *checkpoint
	for q := int32(0); q < int32(n); q++ {
		if q == p {
			continue
		}
		s, e := bounds(q)
		c, err := f.scanPartition(ctx, q, s, e, false)
		if err != nil {
			return nil, err
		}
		if c.found {
			l, _ := c.win.last()
			if b, _ := bestLast(best); best == nil || l.Number > b.Number {
				best = c
			}
		}
	}
	if best != nil {
		l, _ := best.win.last()
		f.logger.Warn("chain found on another partition than its key maps to: was the partition count of the topic changed?",
			"topic", f.cfg.Topic, "partition", best.partition, "expected_partition", p, "block", l.Number)
		return best, nil
	}
	return cp, nil
}

func bestLast(c *checkpoint) (produced, bool) {
	if c == nil {
		return produced{}, false
	}
	return c.win.last()
}

// scanPartition reads the partition's tail, widening it until it holds at
// least Window blocks of this chain, or some blocks once the tail read is
// long (a chain sharing its partition with busier ones: a shorter window only
// limits how deep a reorg can be), or reaches the start of the log. Finding
// nothing takes reading to the start (a new chain), unless toStart is false.
func (f *Follower) scanPartition(ctx context.Context, p int32, start, end int64, toStart bool) (*checkpoint, error) {
	cp := &checkpoint{win: newWindow(f.cfg.Window), partition: p, endOffset: end}
	if end <= start {
		return cp, nil
	}
	// Other chains may share the partition, so the tail is read in
	// growing steps rather than assuming one record per block.
	span := int64(f.cfg.Window) * 2
	longTail := int64(f.cfg.Window) * 64
	if !toStart {
		start = max(start, end-int64(f.cfg.Window)*8)
	}
	for {
		from := max(start, end-span)
		win, blocks, sawEvents, err := f.readRange(ctx, p, from, end)
		if err != nil {
			return nil, err
		}
		complete := blocks >= f.cfg.Window || from == start || end-from >= longTail
		if complete && win.len() > 0 {
			win.trim()
			cp.win, cp.found = win, true
			return cp, nil
		}
		if from == start {
			if !toStart {
				return cp, nil
			}
			if sawEvents {
				return nil, fmt.Errorf("partition %d holds events of chain %s but no block to resume from (retention removed them?)", p, f.chain)
			}
			return cp, nil
		}
		span *= 4
	}
}

// readRange consumes [from, end) of partition p and replays this chain's
// events: blocks are appended to the window, a reorg removes the orphaned
// blocks from it.
func (f *Follower) readRange(ctx context.Context, p int32, from, end int64) (*window, int, bool, error) {
	opts := append(append([]kgo.Opt(nil), f.deps.KafkaOpts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{f.cfg.Topic: {p: kgo.NewOffset().At(from)}}),
		// Only what consumers see: a fenced writer's aborted records never
		// count. Transaction markers are kept so that reading advances over
		// them to the end offset (they are skipped below).
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxBytes(64<<20),
		kgo.FetchMaxPartitionBytes(32<<20),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, 0, false, err
	}
	defer cl.Close()

	win := newWindow(1 << 30) // untrimmed while replaying; trimmed by the caller
	blocks := 0
	sawEvents := false
	next := from
	lastProgress := time.Now()
	for next < end {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, 0, false, ctx.Err()
		}
		var ferr error
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && ferr == nil {
				ferr = err
			}
		})
		if ferr != nil {
			return nil, 0, false, fmt.Errorf("read partition %d: %w", p, ferr)
		}
		progressed := false
		for _, r := range fetches.Records() {
			progressed = true
			next = r.Offset + 1
			if r.Offset >= end || r.Attrs.IsControl() || string(r.Key) != string(f.key) {
				continue
			}
			if schemaOf(r) != codec.ChainEventSchema {
				f.logger.Warn("skipping a record of unknown schema on the blocks topic", "partition", p, "offset", r.Offset, "schema", schemaOf(r))
				continue
			}
			ev, err := codec.DecodeChainEvent(r.Value)
			if err != nil {
				return nil, 0, false, fmt.Errorf("partition %d offset %d: %w", p, r.Offset, err)
			}
			sawEvents = true
			switch e := ev.Event.(type) {
			case *record.ChainEvent_Block:
				b := e.Block
				if last, ok := win.last(); ok && b.Number <= last.Number {
					// Cannot happen with one writer per chain; keep the
					// newest, which is what consumers see last.
					if b.Number == 0 {
						win.entries = win.entries[:0]
					} else {
						win.truncateAbove(b.Number - 1)
					}
				}
				// A copy: the decoded hash points into the fetched record,
				// which the window would otherwise keep alive.
				win.push(produced{Number: b.Number, Hash: bytes.Clone(b.Hash), Cumulative: b.CumulativeTransactions})
				blocks++
			case *record.ChainEvent_Reorg:
				win.truncateAbove(e.Reorg.ForkNumber - 1)
			}
		}
		if progressed {
			lastProgress = time.Now()
		} else if time.Since(lastProgress) > 15*time.Second {
			// The end offset was read before: if nothing arrives, offsets
			// up to it are not readable (e.g. transaction markers). What
			// was read is the tail.
			f.logger.Warn("checkpoint read stalled before the end offset; using what was read", "partition", p, "offset", next, "end", end)
			break
		}
	}
	return win, blocks, sawEvents, nil
}

func schemaOf(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == codec.SchemaHeader {
			return string(h.Value)
		}
	}
	return ""
}
