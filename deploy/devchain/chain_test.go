package devchain

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
)

func startChain(t *testing.T, cfg Config) *Chain {
	t.Helper()
	cfg.ListenAddress = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

func dial(t *testing.T, url string) *rpc.Client {
	t.Helper()
	cl, err := rpc.DialContext(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Minimal views of the JSON-RPC results the checks below need.
type rpcTx struct {
	Hash  common.Hash     `json:"hash"`
	Type  hexutil.Uint64  `json:"type"`
	To    *common.Address `json:"to"`
	Value *hexutil.Big    `json:"value"`
	Input hexutil.Bytes   `json:"input"`
}

type rpcBlock struct {
	Number       hexutil.Uint64 `json:"number"`
	Transactions []rpcTx        `json:"transactions"`
}

type rpcHeader struct {
	Number     hexutil.Uint64 `json:"number"`
	Hash       common.Hash    `json:"hash"`
	ParentHash common.Hash    `json:"parentHash"`
}

type rpcLog struct {
	Address common.Address `json:"address"`
	Topics  []common.Hash  `json:"topics"`
}

type rpcReceipt struct {
	TxHash          common.Hash     `json:"transactionHash"`
	Status          hexutil.Uint64  `json:"status"`
	ContractAddress *common.Address `json:"contractAddress"`
	Logs            []rpcLog        `json:"logs"`
}

type callFrame struct {
	Type  string       `json:"type"`
	Value *hexutil.Big `json:"value"`
	Error string       `json:"error"`
	Calls []callFrame  `json:"calls"`
}

type txTrace struct {
	TxHash common.Hash `json:"txHash"`
	Result callFrame   `json:"result"`
}

func topic(sig string) common.Hash { return crypto.Keccak256Hash([]byte(sig)) }

// maxValueDepth is the deepest frame (the transaction's own frame is depth 0)
// that carries a non-zero value.
func maxValueDepth(f callFrame, depth int) int {
	best := -1
	if f.Value != nil && f.Value.ToInt().Sign() > 0 {
		best = depth
	}
	for _, c := range f.Calls {
		best = max(best, maxValueDepth(c, depth+1))
	}
	return best
}

func hasType(f callFrame, typ string) bool {
	if f.Type == typ {
		return true
	}
	for _, c := range f.Calls {
		if hasType(c, typ) {
			return true
		}
	}
	return false
}

func hasInnerError(f callFrame) bool {
	for _, c := range f.Calls {
		if c.Error != "" || hasInnerError(c) {
			return true
		}
	}
	return false
}

// trafficKinds are the kinds of traffic markKinds recognises.
var trafficKinds = []string{
	"native transfer", "ERC-20 Transfer", "ERC-20 Approval", "ERC-721 mint", "ERC-721 transfer",
	"ERC-1155 TransferSingle", "ERC-1155 TransferBatch", "contract creation", "internal CREATE",
	"value at depth >= 3", "reverted tx", "caught inner revert", "legacy tx", "dynamic-fee tx",
}

var (
	transferTopic       = topic("Transfer(address,address,uint256)")
	approvalTopic       = topic("Approval(address,address,uint256)")
	transferSingleTopic = topic("TransferSingle(address,address,address,uint256,uint256)")
	transferBatchTopic  = topic("TransferBatch(address,address,address,uint256[],uint256[])")
)

// markKinds calls mark with every kind of trafficKinds the transaction shows,
// given its receipt and callTracer trace.
func markKinds(tx rpcTx, r rpcReceipt, tr txTrace, mark func(string)) {
	zero := common.Hash{}
	switch tx.Type {
	case types.LegacyTxType:
		mark("legacy tx")
	case types.DynamicFeeTxType:
		mark("dynamic-fee tx")
	}
	if tx.To != nil && len(tx.Input) == 0 && tx.Value.ToInt().Sign() > 0 && len(tr.Result.Calls) == 0 && r.Status == 1 {
		mark("native transfer")
	}
	if r.ContractAddress != nil && r.Status == 1 {
		mark("contract creation")
	}
	if r.Status == 0 {
		mark("reverted tx")
	}
	if r.Status == 1 && hasInnerError(tr.Result) {
		mark("caught inner revert")
	}
	if tx.To != nil && hasType(tr.Result, "CREATE2") || tx.To != nil && hasType(tr.Result, "CREATE") {
		mark("internal CREATE")
	}
	if r.Status == 1 && maxValueDepth(tr.Result, 0) >= 3 {
		mark("value at depth >= 3")
	}
	for _, l := range r.Logs {
		switch {
		case l.Topics[0] == transferTopic && len(l.Topics) == 3:
			mark("ERC-20 Transfer")
		case l.Topics[0] == approvalTopic && len(l.Topics) == 3:
			mark("ERC-20 Approval")
		case l.Topics[0] == transferTopic && len(l.Topics) == 4 && l.Topics[1] == zero:
			mark("ERC-721 mint")
		case l.Topics[0] == transferTopic && len(l.Topics) == 4:
			mark("ERC-721 transfer")
		case l.Topics[0] == transferSingleTopic && l.Topics[2] != zero:
			mark("ERC-1155 TransferSingle")
		case l.Topics[0] == transferBatchTopic && l.Topics[2] != zero:
			mark("ERC-1155 TransferBatch")
		}
	}
}

// TestTrafficKinds checks that every kind of generated traffic shows up in the
// blocks, receipts and callTracer traces served over HTTP, and that the tokens
// answer name/symbol/decimals over eth_call.
func TestTrafficKinds(t *testing.T) {
	c := startChain(t, Config{BlockInterval: 100 * time.Millisecond, TxPerBlock: 24, Seed: 7})
	cl := dial(t, c.HTTPURL())
	ec := ethclient.NewClient(cl)
	ctx := t.Context()

	chainID, err := ec.ChainID(ctx)
	if err != nil || chainID.Uint64() != DefaultChainID {
		t.Fatalf("eth_chainId = %v, %v", chainID, err)
	}

	want := trafficKinds
	seen := map[string]uint64{}
	var (
		next     = uint64(1)
		deadline = time.Now().Add(60 * time.Second)
		sampleTx common.Hash
	)
	for len(seen) < len(want) {
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s only saw %v", seen)
		}
		head, err := ec.BlockNumber(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if next > head {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		n := hexutil.EncodeUint64(next)
		var block rpcBlock
		var receipts []rpcReceipt
		var traces []txTrace
		if err := cl.CallContext(ctx, &block, "eth_getBlockByNumber", n, true); err != nil {
			t.Fatal(err)
		}
		if err := cl.CallContext(ctx, &receipts, "eth_getBlockReceipts", n); err != nil {
			t.Fatal(err)
		}
		if err := cl.CallContext(ctx, &traces, "debug_traceBlockByNumber", n, map[string]any{"tracer": "callTracer"}); err != nil {
			t.Fatal(err)
		}
		if uint64(block.Number) != next || len(block.Transactions) == 0 ||
			len(receipts) != len(block.Transactions) || len(traces) != len(block.Transactions) {
			t.Fatalf("block %d: %d txs, %d receipts, %d traces", next, len(block.Transactions), len(receipts), len(traces))
		}
		for i, tx := range block.Transactions {
			r, tr := receipts[i], traces[i]
			if r.TxHash != tx.Hash || tr.TxHash != tx.Hash {
				t.Fatalf("block %d tx %d: hashes differ: %s %s %s", next, i, tx.Hash, r.TxHash, tr.TxHash)
			}
			sampleTx = tx.Hash
			markKinds(tx, r, tr, func(k string) {
				if _, ok := seen[k]; !ok {
					seen[k] = next
				}
			})
		}
		next++
	}
	t.Logf("kinds first seen at blocks: %v", seen)

	// The transaction and its receipt are also reachable by hash.
	var tx map[string]any
	var rc map[string]any
	if err := cl.CallContext(ctx, &tx, "eth_getTransactionByHash", sampleTx); err != nil || tx == nil {
		t.Fatalf("eth_getTransactionByHash: %v %v", tx, err)
	}
	if err := cl.CallContext(ctx, &rc, "eth_getTransactionReceipt", sampleTx); err != nil || rc == nil {
		t.Fatalf("eth_getTransactionReceipt: %v %v", rc, err)
	}

	// Token metadata over eth_call.
	con := c.Contracts()
	call := func(to common.Address, abi compiled, method string) []any {
		t.Helper()
		out, err := ec.CallContract(ctx, ethereum.CallMsg{To: &to, Data: abi.pack(method)}, nil)
		if err != nil {
			t.Fatalf("eth_call %s on %s: %v", method, to, err)
		}
		vals, err := abi.abi.Unpack(method, out)
		if err != nil {
			t.Fatalf("unpack %s: %v", method, err)
		}
		return vals
	}
	for _, tc := range []struct {
		addr         common.Address
		abi          compiled
		name, symbol string
		decimals     int
	}{
		{con.USD, erc20Contract, "Moraine USD", "MUSD", 6},
		{con.WMOR, erc20Contract, "Wrapped Moraine", "WMOR", 18},
		{con.NFT, erc721Contract, "Moraine Punks", "MPUNK", -1},
		{con.Items, erc1155Contract, "Moraine Items", "MITEM", -1},
	} {
		if got := call(tc.addr, tc.abi, "name")[0]; got != tc.name {
			t.Errorf("%s name() = %v", tc.addr, got)
		}
		if got := call(tc.addr, tc.abi, "symbol")[0]; got != tc.symbol {
			t.Errorf("%s symbol() = %v", tc.addr, got)
		}
		if tc.decimals >= 0 {
			if got := call(tc.addr, tc.abi, "decimals")[0]; got != uint8(tc.decimals) {
				t.Errorf("%s decimals() = %v", tc.addr, got)
			}
		}
	}

	// A reorg over RPC while blocks keep coming on the interval.
	var res ReorgResult
	if err := cl.CallContext(ctx, &res, "moraine_reorg", 2); err != nil {
		t.Fatal(err)
	}
	if res.Depth != 2 || res.NewHead.Number != res.OldHead.Number+1 || len(res.Removed) != 2 {
		t.Fatalf("moraine_reorg result %+v", res)
	}
}

// TestDeterministicTraffic checks that the same seed gives the same transactions.
func TestDeterministicTraffic(t *testing.T) {
	hashes := func(seed uint64) []common.Hash {
		// A fixed metadata URL: the collections' deployment carries it, and
		// the default one holds the chain's (random) port.
		c := startChain(t, Config{BlockInterval: -1, TxPerBlock: 12, Seed: seed, MetadataBaseURL: "http://devchain.invalid/nft/"})
		if err := c.Mine(t.Context(), 2); err != nil {
			t.Fatal(err)
		}
		var out []common.Hash
		for n := uint64(1); n <= 3; n++ {
			b := c.eth.BlockChain().GetBlockByNumber(n)
			for _, tx := range b.Transactions() {
				out = append(out, tx.Hash())
			}
		}
		return out
	}
	a, b, other := hashes(42), hashes(42), hashes(43)
	if len(a) == 0 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("same seed, different transactions:\n%v\n%v", a, b)
	}
	if fmt.Sprint(a[len(a)-12:]) == fmt.Sprint(other[len(other)-12:]) {
		t.Fatal("different seeds gave the same transactions")
	}
}

func hashByNumber(t *testing.T, cl *rpc.Client, n uint64) (common.Hash, bool) {
	t.Helper()
	var b *rpcHeader
	if err := cl.CallContext(t.Context(), &b, "eth_getBlockByNumber", hexutil.EncodeUint64(n), false); err != nil {
		t.Fatal(err)
	}
	if b == nil {
		return common.Hash{}, false
	}
	return b.Hash, true
}

// TestReorg reorganises the chain at depths 1, 5 and 64 and checks that the
// replaced heights now hold the new branch, that the fork point and its parent
// are unchanged, and that newHeads subscribers see the new heads.
func TestReorg(t *testing.T) {
	c := startChain(t, Config{BlockInterval: -1, TxPerBlock: 4, Seed: 3})
	ctx := t.Context()
	if err := c.Mine(ctx, 69); err != nil {
		t.Fatal(err)
	}
	cl := dial(t, c.HTTPURL())
	ws := dial(t, c.WSURL())
	heads := make(chan *types.Header, 1024)
	sub, err := ethclient.NewClient(ws).SubscribeNewHead(ctx, heads)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	for _, depth := range []int{1, 5, 64} {
		head := c.Head().Number
		old := map[uint64]common.Hash{}
		for n := head - uint64(depth) - 1; n <= head; n++ {
			h, ok := hashByNumber(t, cl, n)
			if !ok {
				t.Fatalf("block %d missing before reorg", n)
			}
			old[n] = h
		}
		var res ReorgResult
		if depth == 5 {
			if err := cl.CallContext(ctx, &res, "moraine_reorg", depth); err != nil {
				t.Fatal(err)
			}
		} else {
			r, err := c.Reorg(ctx, depth)
			if err != nil {
				t.Fatal(err)
			}
			res = *r
		}
		fork := head - uint64(depth)
		if res.ForkPoint.Number != fork || res.ForkPoint.Hash != old[fork] || res.OldHead.Hash != old[head] ||
			res.NewHead.Number != head+1 || len(res.Removed) != depth || len(res.Added) != depth+1 {
			t.Fatalf("depth %d: result %+v", depth, res)
		}
		for _, n := range []uint64{fork - 1, fork} {
			if h, _ := hashByNumber(t, cl, n); h != old[n] {
				t.Fatalf("depth %d: block %d changed: %s -> %s", depth, n, old[n], h)
			}
		}
		parent := old[fork]
		for n := fork + 1; n <= head+1; n++ {
			var b *rpcHeader
			if err := cl.CallContext(ctx, &b, "eth_getBlockByNumber", hexutil.EncodeUint64(n), false); err != nil || b == nil {
				t.Fatalf("depth %d: block %d: %v %v", depth, n, b, err)
			}
			if b.Hash == old[n] {
				t.Fatalf("depth %d: block %d still has the old hash %s", depth, n, b.Hash)
			}
			if b.ParentHash != parent {
				t.Fatalf("depth %d: block %d parent %s, want %s", depth, n, b.ParentHash, parent)
			}
			if b.Hash != res.Added[n-fork-1] {
				t.Fatalf("depth %d: block %d is %s, result says %s", depth, n, b.Hash, res.Added[n-fork-1])
			}
			parent = b.Hash
		}
		// The new head can be traced.
		var traces []txTrace
		if err := cl.CallContext(ctx, &traces, "debug_traceBlockByNumber", hexutil.EncodeUint64(head+1), map[string]any{"tracer": "callTracer"}); err != nil || len(traces) == 0 {
			t.Fatalf("depth %d: trace of new head: %d traces, %v", depth, len(traces), err)
		}
		// The subscription delivers the new branch's heads, ending with the new head.
		timeout := time.After(10 * time.Second)
	wait:
		for {
			select {
			case h := <-heads:
				if h.Hash() == res.NewHead.Hash {
					break wait
				}
			case err := <-sub.Err():
				t.Fatal(err)
			case <-timeout:
				t.Fatalf("depth %d: newHeads did not deliver the new head", depth)
			}
		}
	}

	// Archive mode: a block more than 128 blocks below the head can be traced.
	if err := c.Mine(ctx, 60); err != nil {
		t.Fatal(err)
	}
	if head := c.Head().Number; head < 130 {
		t.Fatalf("head %d: too low to check archive tracing", head)
	}
	var traces []txTrace
	if err := cl.CallContext(ctx, &traces, "debug_traceBlockByNumber", "0x2", map[string]any{"tracer": "callTracer"}); err != nil || len(traces) == 0 {
		t.Fatalf("trace of block 2 at head %d: %d traces, %v", c.Head().Number, len(traces), err)
	}

	// Out of range depths are refused.
	for _, d := range []int{0, 65} {
		if _, err := c.Reorg(ctx, d); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Fatalf("depth %d: err = %v", d, err)
		}
	}
}

// testWriter sends log lines to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
