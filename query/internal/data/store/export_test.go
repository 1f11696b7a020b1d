package store

import (
	"context"
	"slices"
)

// ReadBlockTxsTogether reads the transactions of blocks (one chain) in one
// query, as concurrent requests are read (coalesce.go), in blocks' order.
func ReadBlockTxsTogether(ctx context.Context, s *ClickHouse, blocks []Block, from uint32, limit int) ([][]Tx, error) {
	keys := make([]blockTxsKey, len(blocks))
	for i, b := range blocks {
		keys[i] = blockTxsKey{chainID: b.ChainID, number: b.Number, hash: b.Hash, from: from, limit: limit}
	}
	got, err := s.readBlockTxs(ctx, keys)
	out := make([][]Tx, len(keys))
	for i, k := range keys {
		out[i] = got[k].txs
	}
	return out, err
}

// ReadBlocksTogether reads blocks by number (one chain) in one query, as
// concurrent requests are read.
func ReadBlocksTogether(ctx context.Context, s *ClickHouse, chainID uint64, numbers []uint64) (map[uint64]Block, error) {
	keys := make([]blockKey, len(numbers))
	for i, n := range numbers {
		keys[i] = blockKey{chainID: chainID, number: n}
	}
	got, err := s.readBlocksByNumber(ctx, keys)
	out := map[uint64]Block{}
	for k, b := range got {
		out[k.number] = b
	}
	return out, err
}

// ReadTxsTogether reads transactions by hash (one chain) in one query, as
// concurrent requests are read: for each hash, the numbers of the blocks
// that included it.
func ReadTxsTogether(ctx context.Context, s *ClickHouse, chainID uint64, hashes []Hash) ([][]uint64, error) {
	keys := make([]txKey, len(hashes))
	for i, h := range hashes {
		keys[i] = txKey{chainID: chainID, hash: h}
	}
	got, err := s.readTxs(ctx, keys)
	out := make([][]uint64, len(keys))
	for i, k := range keys {
		for _, p := range got[k] {
			out[i] = append(out[i], p.number)
		}
		slices.Sort(out[i])
	}
	return out, err
}

// ReadSettledWithBlock reads b's transactions twice in one query, as
// concurrent requests are read: by its hash, and as the settled block at its
// number (SettledBlockTransactions' key).
func ReadSettledWithBlock(ctx context.Context, s *ClickHouse, b Block) (byHash []Tx, settled Block, settledTxs []Tx, ok bool, err error) {
	hashKey := blockTxsKey{chainID: b.ChainID, number: b.Number, hash: b.Hash, limit: s.blockTxLimit(0)}
	settledKey := blockTxsKey{chainID: b.ChainID, number: b.Number, settled: true, limit: s.blockTxLimit(0)}
	got, err := s.readBlockTxs(ctx, []blockTxsKey{hashKey, settledKey})
	p, ok := got[settledKey]
	return got[hashKey].txs, p.block, p.txs, ok, err
}
