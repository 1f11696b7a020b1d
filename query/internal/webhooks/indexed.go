package webhooks

import (
	"context"

	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/webhooks/webhookapi"
)

// StoreIndexed gives the webhook API the data store's view of what each
// chain has indexed (the bounds of a replay).
type StoreIndexed struct{ Store *store.ClickHouse }

// IndexedRange implements webhookapi.Indexed.
func (s StoreIndexed) IndexedRange(ctx context.Context, chainID uint64) (webhookapi.IndexedRange, bool, error) {
	r, ok, err := s.Store.Indexed(ctx, chainID)
	return webhookapi.IndexedRange(r), ok, err
}

// BlockAtTime implements webhookapi.Indexed.
func (s StoreIndexed) BlockAtTime(ctx context.Context, chainID, ts uint64, after bool) (uint64, bool, error) {
	return s.Store.BlockAtTime(ctx, chainID, ts, after)
}
