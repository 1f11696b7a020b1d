// Package chainlog reads a chain's events from the blocks topic as
// consumers see them (committed records only) and checks that they form the
// log ingest promises (ingest/internal/follow): blocks in order, each linked
// to the one before, cumulative counts that add up, and reorg events that
// orphan exactly the blocks above their fork. Tests of ingest and the
// cluster fault suite judge what was produced with it.
package chainlog

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// Read returns every committed event of chain (its decimal id, the record
// key) in topic, partition by partition, in offset order.
func Read(ctx context.Context, cfg kafkautil.Config, topic, chain string) ([]*record.ChainEvent, error) {
	logger := slog.New(slog.DiscardHandler)
	cl, err := kgo.NewClient(cfg.BaseOpts(logger, "chainlog")...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("chainlog: end offsets of %s: %w", topic, err)
	}
	var out []*record.ChainEvent
	var rerr error
	ends.Each(func(o kadm.ListedOffset) {
		if rerr != nil || o.Offset == 0 {
			return
		}
		evs, err := readPartition(ctx, cfg, topic, o.Partition, o.Offset, chain)
		if err != nil {
			rerr = err
		}
		out = append(out, evs...)
	})
	return out, rerr
}

func readPartition(ctx context.Context, cfg kafkautil.Config, topic string, p int32, end int64, chain string) ([]*record.ChainEvent, error) {
	// Transaction markers are kept so that reading reaches the end offset;
	// they are skipped below.
	rd, err := kgo.NewClient(append(cfg.BaseOpts(slog.New(slog.DiscardHandler), "chainlog"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []*record.ChainEvent
	for next := int64(0); next < end; {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		fs := rd.PollFetches(pctx)
		cancel()
		if err := fs.Err0(); err != nil {
			return nil, fmt.Errorf("chainlog: read %s/%d at %d: %w", topic, p, next, err)
		}
		for _, r := range fs.Records() {
			next = r.Offset + 1
			if r.Attrs.IsControl() || string(r.Key) != chain {
				continue
			}
			if schema := header(r, codec.SchemaHeader); schema != codec.ChainEventSchema {
				return nil, fmt.Errorf("chainlog: %s/%d offset %d: schema header %q, want %q", topic, p, r.Offset, schema, codec.ChainEventSchema)
			}
			ev, err := codec.DecodeChainEvent(r.Value)
			if err != nil {
				return nil, fmt.Errorf("chainlog: %s/%d offset %d: %w", topic, p, r.Offset, err)
			}
			// Decoded events alias the record's bytes; the client's buffers
			// are not reused after Close, so they stay valid.
			out = append(out, ev)
		}
	}
	return out, nil
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Check replays events (blocks append to the chain, a reorg removes the
// blocks it orphans) and returns the resulting chain and the reorgs, or
// the first event that breaks the log's rules. startCum is the cumulative
// count before the first block; contiguous requires consecutive, linked
// numbers (false for replay mode, where recordings skip numbers).
func Check(events []*record.ChainEvent, startCum uint64, contiguous bool) ([]*record.Block, []*record.Reorg, error) {
	var chain []*record.Block
	var reorgs []*record.Reorg
	for i, ev := range events {
		switch e := ev.Event.(type) {
		case *record.ChainEvent_Block:
			b := e.Block
			cum := startCum
			if len(chain) > 0 {
				last := chain[len(chain)-1]
				if b.Number <= last.Number {
					return nil, nil, fmt.Errorf("event %d: block %d after block %d (produced twice, or by a second writer)", i, b.Number, last.Number)
				}
				if contiguous && b.Number != last.Number+1 {
					return nil, nil, fmt.Errorf("event %d: block %d after block %d: a gap", i, b.Number, last.Number)
				}
				if contiguous && !bytes.Equal(last.Hash, b.ParentHash) {
					return nil, nil, fmt.Errorf("event %d: block %d does not link to block %d", i, b.Number, last.Number)
				}
				cum = last.CumulativeTransactions
			}
			if want := cum + uint64(len(b.Transactions)); b.CumulativeTransactions != want {
				return nil, nil, fmt.Errorf("event %d: block %d cumulative transactions %d, want %d", i, b.Number, b.CumulativeTransactions, want)
			}
			chain = append(chain, b)
		case *record.ChainEvent_Reorg:
			r := e.Reorg
			reorgs = append(reorgs, r)
			k := len(chain)
			for k > 0 && chain[k-1].Number >= r.ForkNumber {
				k--
			}
			if len(r.Orphaned) != len(chain)-k {
				return nil, nil, fmt.Errorf("event %d: reorg at %d orphans %d blocks, the log holds %d above the fork", i, r.ForkNumber, len(r.Orphaned), len(chain)-k)
			}
			for j, o := range r.Orphaned {
				if chain[k+j].Number != o.Number || !bytes.Equal(chain[k+j].Hash, o.Hash) {
					return nil, nil, fmt.Errorf("event %d: reorg orphans block %d %x, the log holds %d %x", i, o.Number, o.Hash, chain[k+j].Number, chain[k+j].Hash)
				}
			}
			if k == 0 {
				return nil, nil, fmt.Errorf("event %d: reorg at %d has no produced common ancestor", i, r.ForkNumber)
			}
			chain = chain[:k]
		}
	}
	return chain, reorgs, nil
}
