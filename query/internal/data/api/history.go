package api

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gin-gonic/gin"
	"golang.org/x/sync/errgroup"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// HistoryStore is what the transaction, address and contract handlers read;
// *store.ClickHouse implements it, handler tests use a fake.
type HistoryStore interface {
	// AddressList returns a page of an address list (store.ListRequest).
	AddressList(ctx context.Context, r store.ListRequest) (store.ListPage, error)
	// HasActivity reports whether the address took part in a canonical
	// transaction of the chain.
	HasActivity(ctx context.Context, chainID uint64, a store.Address) (bool, error)
	// Transaction finds a canonical transaction with its transfers and
	// internal transactions (store.ErrNotFound otherwise).
	Transaction(ctx context.Context, chainID uint64, h store.Hash) (store.TxRef, store.FullTx, error)
	// LatestTxs returns canonical transactions newest first from start.
	LatestTxs(ctx context.Context, chainID uint64, start store.Seek, limit int, status uint8) ([]store.LatestTx, *store.Seek, error)
}

// Contracts answers what contracts say about themselves over eth_call;
// *tokenmeta.Resolver implements it.
type Contracts interface {
	Resolve(ctx context.Context, chain uint64, tokens []evm.Address) map[evm.Address]*tokenmeta.Token
	Describe(ctx context.Context, chain uint64, addrs []evm.Address) (map[evm.Address]*tokenmeta.Contract, error)
}

// addressListSpec is what an address-list route accepts and reads.
type addressListSpec struct {
	list  uint8
	roles uint8
	// blockRange: startBlock and endBlock; sortOrder: the sortOrder
	// parameter (only listTransactions documents it; the others list newest
	// first).
	blockRange, sortOrder bool
}

// addressPage is one validated, read page of an address list.
type addressPage struct {
	chain   chains.Chain
	address store.Address
	rows    []store.IndexRow
	next    string
}

// readAddressList validates the request of an address-list route, reads
// its page and makes the next page's token; it writes the error response
// itself and returns false on failure.
func (h *handlers) readAddressList(c *gin.Context, spec addressListSpec) (addressPage, bool) {
	p := &params{c: c}
	id := p.chainID()
	a := p.address()
	size := p.pageSize("pageSize", 1, 100, 10)
	token := p.pageToken()
	var br blockRange
	if spec.blockRange {
		br = p.blockRange()
	}
	asc := false
	if spec.sortOrder {
		asc = p.enum("sortOrder", sortOrders) == "asc"
	}
	ch, found := h.validChain(p, id)
	if !found {
		return addressPage{}, false
	}
	req := store.ListRequest{ChainID: ch.ID(), Address: a, List: spec.list, Roles: spec.roles, Asc: asc, Limit: size + 1}
	if token != "" {
		t, err := h.history.tokens.decode(token, historyAddressList)
		if err != nil || t.chainID != ch.ID() || t.list != spec.list || t.roles != spec.roles || t.address != a ||
			t.asc != asc || t.blockRange != br {
			apierr.Write(c, badToken())
			return addressPage{}, false
		}
		req.Start, req.Window = &t.next, t.window
	}
	out := addressPage{chain: ch, address: a}
	ctx := c.Request.Context()
	heads, found := h.indexedHeads(c)
	if !found {
		return addressPage{}, false
	}
	head := heads[ch.ID()]
	lo, hi, nonEmpty := br.bounds(head.Number)
	if !head.Exists || !nonEmpty {
		return out, true
	}
	req.Lo, req.Hi = lo, hi
	page, err := h.history.store.AddressList(ctx, req)
	if err != nil {
		apierr.Write(c, storeError(err, ""))
		return addressPage{}, false
	}
	out.rows = page.Rows
	if len(out.rows) > size {
		out.next = h.history.tokens.encode(historyToken{kind: historyAddressList, chainID: ch.ID(), list: spec.list,
			roles: spec.roles, address: a, asc: asc, blockRange: br, next: out.rows[size].Seek, window: page.Window})
		out.rows = out.rows[:size]
	}
	return out, true
}

// listTransactions: GET /v1/chains/:chainId/addresses/:address/transactions.
// Every transaction the address took part in (as sender, recipient,
// created contract, token-transfer party or token, or party of an internal
// transaction), each with the transfers and internal transactions in it
// that the address sent or received.
func (h *handlers) listTransactions(c *gin.Context) {
	pg, read := h.readAddressList(c, addressListSpec{list: schema.ListTransactions, blockRange: true, sortOrder: true})
	if !read {
		return
	}
	out := listTransactionDetailsResponse{NextPageToken: pg.next, Transactions: make([]transactionDetails, 0, len(pg.rows))}
	var all []store.Transfer
	for _, r := range pg.rows {
		all = append(all, r.Transfers...)
	}
	toks := h.resolveTokens(c.Request.Context(), pg.chain.ID(), all)
	for _, r := range pg.rows {
		item := transactionDetails{NativeTransaction: renderTx(r.Block, indexTx(r))}
		for _, t := range r.Transfers {
			toks.appendTransfer(transferOf(t), &item.Erc20Transfers, &item.Erc721Transfers, &item.Erc1155Transfers)
		}
		for _, in := range r.Internals {
			item.InternalTransactions = append(item.InternalTransactions, internalDetails(in))
		}
		out.Transactions = append(out.Transactions, item)
	}
	ok(c, out)
}

// transferOf is a stored transfer in the shape the renderers take.
func transferOf(t store.Transfer) transferDetail {
	token, _ := evm.AddressFrom(t.Token)
	return transferDetail{kind: evm.Kind(t.Kind), token: token, from: t.From, to: t.To, logIndex: t.LogIndex,
		value: orZero(t.Value), tokenID: t.TokenID}
}

// transfersOf is the transfers of transfer-list rows.
func transfersOf(rows []store.IndexRow) []store.Transfer {
	out := make([]store.Transfer, len(rows))
	for i, r := range rows {
		out[i] = r.Transfer
	}
	return out
}

// resolveTokens asks the ERC-20 and ERC-721 contracts among transfers for
// their name, symbol and decimals (cached); ERC-1155 tokens carry none.
func (h *handlers) resolveTokens(ctx context.Context, chainID uint64, transfers []store.Transfer) tokens {
	var want []evm.Address
	for _, t := range transfers {
		if k := evm.Kind(t.Kind); k == evm.ERC20 || k == evm.ERC721 {
			if a, ok := evm.AddressFrom(t.Token); ok && !slices.Contains(want, a) {
				want = append(want, a)
			}
		}
	}
	if len(want) == 0 {
		return tokens{}
	}
	return h.history.contracts.Resolve(ctx, chainID, want)
}

// writeTxPage answers an address-list page, each row rendered by render.
func writeTxPage[T any](c *gin.Context, pg addressPage, render func(store.IndexRow) T) {
	out := txPage[T]{NextPageToken: pg.next, Transactions: make([]T, 0, len(pg.rows))}
	for _, r := range pg.rows {
		out.Transactions = append(out.Transactions, render(r))
	}
	ok(c, out)
}

// listNative: GET .../transactions:listNative, the transactions the
// address sent or received (to, or the contract it created).
func (h *handlers) listNative(c *gin.Context) {
	pg, read := h.readAddressList(c, addressListSpec{list: schema.ListTransactions,
		roles: schema.RoleSender | schema.RoleRecipient, blockRange: true})
	if !read {
		return
	}
	writeTxPage(c, pg, func(r store.IndexRow) nativeTransaction { return renderTx(r.Block, indexTx(r)) })
}

// listErc20: GET .../transactions:listErc20.
func (h *handlers) listErc20(c *gin.Context) {
	pg, read := h.readAddressList(c, addressListSpec{list: schema.ListERC20, blockRange: true})
	if !read {
		return
	}
	toks := h.resolveTokens(c.Request.Context(), pg.chain.ID(), transfersOf(pg.rows))
	writeTxPage(c, pg, func(r store.IndexRow) erc20Transfer {
		x := transferOf(r.Transfer)
		return erc20Transfer{blockRef: refOf(r.Block, r.TxHash),
			erc20TransferDetails: erc20TransferDetails{From: addr(x.from), To: addr(x.to), LogIndex: x.logIndex, Value: x.value,
				Erc20Token: toks.erc20(x.token)}}
	})
}

// listErc721: GET .../transactions:listErc721.
func (h *handlers) listErc721(c *gin.Context) {
	pg, read := h.readAddressList(c, addressListSpec{list: schema.ListERC721, blockRange: true})
	if !read {
		return
	}
	toks := h.resolveTokens(c.Request.Context(), pg.chain.ID(), transfersOf(pg.rows))
	writeTxPage(c, pg, func(r store.IndexRow) erc721Transfer {
		x := transferOf(r.Transfer)
		return erc721Transfer{blockRef: refOf(r.Block, r.TxHash),
			erc721TransferDtl: erc721TransferDtl{From: addr(x.from), To: addr(x.to), LogIndex: x.logIndex,
				Erc721Token: toks.erc721(x.token, x.tokenID)}}
	})
}

// listErc1155: GET .../transactions:listErc1155.
func (h *handlers) listErc1155(c *gin.Context) {
	pg, read := h.readAddressList(c, addressListSpec{list: schema.ListERC1155, blockRange: true})
	if !read {
		return
	}
	writeTxPage(c, pg, func(r store.IndexRow) erc1155Transfer {
		x := transferOf(r.Transfer)
		return erc1155Transfer{blockRef: refOf(r.Block, r.TxHash),
			erc1155TransferDtl: erc1155TransferDtl{From: addr(x.from), To: addr(x.to), LogIndex: x.logIndex, Value: x.value,
				Erc1155Token: erc1155Of(x.token, x.tokenID)}}
	})
}

// listInternals: GET .../transactions:listInternals.
func (h *handlers) listInternals(c *gin.Context) {
	pg, read := h.readAddressList(c, addressListSpec{list: schema.ListInternal, blockRange: true})
	if !read {
		return
	}
	writeTxPage(c, pg, func(r store.IndexRow) internalTransaction {
		return internalTransaction{blockRef: refOf(r.Block, r.TxHash), internalTxDetails: internalDetails(r.Internal)}
	})
}

// listTransfers: GET /v1/chains/:chainId/tokens/:address/transfers, every
// transfer of the token (ERC-20, ERC-721 or ERC-1155 items).
func (h *handlers) listTransfers(c *gin.Context) {
	pg, read := h.readAddressList(c, addressListSpec{list: schema.ListTokenTransfers, blockRange: true})
	if !read {
		return
	}
	toks := h.resolveTokens(c.Request.Context(), pg.chain.ID(), transfersOf(pg.rows))
	out := listTransfersResponse{NextPageToken: pg.next, Transfers: make([]any, 0, len(pg.rows))}
	for _, r := range pg.rows {
		x, ref := transferOf(r.Transfer), refOf(r.Block, r.TxHash)
		switch x.kind {
		case evm.ERC20:
			out.Transfers = append(out.Transfers, erc20Transfer{blockRef: ref, erc20TransferDetails: erc20TransferDetails{
				From: addr(x.from), To: addr(x.to), LogIndex: x.logIndex, Value: x.value, Erc20Token: toks.erc20(x.token)}})
		case evm.ERC721:
			out.Transfers = append(out.Transfers, erc721Transfer{blockRef: ref, erc721TransferDtl: erc721TransferDtl{
				From: addr(x.from), To: addr(x.to), LogIndex: x.logIndex, Erc721Token: toks.erc721(x.token, x.tokenID)}})
		case evm.ERC1155:
			out.Transfers = append(out.Transfers, erc1155Transfer{blockRef: ref, erc1155TransferDtl: erc1155TransferDtl{
				From: addr(x.from), To: addr(x.to), LogIndex: x.logIndex, Value: x.value, Erc1155Token: erc1155Of(x.token, x.tokenID)}})
		}
	}
	ok(c, out)
}

// getTransaction: GET /v1/chains/:chainId/transactions/:txHash.
func (h *handlers) getTransaction(c *gin.Context) {
	p := &params{c: c}
	id := p.chainID()
	hash := p.txHash()
	ch, found := h.validChain(p, id)
	if !found {
		return
	}
	h.writeTransaction(c, ch, hash, fmt.Sprintf("Transaction %s not found on chain %s", hash.Hex(), ch.EVMChainID))
}

// writeTransaction answers with the GetTransactionResponse of a canonical
// transaction (404 notFound without one): every transfer decoded from its
// logs, its internal transactions (not the root frame, which is the
// transaction itself), and the chain's native token (no prices).
func (h *handlers) writeTransaction(c *gin.Context, ch chains.Chain, hash store.Hash, notFound string) {
	ctx := c.Request.Context()
	ref, full, err := h.history.store.Transaction(ctx, ch.ID(), hash)
	if err != nil {
		apierr.Write(c, storeError(err, notFound))
		return
	}
	out := getTransactionResponse{
		Erc20Transfers: []erc20TransferDetails{}, Erc721Transfers: []erc721TransferDtl{},
		Erc1155Transfers: []erc1155TransferDtl{}, InternalTransactions: []internalTxDetails{},
		NetworkTokenDetails: networkTokenDetails{NetworkToken: nativeTokenOf(ch)},
		NativeTransaction:   renderFullTx(ref.Block, full),
	}
	toks := h.resolveTokens(ctx, ch.ID(), full.Transfers)
	for _, t := range full.Transfers {
		toks.appendTransfer(transferOf(t), &out.Erc20Transfers, &out.Erc721Transfers, &out.Erc1155Transfers)
	}
	for _, in := range full.Internals {
		out.InternalTransactions = append(out.InternalTransactions, internalDetails(in))
	}
	ok(c, out)
}

// getDeployment: GET .../contracts/:address/transactions:getDeployment, the
// transaction that created the contract (top-level or from a contract;
// the latest canonical one when CREATE2 recreated it).
func (h *handlers) getDeployment(c *gin.Context) {
	p := &params{c: c}
	id := p.chainID()
	a := p.address()
	// moraine has no price data: the response carries no price, in any
	// currency; a valid currency is accepted, others refused.
	p.enum("currency", currencies)
	ch, found := h.validChain(p, id)
	if !found {
		return
	}
	notFound := fmt.Sprintf("No deployment of %s found on chain %s", checksumAddress(a[:]), ch.EVMChainID)
	row, err := h.creation(c.Request.Context(), ch, a)
	if err != nil {
		apierr.Write(c, storeError(err, notFound))
		return
	}
	h.writeTransaction(c, ch, row.TxHash, notFound)
}

// creation returns the newest canonical creation row of a contract
// (store.ErrNotFound without one).
func (h *handlers) creation(ctx context.Context, ch chains.Chain, a store.Address) (store.IndexRow, error) {
	heads, err := h.store.Heads(ctx)
	if err != nil {
		return store.IndexRow{}, err
	}
	head := heads[ch.ID()]
	if !head.Exists {
		return store.IndexRow{}, store.ErrNotFound
	}
	page, err := h.history.store.AddressList(ctx, store.ListRequest{ChainID: ch.ID(), Address: a, List: schema.ListCreation,
		Hi: head.Number, Limit: 1})
	if err != nil {
		return store.IndexRow{}, err
	}
	if len(page.Rows) == 0 {
		return store.IndexRow{}, store.ErrNotFound
	}
	return page.Rows[0], nil
}

// listDeployments: GET /v1/chains/:chainId/contracts/:address/deployments,
// the contracts the address created, newest first: as the sender of the
// creating transaction or as the contract that ran CREATE/CREATE2.
func (h *handlers) listDeployments(c *gin.Context) {
	pg, read := h.readAddressList(c, addressListSpec{list: schema.ListDeployments})
	if !read {
		return
	}
	ctx := c.Request.Context()
	addrs := make([]evm.Address, 0, len(pg.rows))
	for _, r := range pg.rows {
		a, _ := evm.AddressFrom(r.Deployment.Contract)
		addrs = append(addrs, a)
	}
	described := map[evm.Address]*tokenmeta.Contract{}
	if len(addrs) > 0 {
		var err error
		if described, err = h.history.contracts.Describe(ctx, pg.chain.ID(), addrs); err != nil {
			apierr.Write(c, nodeUnavailable(err))
			return
		}
	}
	out := listContractsResponse{NextPageToken: pg.next, Contracts: make([]contract, 0, len(pg.rows))}
	for i, r := range pg.rows {
		out.Contracts = append(out.Contracts, renderContract(addrs[i], described[addrs[i]], deploymentOf(r)))
	}
	ok(c, out)
}

// nodeUnavailable is the 503 of a route that needs the chain's node.
func nodeUnavailable(err error) error {
	return apierr.Unavailable("Chain node is temporarily unavailable", err)
}

func deploymentOf(r store.IndexRow) *deploymentDetails {
	d := &deploymentDetails{TxHash: r.TxHash.Hex(), DeployerAddress: checksumAddress(r.Deployment.Deployer)}
	if len(r.Deployment.Creator) == 20 {
		d.DeployerContractAddress = checksumAddress(r.Deployment.Creator)
	}
	return d
}

// renderContract is Erc20Contract, Erc721Contract, Erc1155Contract or
// UnknownContract by what the contract answered (tokenmeta.Describe).
func renderContract(a evm.Address, d *tokenmeta.Contract, dep *deploymentDetails) contract {
	out := contract{Address: a.Checksum(), DeploymentDetails: dep, ErcType: ercTypeUnknown}
	if d == nil {
		return out
	}
	out.Name = d.Name
	switch d.Kind {
	case evm.ERC20:
		out.ErcType, out.Symbol = ercType20, d.Symbol
		dec := d.Decimals
		out.Decimals = &dec
	case evm.ERC721:
		out.ErcType, out.Symbol = ercType721, d.Symbol
	case evm.ERC1155:
		out.ErcType, out.Symbol = ercType1155, d.Symbol
	}
	return out
}

// getContractMetadata: GET /v1/chains/:chainId/addresses/:address, what the
// contract at the address says about itself (eth_call, cached), with its
// deployment when moraine indexed it. An address without code is 404.
func (h *handlers) getContractMetadata(c *gin.Context) {
	p := &params{c: c}
	id := p.chainID()
	a := p.address()
	ch, found := h.validChain(p, id)
	if !found {
		return
	}
	ctx := c.Request.Context()
	ea := evm.Address(a)
	described, err := h.history.contracts.Describe(ctx, ch.ID(), []evm.Address{ea})
	if err != nil {
		apierr.Write(c, nodeUnavailable(err))
		return
	}
	d := described[ea]
	if d == nil || !d.HasCode {
		apierr.Write(c, apierr.NotFound(fmt.Sprintf("Contract %s not found on chain %s", ea.Checksum(), ch.EVMChainID)))
		return
	}
	var dep *deploymentDetails
	switch row, err := h.creation(ctx, ch, a); {
	case err == nil:
		dep = deploymentOf(row)
	case !errors.Is(err, store.ErrNotFound):
		apierr.Write(c, storeError(err, ""))
		return
	}
	ok(c, renderContract(ea, d, dep))
}

// listAddressChains: GET /v1/address/:address/chains (and the deprecated
// /v1/chains/address/:address): the configured chains on which the address
// took part in a canonical transaction, in the chain file's order.
func (h *handlers) listAddressChains(c *gin.Context) {
	p := &params{c: c}
	a := p.address()
	if !p.valid() {
		return
	}
	ctx := c.Request.Context()
	active := make([]bool, len(h.chains.list))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(mergeConcurrency)
	for i, ch := range h.chains.list {
		g.Go(func() (err error) {
			active[i], err = h.history.store.HasActivity(gctx, ch.ID(), a)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		apierr.Write(c, storeError(err, ""))
		return
	}
	heads, herr := h.heads(ctx)
	out := listAddressChainsResponse{IndexedChains: []chainInfo{}}
	for i, ch := range h.chains.list {
		if active[i] {
			out.IndexedChains = append(out.IndexedChains, renderChain(ch, h.chainStatus(ch, heads, herr)))
		}
	}
	ok(c, out)
}
