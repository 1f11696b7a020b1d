package api

import (
	"cmp"
	"math"

	"github.com/gin-gonic/gin"
	"golang.org/x/sync/errgroup"

	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
)

// statusCode maps the status filter (failed, success, none) to the store's.
func statusCode(status string) uint8 {
	switch status {
	case "failed":
		return store.StatusFailed
	case "success":
		return store.StatusSuccess
	}
	return store.StatusAny
}

// listLatestTransactions: GET /v1/chains/:chainId/transactions?status=.
// The chain's transactions newest first (block, then index, descending).
// The token carries the next transaction's position, so transactions of
// blocks appended meanwhile never shift a later page. A page looks at no
// more than --query.latest-scan-blocks blocks, with or without a status
// filter (store.LatestTxs), so a rare status or a run of empty blocks cannot
// make one request read the whole chain: the page then holds fewer than
// pageSize transactions, even none, and its nextPageToken continues below
// the blocks it looked at. Each such page moves that many blocks down, so
// the list still ends at the chain's first block.
func (h *handlers) listLatestTransactions(c *gin.Context) {
	p := &params{c: c}
	id := p.chainID()
	size := p.pageSize("pageSize", 1, 100, 10)
	status := statusCode(p.enum("status", txStatuses))
	token := p.pageToken()
	ch, found := h.validChain(p, id)
	if !found {
		return
	}
	ctx := c.Request.Context()
	var start store.Seek
	if token != "" {
		t, err := h.history.tokens.decode(token, historyLatest)
		if err != nil || t.chainID != ch.ID() || t.status != status {
			apierr.Write(c, badToken())
			return
		}
		start = t.next
	} else {
		heads, found := h.indexedHeads(c)
		if !found {
			return
		}
		head := heads[ch.ID()]
		if !head.Exists {
			ok(c, listTransactionsResponse{Transactions: []nativeTransaction{}})
			return
		}
		start = store.Seek{Block: head.Number, TxIndex: math.MaxUint32}
	}
	txs, resume, err := h.history.store.LatestTxs(ctx, ch.ID(), start, size+1, status)
	if err != nil {
		apierr.Write(c, storeError(err, ""))
		return
	}
	out := listTransactionsResponse{Transactions: make([]nativeTransaction, 0, min(len(txs), size))}
	var next *store.Seek
	switch {
	case len(txs) > size:
		next = &store.Seek{Block: txs[size].Block.Number, TxIndex: txs[size].Tx.BlockIndex}
		txs = txs[:size]
	case resume != nil:
		next = resume
	}
	if next != nil {
		out.NextPageToken = h.history.tokens.encode(historyToken{kind: historyLatest, chainID: ch.ID(), status: status, next: *next})
	}
	for _, t := range txs {
		out.Transactions = append(out.Transactions, renderTx(t.Block, t.Tx))
	}
	ok(c, out)
}

// listLatestAllChains: GET /v1/transactions?network=&status= and the
// deprecated GET /v1/chains/allTransactions. The newest transactions of
// every configured chain (optionally one network), merged by
// blockTimestamp desc, then chain id asc, block number desc, index desc.
// As in /v1/blocks, the token holds one position per chain and each page
// reads pageSize+1 transactions from every position, so what a chain
// contributes is a prefix of its own list. A chain whose read stopped at
// the scan bound with everything it found served ends the page early: its
// next transaction is not known yet, and serving older ones of other chains
// first would break the order.
func (h *handlers) listLatestAllChains(c *gin.Context) {
	p := &params{c: c}
	size := p.pageSize("pageSize", 1, 100, 10)
	network := networkCode(p.enum("network", networks))
	status := statusCode(p.enum("status", txStatuses))
	token := p.pageToken()
	if !p.valid() {
		return
	}
	ctx := c.Request.Context()
	var positions []txPosition
	if token != "" {
		t, err := h.history.tokens.decode(token, historyAllLatest)
		if err != nil || t.network != network || t.status != status ||
			!tokenChainsValid(h, network, t.positions, func(p txPosition) uint64 { return p.chainID }) {
			apierr.Write(c, badToken())
			return
		}
		positions = t.positions
	} else {
		var found bool
		positions, found = firstPositions(h, c, network, func(chainID, head uint64) txPosition {
			return txPosition{chainID: chainID, block: head, index: math.MaxUint32}
		})
		if !found {
			return
		}
	}

	perChain := make([][]store.LatestTx, len(positions))
	resumes := make([]*store.Seek, len(positions))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(mergeConcurrency)
	for i, pos := range positions {
		g.Go(func() (err error) {
			perChain[i], resumes[i], err = h.history.store.LatestTxs(gctx, pos.chainID,
				store.Seek{Block: pos.block, TxIndex: pos.index}, size+1, status)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		apierr.Write(c, storeError(err, ""))
		return
	}
	// A chain whose read stopped at the scan bound (resumes) stalls the
	// page once its rows are served.
	served, used := mergeNewest(perChain, size, latestBefore, func(i int) bool { return resumes[i] != nil })
	out := listTransactionsResponse{Transactions: make([]nativeTransaction, 0, len(served))}
	for _, t := range served {
		out.Transactions = append(out.Transactions, renderTx(t.Block, t.Tx))
	}
	var next []txPosition
	for i, pos := range positions {
		switch {
		case used[i] < len(perChain[i]):
			t := perChain[i][used[i]]
			next = append(next, txPosition{chainID: pos.chainID, block: t.Block.Number, index: t.Tx.BlockIndex})
		case resumes[i] != nil:
			next = append(next, txPosition{chainID: pos.chainID, block: resumes[i].Block, index: resumes[i].TxIndex})
		}
	}
	if len(next) > 0 {
		out.NextPageToken = h.history.tokens.encode(historyToken{kind: historyAllLatest, network: network, status: status, positions: next})
	}
	ok(c, out)
}

// latestBefore orders the all-chains list: blockTimestamp desc, chain id
// asc, block number desc, transaction index desc.
func latestBefore(a, b store.LatestTx) bool {
	return cmp.Or(
		cmp.Compare(b.Block.Timestamp, a.Block.Timestamp),
		cmp.Compare(a.Block.ChainID, b.Block.ChainID),
		cmp.Compare(b.Block.Number, a.Block.Number),
		cmp.Compare(b.Tx.BlockIndex, a.Tx.BlockIndex),
	) < 0
}
