package api

import (
	"context"
	"slices"
	"sync"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/query/internal/data/store"
)

// fakeHistory is an in-memory HistoryStore: canonical rows only, every
// list read at once (the store's windows and canonical checks have their
// own tests).
type fakeHistory struct {
	mu     sync.Mutex
	rows   map[uint64][]histRow // per chain
	txs    map[uint64]map[store.Hash]store.FullTx
	refs   map[uint64]map[store.Hash]store.TxRef
	latest map[uint64][]store.LatestTx // newest first
	resume map[uint64]*store.Seek      // LatestTxs' resume per chain, when set
	err    error
	reads  []store.ListRequest
}

type histRow struct {
	address store.Address
	list    uint8
	row     store.IndexRow
}

func newFakeHistory() *fakeHistory {
	return &fakeHistory{rows: map[uint64][]histRow{}, txs: map[uint64]map[store.Hash]store.FullTx{},
		refs: map[uint64]map[store.Hash]store.TxRef{}, latest: map[uint64][]store.LatestTx{}, resume: map[uint64]*store.Seek{}}
}

func (f *fakeHistory) add(chainID uint64, a store.Address, list uint8, r store.IndexRow) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r.BlockHash = r.Block.Hash
	f.rows[chainID] = append(f.rows[chainID], histRow{a, list, r})
	slices.SortStableFunc(f.rows[chainID], func(x, y histRow) int { return x.row.Seek.Compare(y.row.Seek) })
}

func (f *fakeHistory) addTx(chainID uint64, ref store.TxRef, t store.FullTx) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.txs[chainID] == nil {
		f.txs[chainID], f.refs[chainID] = map[store.Hash]store.FullTx{}, map[store.Hash]store.TxRef{}
	}
	f.txs[chainID][t.Hash], f.refs[chainID][t.Hash] = t, ref
}

func (f *fakeHistory) AddressList(_ context.Context, r store.ListRequest) (store.ListPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, r)
	if f.err != nil {
		return store.ListPage{}, f.err
	}
	var match []store.IndexRow
	for _, x := range f.rows[r.ChainID] {
		b := x.row.Block.Number
		if x.address == r.Address && x.list == r.List && b >= r.Lo && b <= r.Hi && (r.Roles == 0 || x.row.Roles&r.Roles != 0) {
			match = append(match, x.row)
		}
	}
	if !r.Asc {
		slices.Reverse(match)
	}
	var out store.ListPage
	for _, m := range match {
		if r.Start != nil && (!r.Asc && m.Seek.Compare(*r.Start) > 0 || r.Asc && m.Seek.Compare(*r.Start) < 0) {
			continue
		}
		if len(out.Rows) == r.Limit {
			break
		}
		out.Rows = append(out.Rows, m)
	}
	out.Window = 7 // echoed in tokens: any hint works
	return out, nil
}

func (f *fakeHistory) HasActivity(_ context.Context, chainID uint64, a store.Address) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return false, f.err
	}
	for _, x := range f.rows[chainID] {
		if x.address == a {
			return true, nil
		}
	}
	return false, nil
}

func (f *fakeHistory) Transaction(_ context.Context, chainID uint64, h store.Hash) (store.TxRef, store.FullTx, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return store.TxRef{}, store.FullTx{}, f.err
	}
	ref, ok := f.refs[chainID][h]
	if !ok {
		return store.TxRef{}, store.FullTx{}, store.ErrNotFound
	}
	return ref, f.txs[chainID][h], nil
}

func (f *fakeHistory) LatestTxs(_ context.Context, chainID uint64, start store.Seek, limit int, _ uint8) ([]store.LatestTx, *store.Seek, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, nil, f.err
	}
	var out []store.LatestTx
	for _, t := range f.latest[chainID] {
		if t.Block.Number > start.Block || t.Block.Number == start.Block && t.Tx.BlockIndex > start.TxIndex {
			continue
		}
		if len(out) == limit {
			return out, nil, nil
		}
		out = append(out, t)
	}
	return out, f.resume[chainID], nil
}

// fakeContracts answers from tables; err makes Describe fail.
type fakeContracts struct {
	mu        sync.Mutex
	tokens    map[evm.Address]*tokenmeta.Token
	contracts map[evm.Address]*tokenmeta.Contract
	err       error
}

func newFakeContracts() *fakeContracts {
	return &fakeContracts{tokens: map[evm.Address]*tokenmeta.Token{}, contracts: map[evm.Address]*tokenmeta.Contract{}}
}

func (f *fakeContracts) Resolve(_ context.Context, _ uint64, addrs []evm.Address) map[evm.Address]*tokenmeta.Token {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[evm.Address]*tokenmeta.Token{}
	for _, a := range addrs {
		out[a] = f.tokens[a]
	}
	return out
}

func (f *fakeContracts) Describe(_ context.Context, _ uint64, addrs []evm.Address) (map[evm.Address]*tokenmeta.Contract, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	out := map[evm.Address]*tokenmeta.Contract{}
	for _, a := range addrs {
		c, ok := f.contracts[a]
		if !ok {
			c = &tokenmeta.Contract{}
		}
		out[a] = c
	}
	return out, nil
}
