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

func (f *fakeStore) BlockByHash(_ context.Context, chainID uint64, h store.Hash) (store.Block, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return store.Block{}, f.err
	}
	for _, b := range f.blocks[chainID] {
		if b.Hash == h {
			return b, nil
		}
	}
	return store.Block{}, store.ErrNotFound
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
