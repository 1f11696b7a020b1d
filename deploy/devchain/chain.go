package devchain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/consensus/misc/eip1559"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/rawdb"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/eth"
	"github.com/ethereum/go-ethereum/eth/catalyst"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/eth/filters"
	"github.com/ethereum/go-ethereum/eth/tracers"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/p2p"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"

	// Registers callTracer, prestateTracer and the other native tracers.
	_ "github.com/ethereum/go-ethereum/eth/tracers/native"
)

// Defaults of Config.
const (
	DefaultListenAddress = "127.0.0.1:8545"
	DefaultChainID       = 43112
	DefaultBlockInterval = time.Second
	DefaultTxPerBlock    = 16
	DefaultAccounts      = 16
	// MaxReorgDepth is the deepest reorganisation Reorg accepts.
	MaxReorgDepth = 64
	// blockGasLimit leaves room for a few hundred generated transactions per
	// block with their generous gas limits.
	blockGasLimit = 150_000_000
	// databaseCache is the memory (MB) of the on-disk database's caches and
	// memtables; go-ethereum's default (2 GB) is sized for mainnet.
	databaseCache = 64
)

// Config configures a development chain. The zero value of every field means
// its default.
type Config struct {
	// ListenAddress is the host:port of the HTTP and WebSocket JSON-RPC server
	// (both on the same port). Port 0 picks a free port: see HTTPURL and WSURL.
	ListenAddress string
	// ChainID is the EVM chain id (default 43112).
	ChainID uint64
	// BlockInterval is the time between blocks (default 1 s). A negative value
	// disables automatic blocks: call Mine.
	BlockInterval time.Duration
	// TxPerBlock is the number of generated transactions per block (default 16).
	// A negative value generates no traffic: blocks are empty.
	TxPerBlock int
	// Seed seeds the traffic generator: the same seed gives the same transactions.
	Seed uint64
	// Accounts is the number of funded traffic accounts (default 16, at least 2).
	Accounts int
	// DataDir is the directory of the chain database. Empty (the default)
	// keeps the chain in memory: every start begins a new chain from genesis.
	// With a directory, the chain continues from the stored head after a
	// restart (see the package documentation). Only one chain at a time can
	// use a directory.
	DataDir string
	// MetadataBaseURL is the URL prefix under which the metadata
	// collections' token URIs name this chain's metadata documents
	// (default: the HTTP endpoint + "/nft/", e.g. http://127.0.0.1:8545/nft/).
	// Set it when the metadata worker reaches the chain under another name
	// (a container network). The server answers under /nft/ whatever it is.
	MetadataBaseURL string
	// Logger receives the chain's own log lines (default slog.Default()).
	// go-ethereum's internal logging is configured separately (its log package).
	Logger *slog.Logger

	// noMeta deploys no metadata collections: a chain as made before they
	// existed, for the test of resuming one.
	noMeta bool
	// noLogIndex disables go-ethereum's log index (eth_getLogs then scans the
	// blocks). For tests only: under the race detector, loading the index's
	// head map from disk on restart takes tens of seconds.
	noLogIndex bool
}

func (c *Config) setDefaults() {
	if c.ListenAddress == "" {
		c.ListenAddress = DefaultListenAddress
	}
	if c.ChainID == 0 {
		c.ChainID = DefaultChainID
	}
	if c.BlockInterval == 0 {
		c.BlockInterval = DefaultBlockInterval
	}
	if c.TxPerBlock == 0 {
		c.TxPerBlock = DefaultTxPerBlock
	}
	if c.Accounts == 0 {
		c.Accounts = DefaultAccounts
	}
	c.Accounts = max(c.Accounts, 2)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Chain is a running development chain: an in-process go-ethereum node in
// archive mode, driven by a simulated beacon client, with a traffic generator.
type Chain struct {
	cfg       Config
	log       *slog.Logger
	stack     *node.Node
	eth       *eth.Ethereum
	beacon    *catalyst.SimulatedBeacon
	chainCfg  *params.ChainConfig
	signer    types.Signer
	deployer  account
	accounts  []account
	contracts Contracts

	mu        sync.Mutex // serialises block production, reorgs and Close
	branch    uint64     // incremented by every reorg; feeds the traffic generator
	closed    bool
	warnedCap bool
	// metaPointed: the metadata collections' base URI names this process's
	// metadata server (set by their deployment, or by the first block
	// mined after a resume).
	metaPointed bool

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// ReorgResult describes a reorganisation done by Reorg.
type ReorgResult struct {
	Depth     int           `json:"depth"`
	ForkPoint BlockRef      `json:"forkPoint"` // the common ancestor, unchanged
	OldHead   BlockRef      `json:"oldHead"`
	NewHead   BlockRef      `json:"newHead"`
	Removed   []common.Hash `json:"removed"` // hashes of the replaced blocks, oldest first
	Added     []common.Hash `json:"added"`   // hashes of the new branch, oldest first
}

// BlockRef names a block.
type BlockRef struct {
	Number uint64      `json:"number"`
	Hash   common.Hash `json:"hash"`
}

// Start builds and starts a development chain, or resumes the one stored in
// Config.DataDir. It mines a block before it returns (on a new chain, the
// contract deployments). The chain runs until Close is called or ctx is done.
func Start(ctx context.Context, cfg Config) (*Chain, error) {
	cfg.setDefaults()
	host, portStr, err := net.SplitHostPort(cfg.ListenAddress)
	if err != nil {
		return nil, fmt.Errorf("devchain: listen address %q: %w", cfg.ListenAddress, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("devchain: listen address %q: bad port", cfg.ListenAddress)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if cfg.DataDir != "" {
		if cfg.DataDir, err = filepath.Abs(cfg.DataDir); err != nil {
			return nil, fmt.Errorf("devchain: data dir: %w", err)
		}
	}

	c := &Chain{cfg: cfg, log: cfg.Logger, stop: make(chan struct{})}
	chainCfg := *params.AllDevChainProtocolChanges
	chainCfg.ChainID = new(big.Int).SetUint64(cfg.ChainID)
	// Bogota (an unscheduled future fork) reprices state access; keep today's gas schedule (Osaka).
	chainCfg.BogotaTime = nil
	c.chainCfg = &chainCfg
	c.signer = types.LatestSignerForChainID(chainCfg.ChainID)
	c.deployer = deriveAccount(0)
	alloc := core.SystemContractAllocs()
	funds := new(big.Int).Mul(big.NewInt(1_000_000_000), big.NewInt(params.Ether))
	alloc[c.deployer.addr] = types.Account{Balance: funds}
	for i := 1; i <= cfg.Accounts; i++ {
		a := deriveAccount(i)
		c.accounts = append(c.accounts, a)
		alloc[a.addr] = types.Account{Balance: funds}
	}
	c.contracts = contractsOf(c.deployer.addr)

	nodeCfg := node.DefaultConfig
	nodeCfg.Name = "moraine-devchain"
	// Empty: everything in memory. Otherwise the database lives in
	// <DataDir>/moraine-devchain/chaindata and node.New locks the directory.
	nodeCfg.DataDir = cfg.DataDir
	nodeCfg.P2P = p2p.Config{NoDiscovery: true, MaxPeers: 0, ListenAddr: ""}
	nodeCfg.HTTPHost, nodeCfg.HTTPPort = host, port
	nodeCfg.WSHost, nodeCfg.WSPort = host, port
	modules := []string{"eth", "net", "web3", "debug", "txpool", "moraine"}
	nodeCfg.HTTPModules, nodeCfg.WSModules = modules, modules
	nodeCfg.HTTPVirtualHosts = []string{"*"}
	nodeCfg.HTTPCors = []string{"*"}
	nodeCfg.WSOrigins = []string{"*"}
	nodeCfg.IPCPath = ""
	nodeCfg.AuthPort = 0
	stack, err := node.New(&nodeCfg)
	if err != nil {
		return nil, fmt.Errorf("devchain: node: %w", err)
	}
	c.stack = stack
	var stored dataDirState
	if cfg.DataDir != "" {
		var ok bool
		if stored, ok, err = readDataDirState(cfg.DataDir); err == nil && ok {
			err = c.checkDataDirState(stored)
		}
		if err != nil {
			stack.Close()
			return nil, err
		}
	}

	ethCfg := ethconfig.Defaults
	ethCfg.NetworkId = cfg.ChainID
	// The genesis must be identical on every start (fixed timestamp, no extra
	// data, allocation derived from Accounts only): a data dir stores it and
	// go-ethereum refuses a different one.
	ethCfg.Genesis = &core.Genesis{
		Config:    &chainCfg,
		Timestamp: 0,
		ExtraData: nil,
		GasLimit:  blockGasLimit,
		BaseFee:   big.NewInt(params.InitialBaseFee),
		Alloc:     alloc,
	}
	ethCfg.SyncMode = ethconfig.FullSync
	ethCfg.NoPruning = true // archive: every block's state stays, so old blocks can be traced
	ethCfg.StateScheme = rawdb.HashScheme
	ethCfg.TxPool.NoLocals = true
	ethCfg.TxPool.Journal = "" // the pool is cleared before every block anyway
	ethCfg.DatabaseCache = databaseCache
	ethCfg.LogNoHistory = cfg.noLogIndex
	ethCfg.EngineMaxReorgDepth = 0
	ethCfg.Miner.Recommit = time.Hour // the beacon asks for payloads explicitly
	ethCfg.Miner.GasCeil = blockGasLimit
	backend, err := eth.New(stack, &ethCfg)
	if err != nil {
		stack.Close()
		var mismatch *core.GenesisMismatchError
		if errors.As(err, &mismatch) {
			return nil, fmt.Errorf("devchain: data dir %s holds another chain (different genesis; was it made by another version?): remove the directory: %w", cfg.DataDir, err)
		}
		return nil, fmt.Errorf("devchain: eth: %w", err)
	}
	c.eth = backend
	filterSystem := filters.NewFilterSystem(backend.APIBackend, filters.Config{})
	stack.RegisterAPIs([]rpc.API{{Namespace: "eth", Service: filters.NewFilterAPI(filterSystem)}})
	stack.RegisterAPIs(tracers.APIs(backend.APIBackend))
	stack.RegisterAPIs([]rpc.API{{Namespace: "moraine", Service: &moraineAPI{c: c}}})
	meta := &metadataServer{}
	stack.RegisterHandler("moraine-nft-metadata", "/nft/", meta)
	stack.RegisterHandler("moraine-ipfs-gateway", "/ipfs/", meta)
	if err := stack.Start(); err != nil {
		stack.Close()
		return nil, fmt.Errorf("devchain: start node: %w", err)
	}
	feeRecipient := deriveAccount(1_000_000).addr
	beacon, err := catalyst.NewSimulatedBeacon(0, feeRecipient, backend)
	if err != nil {
		stack.Close()
		return nil, fmt.Errorf("devchain: beacon: %w", err)
	}
	c.beacon = beacon

	// With a data dir the chain may resume: the beacon builds on the stored
	// head, the traffic generator takes nonces from the head state, finds the
	// contracts by their code and derives token ids from the block number.
	resumed := c.Head()
	c.branch = stored.Branch
	c.mu.Lock()
	err = c.saveStateLocked()
	if err == nil {
		err = c.mineLocked()
	}
	if err == nil {
		err = c.syncLocked()
	}
	c.mu.Unlock()
	if err != nil {
		c.Close()
		return nil, err
	}
	if resumed.Number > 0 {
		c.log.Info("devchain resumed from its data dir", "dataDir", cfg.DataDir, "storedHead", resumed.Number, "storedHash", resumed.Hash)
	}
	c.log.Info("devchain started", "http", c.HTTPURL(), "ws", c.WSURL(), "chainId", cfg.ChainID,
		"blockInterval", cfg.BlockInterval, "txPerBlock", cfg.TxPerBlock, "seed", cfg.Seed,
		"dataDir", cfg.DataDir, "head", c.Head().Number)

	c.wg.Add(1)
	go c.loop(ctx)
	return c, nil
}

func (c *Chain) loop(ctx context.Context) {
	defer c.wg.Done()
	if c.cfg.BlockInterval < 0 {
		select {
		case <-ctx.Done():
			go c.Close()
		case <-c.stop:
		}
		return
	}
	ticker := time.NewTicker(c.cfg.BlockInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			go c.Close()
			return
		case <-c.stop:
			return
		case <-ticker.C:
			c.mu.Lock()
			var err error
			if !c.closed {
				if err = c.mineLocked(); err == nil {
					err = c.syncLocked()
				}
			}
			c.mu.Unlock()
			if err != nil {
				c.log.Warn("devchain: block production failed", "err", err)
			}
		}
	}
}

// Close stops block production and the node; with a data dir, it closes the
// database cleanly.
func (c *Chain) Close() error {
	c.closeOnce.Do(func() {
		close(c.stop)
		c.wg.Wait()
		c.mu.Lock()
		c.closed = true
		if c.beacon != nil {
			c.closeErr = c.beacon.Stop()
		}
		c.closeErr = errors.Join(c.closeErr, c.stack.Close())
		c.mu.Unlock()
		c.log.Info("devchain stopped")
	})
	return c.closeErr
}

// HTTPURL is the JSON-RPC HTTP endpoint, e.g. http://127.0.0.1:8545.
func (c *Chain) HTTPURL() string { return c.stack.HTTPEndpoint() }

// WSURL is the JSON-RPC WebSocket endpoint, e.g. ws://127.0.0.1:8545.
func (c *Chain) WSURL() string { return c.stack.WSEndpoint() }

// ChainID is the EVM chain id.
func (c *Chain) ChainID() uint64 { return c.cfg.ChainID }

// Contracts returns the addresses of the contracts deployed in block 1.
func (c *Chain) Contracts() Contracts { return c.contracts }

// Accounts returns the funded traffic accounts (the deployer is not among them).
func (c *Chain) Accounts() []common.Address {
	out := make([]common.Address, len(c.accounts))
	for i, a := range c.accounts {
		out[i] = a.addr
	}
	return out
}

// Deployer is the funded account that deploys the contracts of Contracts.
func (c *Chain) Deployer() common.Address { return c.deployer.addr }

// Attach returns an in-process RPC client (no network).
func (c *Chain) Attach() *rpc.Client { return c.stack.Attach() }

// Head returns the number and hash of the current head block.
func (c *Chain) Head() BlockRef {
	h := c.eth.BlockChain().CurrentBlock()
	return BlockRef{Number: h.Number.Uint64(), Hash: h.Hash()}
}

// Mine produces n blocks now, with traffic, regardless of the block interval.
func (c *Chain) Mine(ctx context.Context, n int) (err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() { err = errors.Join(err, c.syncLocked()) }()
	for range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		if c.closed {
			return errors.New("devchain: closed")
		}
		if err := c.mineLocked(); err != nil {
			return err
		}
	}
	return nil
}

// mineLocked builds the next block's transactions, hands them to the pool and
// seals a block. c.mu must be held.
func (c *Chain) mineLocked() error {
	bc := c.eth.BlockChain()
	pool := c.eth.TxPool()
	pool.Clear() // leftovers (and transactions re-injected by a reorg) are dropped
	head := bc.CurrentBlock()
	st, err := bc.StateAt(head.Root, head.Number, head.Time)
	if err != nil {
		return fmt.Errorf("devchain: head state: %w", err)
	}
	number := head.Number.Uint64() + 1
	g := newBlockGen(c, number, c.branch, eip1559.CalcBaseFee(c.chainCfg, head), st)
	if len(st.GetCode(c.contracts.Factory)) == 0 {
		// First block (or a reorg back past it): deploy the contracts.
		if st.GetNonce(c.deployer.addr) != 0 {
			return errors.New("devchain: deployer nonce is not 0 but the contracts are missing")
		}
		g.deployCore()
		if !c.cfg.noMeta {
			if !g.deployMeta() {
				return errors.New("devchain: the metadata collections would not get their fixed addresses")
			}
			c.metaPointed = true
		}
		if c.cfg.TxPerBlock > 0 {
			g.fill(len(g.txs)+c.cfg.TxPerBlock/2, true)
		}
	} else if len(st.GetCode(c.contracts.MetaNFT)) == 0 && !c.cfg.noMeta {
		// A chain stored before the metadata collections existed: deploy
		// them now (native traffic only in this block, as in the first).
		if !g.deployMeta() {
			return fmt.Errorf("devchain: the deployer's nonce is %d, not 9: the metadata collections cannot be deployed at their fixed addresses", g.nextNonce(c.deployer))
		}
		c.metaPointed = true
		if c.cfg.TxPerBlock > 0 {
			g.fill(len(g.txs)+c.cfg.TxPerBlock/2, true)
		}
	} else {
		if !c.metaPointed && !c.cfg.noMeta {
			// Resumed: this process's metadata server may listen elsewhere.
			g.pointMeta()
			c.metaPointed = true
		}
		if c.cfg.TxPerBlock > 0 {
			g.fill(c.cfg.TxPerBlock, false)
		}
	}
	if want := len(g.txs); g.capGas(head.GasLimit/100*95) && !c.warnedCap {
		c.warnedCap = true
		c.log.Warn("devchain: block gas limit caps the traffic", "wanted", want, "fit", len(g.txs), "gasLimit", head.GasLimit)
	}
	accepted := 0
	if len(g.txs) > 0 {
		for i, err := range pool.Add(g.txs, true) {
			if err != nil {
				c.log.Warn("devchain: transaction rejected", "hash", g.txs[i].Hash(), "err", err)
				continue
			}
			accepted++
		}
	}
	c.beacon.Commit()
	newHead := bc.CurrentBlock()
	if newHead.Number.Uint64() != number {
		return fmt.Errorf("devchain: block %d was not sealed (head is %d)", number, newHead.Number.Uint64())
	}
	block := bc.GetBlock(newHead.Hash(), number)
	if block != nil && block.Transactions().Len() != accepted {
		c.log.Warn("devchain: block left out transactions", "number", number, "included", block.Transactions().Len(), "sent", accepted)
	}
	c.log.Debug("devchain: block", "number", number, "hash", newHead.Hash(), "txs", accepted)
	return nil
}

// syncLocked makes the blocks sealed so far durable. go-ethereum does not sync
// its database writes: the last ones can stay in the write-ahead log's buffer,
// in the process, and be lost if it is killed. A sync costs about as much as
// sealing a block, so batches (Mine, Reorg) sync once at the end. c.mu must be
// held.
func (c *Chain) syncLocked() error {
	if c.cfg.DataDir == "" || c.closed {
		return nil
	}
	if err := c.eth.ChainDb().SyncKeyValue(); err != nil {
		return fmt.Errorf("devchain: sync database: %w", err)
	}
	return nil
}

// Reorg replaces the last depth blocks (1..64) with a new branch of depth+1
// blocks with different transactions, so the head number grows by one and
// every replaced height gets a different hash. The block at head-depth (the
// fork point) is unchanged.
func (c *Chain) Reorg(ctx context.Context, depth int) (_ *ReorgResult, err error) {
	if depth < 1 || depth > MaxReorgDepth {
		return nil, fmt.Errorf("devchain: reorg depth %d out of range 1..%d", depth, MaxReorgDepth)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	defer func() { err = errors.Join(err, c.syncLocked()) }()
	if c.closed {
		return nil, errors.New("devchain: closed")
	}
	bc := c.eth.BlockChain()
	head := bc.CurrentBlock()
	n := head.Number.Uint64()
	if uint64(depth) > n {
		return nil, fmt.Errorf("devchain: reorg depth %d deeper than the chain (head %d)", depth, n)
	}
	ancestor := bc.GetHeaderByNumber(n - uint64(depth))
	res := &ReorgResult{
		Depth:     depth,
		ForkPoint: BlockRef{Number: ancestor.Number.Uint64(), Hash: ancestor.Hash()},
		OldHead:   BlockRef{Number: n, Hash: head.Hash()},
	}
	for i := ancestor.Number.Uint64() + 1; i <= n; i++ {
		res.Removed = append(res.Removed, bc.GetCanonicalHash(i))
	}
	// The counter is saved before the rewind so that a branch number is never
	// reused, even after a crash.
	c.branch++
	if err := c.saveStateLocked(); err != nil {
		return nil, err
	}
	c.eth.TxPool().Clear()
	if err := c.rewindLocked(ancestor); err != nil {
		return nil, fmt.Errorf("devchain: rewind to %d: %w", ancestor.Number.Uint64(), err)
	}
	for i := 0; i <= depth; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := c.mineLocked(); err != nil {
			return nil, err
		}
		res.Added = append(res.Added, bc.CurrentBlock().Hash())
	}
	newHead := bc.CurrentBlock()
	res.NewHead = BlockRef{Number: newHead.Number.Uint64(), Hash: newHead.Hash()}
	c.log.Info("devchain: reorg", "depth", depth, "forkPoint", res.ForkPoint.Number,
		"oldHead", res.OldHead.Hash, "newHead", res.NewHead.Hash, "newNumber", res.NewHead.Number)
	return res, nil
}

// rewindLocked makes ancestor the head block. c.mu must be held.
//
// go-ethereum's freezer moves the blocks up to the finalized one (the simulated
// beacon finalizes every 32nd block) out of the key-value store about once a
// minute, and a frozen block keeps answering for its height whatever the
// key-value store says. Rewinding with the beacon (SetCanonical) keeps the
// replaced blocks, reachable by hash, but cannot replace frozen ones: the next
// forkchoice update would fail forever. So when replaced blocks are frozen,
// SetHead rewinds instead: it truncates the freezer and deletes the replaced
// blocks.
func (c *Chain) rewindLocked(ancestor *types.Header) error {
	frozenAbove := func() bool {
		frozen, err := c.eth.ChainDb().Ancients() // blocks 0..frozen-1 are frozen
		return err == nil && frozen > ancestor.Number.Uint64()+1
	}
	if !frozenAbove() {
		if err := c.beacon.Fork(ancestor.Hash()); err != nil {
			return err
		}
		if !frozenAbove() { // the freezer may have run in between
			return nil
		}
	}
	c.log.Debug("devchain: reorg below frozen blocks: the replaced blocks are deleted", "forkPoint", ancestor.Number)
	return c.eth.BlockChain().SetHead(ancestor.Number.Uint64())
}

// moraineAPI is the "moraine" JSON-RPC namespace.
type moraineAPI struct{ c *Chain }

// Reorg is moraine_reorg(depth): see Chain.Reorg.
func (a *moraineAPI) Reorg(ctx context.Context, depth int) (*ReorgResult, error) {
	return a.c.Reorg(ctx, depth)
}

// Mine is moraine_mine(count): produces count blocks now.
func (a *moraineAPI) Mine(ctx context.Context, count int) (BlockRef, error) {
	if count < 1 || count > 10_000 {
		return BlockRef{}, fmt.Errorf("count %d out of range 1..10000", count)
	}
	if err := a.c.Mine(ctx, count); err != nil {
		return BlockRef{}, err
	}
	return a.c.Head(), nil
}

// Contracts is moraine_contracts(): the addresses of the deployed contracts.
func (a *moraineAPI) Contracts() Contracts { return a.c.contracts }

// MetaTokens is moraine_metaTokens(): the special tokens of the metadata
// collections with the indexStatus each earns (see MetaTokens).
func (a *moraineAPI) MetaTokens() []MetaToken { return MetaTokens() }

// Accounts is moraine_accounts(): the funded traffic accounts.
func (a *moraineAPI) Accounts() []common.Address { return a.c.Accounts() }
