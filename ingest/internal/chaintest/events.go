package chaintest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

// ReadEvents reads every event of chain from the topic, partition by
// partition, in offset order.
func ReadEvents(t *testing.T, cfg kafkautil.Config, topicName, chain string) []*record.ChainEvent {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	cl, err := kgo.NewClient(cfg.BaseOpts(logger, "reader")...)
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(t.Context(), topicName)
	require.NoError(t, err)
	var out []*record.ChainEvent
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset == 0 {
			return
		}
		// What consumers see: committed records only (the markers are kept
		// so that reading reaches the end offset, and skipped).
		rd, err := kgo.NewClient(append(cfg.BaseOpts(logger, "reader"),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topicName: {o.Partition: kgo.NewOffset().AtStart()}}),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
		require.NoError(t, err)
		defer rd.Close()
		for next := int64(0); next < o.Offset; {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			fs := rd.PollFetches(ctx)
			cancel()
			require.NoError(t, fs.Err0())
			for _, r := range fs.Records() {
				next = r.Offset + 1
				if r.Attrs.IsControl() || string(r.Key) != chain {
					continue
				}
				require.Equal(t, codec.ChainEventSchema, schemaOf(r), "schema header")
				ev, err := codec.DecodeChainEvent(r.Value)
				require.NoError(t, err)
				out = append(out, ev)
			}
		}
	})
	return out
}

// Validate checks a chain's event stream the way a consumer relies on it:
// block numbers strictly ascend between reorgs (no duplicate, no gap in a
// contiguous chain, parents link), each reorg lists exactly the produced
// blocks it orphans, and every cumulative count is the previous one plus the
// block's transactions. It returns the canonical chain and the reorgs.
func Validate(t *testing.T, events []*record.ChainEvent, startCum uint64, contiguous bool) ([]*record.Block, []*record.Reorg) {
	t.Helper()
	var chain []*record.Block
	var reorgs []*record.Reorg
	for i, ev := range events {
		switch e := ev.Event.(type) {
		case *record.ChainEvent_Block:
			b := e.Block
			cum := startCum
			if len(chain) > 0 {
				last := chain[len(chain)-1]
				require.Greater(t, b.Number, last.Number, "event %d: block %d after %d", i, b.Number, last.Number)
				if contiguous {
					require.Equal(t, last.Number+1, b.Number, "event %d: gap", i)
					require.Equal(t, last.Hash, b.ParentHash, "event %d: block %d does not link", i, b.Number)
				}
				cum = last.CumulativeTransactions
			}
			require.Equal(t, cum+uint64(len(b.Transactions)), b.CumulativeTransactions, "event %d: block %d cumulative", i, b.Number)
			chain = append(chain, b)
		case *record.ChainEvent_Reorg:
			r := e.Reorg
			reorgs = append(reorgs, r)
			k := len(chain)
			for k > 0 && chain[k-1].Number >= r.ForkNumber {
				k--
			}
			require.Len(t, r.Orphaned, len(chain)-k, "event %d: reorg orphans", i)
			for j, o := range r.Orphaned {
				require.Equal(t, chain[k+j].Number, o.Number)
				require.Equal(t, chain[k+j].Hash, o.Hash)
			}
			require.Positive(t, k, "the common ancestor is a produced block")
			chain = chain[:k]
		}
	}
	return chain, reorgs
}

func schemaOf(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == codec.SchemaHeader {
			return string(h.Value)
		}
	}
	return ""
}
