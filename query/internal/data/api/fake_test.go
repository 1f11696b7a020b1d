package api

import (
	"context"
	"sort"
	"sync"

	"github.com/moraine-data/moraine/query/internal/data/store"
)

// fakeStore is an in-memory Store.
type fakeStore struct {
	mu     sync.Mutex
	heads  map[uint64]store.Head
	blocks map[uint64][]store.Block // per chain
	txs    map[store.Hash][]store.Tx
	err    error // returned by every call when set
	panic  bool
	// settled makes SettledBlockTransactions answer for every block with
	// transactions, as the store does for a settled one: with only the
	// block fields its row carries.
	settled      bool
	settledReads int // the answers SettledBlockTransactions gave
	// orphans are hashes of blocks a reorg replaced, by number: known to
	// BlockNumberByHash, as block_hashes keeps them.
	orphans map[store.Hash]uint64
}

func newFakeStore() *fakeStore {
	return &fakeStore{heads: map[uint64]store.Head{}, blocks: map[uint64][]store.Block{}, txs: map[store.Hash][]store.Tx{}}
}

func (f *fakeStore) addBlocks(bs ...store.Block) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range bs {
		f.blocks[b.ChainID] = append(f.blocks[b.ChainID], b)
		sort.Slice(f.blocks[b.ChainID], func(i, j int) bool {
			return f.blocks[b.ChainID][i].Number < f.blocks[b.ChainID][j].Number
		})
	}
}

func (f *fakeStore) setHead(h store.Head) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h.Exists = true
	f.heads[h.ChainID] = h
}

func (f *fakeStore) Heads(context.Context) (map[uint64]store.Head, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.panic {
		panic("boom")
	}
	if f.err != nil {
		return nil, f.err
	}
	out := map[uint64]store.Head{}
	for k, v := range f.heads {
		out[k] = v
	}
	return out, nil
}

func (f *fakeStore) Blocks(_ context.Context, chainID, cursor uint64, limit int) ([]store.Block, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	var out []store.Block
	bs := f.blocks[chainID]
	for i := len(bs) - 1; i >= 0 && len(out) < limit; i-- {
		if bs[i].Number <= cursor {
			out = append(out, bs[i])
		}
	}
	return out, nil
}

func (f *fakeStore) BlockByNumber(_ context.Context, chainID, number uint64) (store.Block, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return store.Block{}, f.err
	}
	for _, b := range f.blocks[chainID] {
		if b.Number == number {
			return b, nil
		}
	}
	return store.Block{}, store.ErrNotFound
}

func (f *fakeStore) SettledBlockTransactions(ctx context.Context, chainID, number uint64, from uint32, limit int) (store.Block, []store.Tx, bool, error) {
	f.mu.Lock()
	settled, err := f.settled, f.err
	f.mu.Unlock()
	if err != nil {
		return store.Block{}, nil, false, err
	}
	if !settled {
		return store.Block{}, nil, false, nil
	}
	b, err := f.BlockByNumber(ctx, chainID, number)
	if err != nil || b.TxCount == 0 {
		return store.Block{}, nil, false, nil
	}
	txs, err := f.BlockTransactions(ctx, b, from, limit)
	f.mu.Lock()
	f.settledReads++
	f.mu.Unlock()
	return store.Block{ChainID: b.ChainID, Number: b.Number, Hash: b.Hash, Timestamp: b.Timestamp,
		TimestampMs: b.TimestampMs, MinDelayExcess: b.MinDelayExcess}, txs, err == nil, err
}

func (f *fakeStore) BlockNumberByHash(_ context.Context, chainID uint64, h store.Hash) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	for _, b := range f.blocks[chainID] {
		if b.Hash == h {
			return b.Number, nil
		}
	}
	if n, ok := f.orphans[h]; ok {
		return n, nil
	}
	return 0, store.ErrNotFound
}

func (f *fakeStore) BlockTransactions(_ context.Context, b store.Block, from uint32, limit int) ([]store.Tx, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	var out []store.Tx
	for _, t := range f.txs[b.Hash] {
		if t.BlockIndex >= from && (limit <= 0 || len(out) < limit) {
			out = append(out, t)
		}
	}
	return out, nil
}
