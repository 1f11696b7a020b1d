package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/server"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
	"github.com/moraine-data/moraine/query/internal/server/pagetoken"
)

// Store is what the block and chain handlers read; *store.ClickHouse
// implements it, handler tests use a fake.
type Store interface {
	// Heads returns the head of every configured chain (Exists false while
	// a chain has none); the map must not be modified.
	Heads(ctx context.Context) (map[uint64]store.Head, error)
	// Blocks returns up to limit canonical blocks with number <= cursor,
	// newest first.
	Blocks(ctx context.Context, chainID, cursor uint64, limit int) ([]store.Block, error)
	BlockByNumber(ctx context.Context, chainID, number uint64) (store.Block, error)
	// BlockNumberByHash is the number of the block with hash, canonical or
	// not (ErrNotFound for none): the block at that number may be another.
	BlockNumberByHash(ctx context.Context, chainID uint64, hash store.Hash) (uint64, error)
	// BlockTransactions returns up to limit (<= 0: all) transactions of b
	// with index >= from, by index.
	BlockTransactions(ctx context.Context, b store.Block, from uint32, limit int) ([]store.Tx, error)
	// SettledBlockTransactions is BlockTransactions of the canonical block
	// at number in one read, with the block's chain, number, hash and
	// timestamps; ok is false when the store cannot tell that block
	// without reading its header (not settled, among others).
	SettledBlockTransactions(ctx context.Context, chainID, number uint64, from uint32, limit int) (b store.Block, txs []store.Tx, ok bool, err error)
}

// Deps are the data API's collaborators.
type Deps struct {
	Logger *slog.Logger
	Chains *chains.Config
	Store  Store
	// History serves the transaction, address and contract routes.
	History HistoryStore
	// Contracts asks token contracts about themselves (eth_call).
	Contracts Contracts
	Tokens    *pagetoken.Codec
	Config    Config
	// Balances serves the balance and NFT routes, with NFTMetadata (both
	// nil: those routes are not served). BalanceSettle is how far below
	// the indexed head a block is settled (--query.reorg-window): native
	// balances of settled blocks are remembered.
	Balances      BalanceService
	NFTMetadata   NFTMetadata
	BalanceSettle uint64
	// Reindex accepts reindexNft requests.
	Reindex Reindexer
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// API is the data routes: chains, blocks, transactions, address history and
// contracts.
type API struct{ h *handlers }

// New validates the collaborators; no I/O.
func New(d Deps) (*API, error) {
	switch {
	case d.Logger == nil:
		return nil, errors.New("api: Deps.Logger is required")
	case d.Chains == nil:
		return nil, errors.New("api: Deps.Chains is required")
	case d.Store == nil:
		return nil, errors.New("api: Deps.Store is required")
	case d.Tokens == nil:
		return nil, errors.New("api: Deps.Tokens is required")
	case d.History == nil:
		return nil, errors.New("api: Deps.History is required")
	case d.Contracts == nil:
		return nil, errors.New("api: Deps.Contracts is required")
	case (d.Balances == nil) != (d.NFTMetadata == nil):
		return nil, errors.New("api: Deps.Balances and Deps.NFTMetadata go together")
	case d.Reindex == nil:
		return nil, errors.New("api: Deps.Reindex is required")
	}
	if err := d.Config.Validate(); err != nil {
		return nil, err
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &API{h: &handlers{
		logger: d.Logger, store: d.Store, tokens: d.Tokens, cfg: d.Config, now: d.Now, reindex: d.Reindex,
		chains:  newChainIndex(d.Chains),
		history: historyDeps{store: d.History, contracts: d.Contracts, tokens: newHistoryTokens(d.Tokens)},
		balance: balanceDeps{service: d.Balances, metadata: d.NFTMetadata, tokens: newBalanceTokens(d.Tokens), settle: d.BalanceSettle},
	}}, nil
}

// Routes is the data API's part of the route table. The literal siblings
// of /v1/chains/{chainId} (allBlocks, allTransactions, address) are routes
// of their own, as hosted.
func (a *API) Routes() []server.Route {
	h := a.h
	get := func(path, op string, w server.Weight, fn gin.HandlerFunc) server.Route {
		return server.Route{Method: http.MethodGet, Path: path, Operation: op, Weight: w, Access: server.Public, Handler: fn}
	}
	routes := []server.Route{
		// EVM chains.
		get("/v1/chains", "supportedChains", server.WeightFree, h.listChains),
		get("/v1/chains/{chainId}", "getChainInfo", server.WeightFree, h.getChain),
		get("/v1/chains/allBlocks", "listAllLatestBlocks", server.WeightFree, h.listAllBlocks), // deprecated twin of /v1/blocks
		get("/v1/chains/allTransactions", "listAllLatestTransactions", server.WeightFree, h.listLatestAllChains),
		get("/v1/chains/address/{address}", "getAddressChains", server.WeightFree, h.listAddressChains),
		// No weight in the spec: free, like its deprecated twin above.
		get("/v1/address/{address}/chains", "listAddressChains", server.WeightFree, h.listAddressChains),
		// EVM blocks. /v1/blocks has no weight in the spec: medium, as the
		// hosted docs price it.
		get("/v1/blocks", "listLatestBlocksAllChains", server.WeightMedium, h.listAllBlocks),
		get("/v1/chains/{chainId}/blocks", "getLatestBlocks", server.WeightSmall, h.listChainBlocks),
		get("/v1/chains/{chainId}/blocks/{blockId}", "getBlock", server.WeightSmall, h.getBlock),
		// EVM transactions, address history and contracts. /v1/transactions
		// has no weight in the spec: priced like its twin /v1/blocks;
		// getContractMetadata (none in the spec either), which asks the
		// chain's node, medium.
		get("/v1/chains/{chainId}/blocks/{blockId}/transactions", "getTransactionsForBlock", server.WeightMedium, h.listBlockTransactions),
		get("/v1/transactions", "listLatestTransactionsAllChains", server.WeightMedium, h.listLatestAllChains),
		get("/v1/chains/{chainId}/transactions", "listLatestTransactions", server.WeightMedium, h.listLatestTransactions),
		get("/v1/chains/{chainId}/transactions/{txHash}", "getTransaction", server.WeightMedium, h.getTransaction),
		get("/v1/chains/{chainId}/addresses/{address}", "getContractMetadata", server.WeightMedium, h.getContractMetadata),
		get("/v1/chains/{chainId}/addresses/{address}/transactions", "listTransactions", server.WeightMedium, h.listTransactions),
		get("/v1/chains/{chainId}/addresses/{address}/transactions:listNative", "listNativeTransactions", server.WeightMedium, h.listNative),
		get("/v1/chains/{chainId}/addresses/{address}/transactions:listErc20", "listErc20Transactions", server.WeightMedium, h.listErc20),
		get("/v1/chains/{chainId}/addresses/{address}/transactions:listErc721", "listErc721Transactions", server.WeightMedium, h.listErc721),
		get("/v1/chains/{chainId}/addresses/{address}/transactions:listErc1155", "listErc1155Transactions", server.WeightMedium, h.listErc1155),
		get("/v1/chains/{chainId}/addresses/{address}/transactions:listInternals", "listInternalTransactions", server.WeightMedium, h.listInternals),
		get("/v1/chains/{chainId}/tokens/{address}/transfers", "listTransfers", server.WeightMedium, h.listTransfers),
		get("/v1/chains/{chainId}/contracts/{address}/transactions:getDeployment", "getDeploymentTransaction", server.WeightMedium, h.getDeployment),
		get("/v1/chains/{chainId}/contracts/{address}/deployments", "listContractDeployments", server.WeightMedium, h.listDeployments),
		// NFTs.
		{Method: http.MethodPost, Path: "/v1/chains/{chainId}/nfts/collections/{address}/tokens/{tokenId}:reindex", Operation: "reindexNft",
			Weight: server.WeightSmall, Access: server.Public, Handler: h.reindexNft},
	}
	if h.balance.service == nil {
		return routes
	}
	// EVM balances and NFTs (docs/balances.md). blockNumber on
	// listErc721Balances and listCollectibleBalances is moraine's.
	nftBlock := func(r server.Route) server.Route { r.ExtraParameters = blockNumberExtension; return r }
	return append(routes,
		get("/v1/chains/{chainId}/addresses/{address}/balances:getNative", "getNativeBalance", server.WeightMedium, h.getNativeBalance),
		get("/v1/chains/{chainId}/addresses/{address}/balances:listErc20", "listErc20Balances", server.WeightMedium, h.listErc20Balances),
		nftBlock(get("/v1/chains/{chainId}/addresses/{address}/balances:listErc721", "listErc721Balances", server.WeightMedium, h.listErc721Balances)),
		get("/v1/chains/{chainId}/addresses/{address}/balances:listErc1155", "listErc1155Balances", server.WeightMedium, h.listErc1155Balances),
		nftBlock(get("/v1/chains/{chainId}/addresses/{address}/balances:listCollectibles", "listCollectibleBalances", server.WeightMedium, h.listCollectibleBalances)),
		get("/v1/chains/{chainId}/nfts/collections/{address}/tokens", "listTokens", server.WeightMedium, h.listTokens),
		get("/v1/chains/{chainId}/nfts/collections/{address}/tokens/{tokenId}", "getTokenDetails", server.WeightMedium, h.getTokenDetails),
	)
}

// Config is the API's own settings.
type Config struct {
	// ChainStaleAfter: a chain whose head this process has not seen advance
	// for this long is listed as UNAVAILABLE (0 disables).
	ChainStaleAfter time.Duration
	// StatusTimeout bounds the head read behind chain statuses, so
	// /v1/chains answers quickly (UNAVAILABLE) when ClickHouse hangs.
	StatusTimeout time.Duration
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	return Config{ChainStaleAfter: 10 * time.Minute, StatusTimeout: time.Second}
}

// Validate checks the values.
func (c Config) Validate() error {
	if c.ChainStaleAfter < 0 {
		return errors.New("api: --chains.stale-after must not be negative")
	}
	if c.StatusTimeout <= 0 {
		return errors.New("api: Config.StatusTimeout must be positive")
	}
	return nil
}

// handlers holds what the block and chain handlers share.
type handlers struct {
	logger  *slog.Logger
	store   Store
	tokens  *pagetoken.Codec
	cfg     Config
	now     func() time.Time
	chains  *chainIndex
	history historyDeps
	balance balanceDeps
	reindex Reindexer
}

// historyDeps are what the transaction, address and contract handlers add.
type historyDeps struct {
	store     HistoryStore
	contracts Contracts
	tokens    *historyTokens
}

// storeError maps a store error to the API error.
func storeError(err error, notFound string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return apierr.NotFound(notFound)
	case errors.Is(err, store.ErrUnavailable):
		return apierr.Unavailable("Chain data is temporarily unavailable", err)
	default:
		return apierr.Internal(err)
	}
}

// ok writes a 200 JSON body.
func ok(c *gin.Context, body any) { c.JSON(http.StatusOK, body) }
