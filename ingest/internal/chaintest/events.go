package chaintest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/chainlog"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/schemas/record"
)

// ReadEvents reads every committed event of chain from the topic,
// partition by partition, in offset order (pkg/chainlog).
func ReadEvents(t *testing.T, cfg kafkautil.Config, topicName, chain string) []*record.ChainEvent {
	t.Helper()
	evs, err := chainlog.Read(t.Context(), cfg, topicName, chain)
	require.NoError(t, err)
	return evs
}

// Validate checks the events with chainlog.Check and returns the chain and
// the reorgs.
func Validate(t *testing.T, events []*record.ChainEvent, startCum uint64, contiguous bool) ([]*record.Block, []*record.Reorg) {
	t.Helper()
	chain, reorgs, err := chainlog.Check(events, startCum, contiguous)
	require.NoError(t, err)
	return chain, reorgs
}
