package api

import (
	"cmp"
	"context"
	"fmt"

	"github.com/gin-gonic/gin"
	"golang.org/x/sync/errgroup"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
	"github.com/moraine-data/moraine/query/internal/server/pagetoken"
)

// mergeConcurrency bounds the per-chain reads of one /v1/blocks request.
const mergeConcurrency = 4

func badToken() error {
	return apierr.Validation("pageToken must be a page token returned by the previous page of this list")
}

// listChainBlocks: GET /v1/chains/:chainId/blocks?pageSize=&pageToken=.
// The first page starts at the chain's head (chain_heads, cached briefly);
// a token carries the number of the next block to read, so blocks appended
// meanwhile never shift later pages.
func (h *handlers) listChainBlocks(c *gin.Context) {
	p := &params{c: c}
	id := p.chainID()
	size := p.pageSize("pageSize", 1, 100, 10)
	token := p.pageToken()
	ch, found := h.validChain(p, id)
	if !found {
		return
	}
	ctx := c.Request.Context()
	chainID := ch.ID()
	var cursor uint64
	if token != "" {
		t, err := h.tokens.Decode(token, pagetoken.KindChainBlocks)
		if err != nil || t.ChainID != chainID {
			apierr.Write(c, badToken())
			return
		}
		cursor = t.Cursor
	} else {
		heads, found := h.indexedHeads(c)
		if !found {
			return
		}
		head := heads[chainID]
		if !head.Exists {
			// Configured but nothing indexed yet: an empty list, not an error.
			ok(c, listBlocksResponse{Blocks: []evmBlock{}})
			return
		}
		cursor = head.Number
	}
	rows, err := h.store.Blocks(ctx, chainID, cursor, size+1)
	if err != nil {
		apierr.Write(c, storeError(err, ""))
		return
	}
	out := listBlocksResponse{Blocks: make([]evmBlock, 0, min(len(rows), size))}
	if len(rows) > size {
		out.NextPageToken = h.tokens.Encode(pagetoken.Token{
			Kind: pagetoken.KindChainBlocks, ChainID: chainID, Cursor: rows[size].Number,
		})
		rows = rows[:size]
	}
	for _, b := range rows {
		out.Blocks = append(out.Blocks, renderBlock(b))
	}
	ok(c, out)
}

// blockNotFound is the 404 message of a blockId on chain.
func blockNotFound(ch chains.Chain, id blockID) string {
	return fmt.Sprintf("Block %s not found on chain %s", id, ch.EVMChainID)
}

// lookupBlock resolves a validated blockId on chain.
func (h *handlers) lookupBlock(ctx context.Context, ch chains.Chain, id blockID) (store.Block, error) {
	notFound := blockNotFound(ch, id)
	number, err := h.blockNumber(ctx, ch, id)
	if err != nil {
		return store.Block{}, err
	}
	b, err := h.store.BlockByNumber(ctx, ch.ID(), number)
	if err != nil {
		return store.Block{}, storeError(err, notFound)
	}
	if !id.names(b) {
		return store.Block{}, apierr.NotFound(notFound)
	}
	return b, nil
}

// blockNumber is the number of the block id names: by hash, block_hashes'
// number, which a reorg may since have given another block; the block
// read at it must then pass id.names.
func (h *handlers) blockNumber(ctx context.Context, ch chains.Chain, id blockID) (uint64, error) {
	if !id.byHash {
		return id.number, nil
	}
	n, err := h.store.BlockNumberByHash(ctx, ch.ID(), id.hash)
	if err != nil {
		return 0, storeError(err, blockNotFound(ch, id))
	}
	return n, nil
}

// blockTransactions resolves a validated blockId on chain and reads up to
// limit (<= 0: all) of its block's transactions from index from on. A
// settled block's come with the block in one read of the store
// (SettledBlockTransactions); any other block's after its header.
func (h *handlers) blockTransactions(ctx context.Context, ch chains.Chain, id blockID, from uint32, limit int) (store.Block, []store.Tx, error) {
	notFound := blockNotFound(ch, id)
	number, err := h.blockNumber(ctx, ch, id)
	if err != nil {
		return store.Block{}, nil, err
	}
	b, txs, settled, err := h.store.SettledBlockTransactions(ctx, ch.ID(), number, from, limit)
	if err != nil {
		return store.Block{}, nil, storeError(err, "")
	}
	if !settled {
		if b, err = h.store.BlockByNumber(ctx, ch.ID(), number); err != nil {
			return store.Block{}, nil, storeError(err, notFound)
		}
	}
	if !id.names(b) {
		return store.Block{}, nil, apierr.NotFound(notFound)
	}
	if !settled {
		if txs, err = h.store.BlockTransactions(ctx, b, from, limit); err != nil {
			return store.Block{}, nil, storeError(err, "")
		}
	}
	return b, txs, nil
}

// getBlock: GET /v1/chains/:chainId/blocks/:blockId.
func (h *handlers) getBlock(c *gin.Context) {
	p := &params{c: c}
	id := p.chainID()
	bid := p.blockID()
	ch, found := h.validChain(p, id)
	if !found {
		return
	}
	b, err := h.lookupBlock(c.Request.Context(), ch, bid)
	if err != nil {
		apierr.Write(c, err)
		return
	}
	ok(c, renderBlock(b))
}

// listBlockTransactions: GET /v1/chains/:chainId/blocks/:blockId/transactions.
// pageSize 0 (ChainKit's default) returns every transaction and no token.
func (h *handlers) listBlockTransactions(c *gin.Context) {
	p := &params{c: c}
	id := p.chainID()
	bid := p.blockID()
	size := p.pageSize("pageSize", 0, 100, 0)
	token := p.pageToken()
	ch, found := h.validChain(p, id)
	if !found {
		return
	}
	var t pagetoken.Token
	if token != "" {
		var err error
		if t, err = h.tokens.Decode(token, pagetoken.KindBlockTxs); err != nil || t.ChainID != ch.ID() || t.Cursor > 1<<32-1 {
			apierr.Write(c, badToken())
			return
		}
	}
	limit := 0
	if size > 0 {
		limit = size + 1
	}
	b, txs, err := h.blockTransactions(c.Request.Context(), ch, bid, uint32(t.Cursor), limit)
	if err != nil {
		apierr.Write(c, err)
		return
	}
	if token != "" && (t.BlockNumber != b.Number || t.BlockHash != b.Hash) {
		// The token belongs to another block, or this number's block
		// changed in a reorg since the previous page.
		apierr.Write(c, badToken())
		return
	}
	out := listTransactionsResponse{Transactions: make([]nativeTransaction, 0, len(txs))}
	if size > 0 && len(txs) > size {
		out.NextPageToken = h.tokens.Encode(pagetoken.Token{
			Kind: pagetoken.KindBlockTxs, ChainID: b.ChainID, BlockNumber: b.Number, BlockHash: b.Hash,
			Cursor: uint64(txs[size].BlockIndex),
		})
		txs = txs[:size]
	}
	for _, tx := range txs {
		out.Transactions = append(out.Transactions, renderTx(b, tx))
	}
	ok(c, out)
}

// listAllBlocks: GET /v1/blocks and the deprecated GET /v1/chains/allBlocks.
//
// The newest blocks of every configured chain (optionally one network),
// merged by blockTimestamp desc, then chain id asc, then number desc. The
// token carries one position per chain (the next block number to read);
// each page reads pageSize+1 blocks below every position and takes the
// pageSize first in merge order, so a chain's position only moves down
// past blocks that were served: no chain skips or repeats a block, and the
// merge order holds across pages. Chains without an indexed head at the
// first page, and chains that run out, drop out of the token.
func (h *handlers) listAllBlocks(c *gin.Context) {
	p := &params{c: c}
	size := p.pageSize("pageSize", 1, 100, 10)
	network := p.enum("network", networks)
	token := p.pageToken()
	if !p.valid() {
		return
	}
	code := networkCode(network)
	ctx := c.Request.Context()
	var positions []pagetoken.Position
	if token != "" {
		t, err := h.tokens.Decode(token, pagetoken.KindAllBlocks)
		if err != nil || t.Network != code || !tokenChainsValid(h, code, t.Positions, func(p pagetoken.Position) uint64 { return p.ChainID }) {
			apierr.Write(c, badToken())
			return
		}
		positions = t.Positions
	} else {
		var found bool
		positions, found = firstPositions(h, c, code, func(chainID, head uint64) pagetoken.Position {
			return pagetoken.Position{ChainID: chainID, Cursor: head}
		})
		if !found {
			return
		}
	}

	perChain := make([][]store.Block, len(positions))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(mergeConcurrency)
	for i, pos := range positions {
		g.Go(func() error {
			rows, err := h.store.Blocks(gctx, pos.ChainID, pos.Cursor, size+1)
			perChain[i] = rows
			return err
		})
	}
	if err := g.Wait(); err != nil {
		apierr.Write(c, storeError(err, ""))
		return
	}

	served, used := mergeNewest(perChain, size, mergeBefore, nil)
	out := listBlocksResponse{Blocks: make([]evmBlock, 0, len(served))}
	for _, b := range served {
		out.Blocks = append(out.Blocks, renderBlock(b))
	}
	// A chain stays in the token while it has a fetched block that was not
	// served; its position becomes that block's number.
	var next []pagetoken.Position
	for i, pos := range positions {
		if used[i] < len(perChain[i]) {
			next = append(next, pagetoken.Position{ChainID: pos.ChainID, Cursor: perChain[i][used[i]].Number})
		}
	}
	if len(next) > 0 {
		out.NextPageToken = h.tokens.Encode(pagetoken.Token{Kind: pagetoken.KindAllBlocks, Network: code, Positions: next})
	}
	ok(c, out)
}

// mergeBefore orders the all-chains list: blockTimestamp desc, then chain id
// asc, then number desc.
func mergeBefore(a, b store.Block) bool {
	return cmp.Or(
		cmp.Compare(b.Timestamp, a.Timestamp),
		cmp.Compare(a.ChainID, b.ChainID),
		cmp.Compare(b.Number, a.Number),
	) < 0
}
