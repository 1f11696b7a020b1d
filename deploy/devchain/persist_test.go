package devchain

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
)

// warnCounter is a slog handler that logs to the test and counts the records
// at level Warn and above: the chain warns about every rejected or left-out
// transaction and every failed block.
type warnCounter struct {
	slog.Handler
	n *atomic.Int64
}

func (h warnCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h warnCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return warnCounter{h.Handler.WithAttrs(as), h.n}
}

func (h warnCounter) WithGroup(name string) slog.Handler {
	return warnCounter{h.Handler.WithGroup(name), h.n}
}

// startPersistent starts a chain like startChain and also returns the count of
// its warnings. The test closes it (closing twice is harmless).
func startPersistent(t *testing.T, cfg Config) (*Chain, *atomic.Int64) {
	t.Helper()
	warns := new(atomic.Int64)
	cfg.ListenAddress = "127.0.0.1:0"
	cfg.noLogIndex = true // see Config.noLogIndex
	cfg.Logger = slog.New(warnCounter{slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}), warns})
	c, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, warns
}

func closeChain(t *testing.T, c *Chain) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// canonicalHashes returns the hashes of blocks 0..head by number.
func canonicalHashes(c *Chain) []common.Hash {
	bc := c.eth.BlockChain()
	head := bc.CurrentBlock().Number.Uint64()
	out := make([]common.Hash, head+1)
	for n := range out {
		out[n] = bc.GetCanonicalHash(uint64(n))
	}
	return out
}

// deliberateRevert reports whether tx is one of the transactions the traffic
// generator makes to fail (revertTransfer, revertDeep).
func deliberateRevert(con Contracts, tx rpcTx) bool {
	if tx.To == nil || len(tx.Input) < 4 {
		return false
	}
	switch *tx.To {
	case con.USD, con.WMOR:
		m := erc20Contract.abi.Methods["transfer"]
		if !bytes.Equal(tx.Input[:4], m.ID) {
			return false
		}
		args, err := m.Inputs.Unpack(tx.Input[4:])
		return err == nil && args[1].(*big.Int).Cmp(new(big.Int).Lsh(big.NewInt(1), 255)) == 0
	case con.Relays[0]:
		m := relayContract.abi.Methods["relay"]
		if !bytes.Equal(tx.Input[:4], m.ID) {
			return false
		}
		args, err := m.Inputs.Unpack(tx.Input[4:])
		if err != nil {
			return false
		}
		hops := args[0].([]common.Address)
		return len(hops) > 0 && hops[len(hops)-1] == con.NFT
	}
	return false
}

// checkTraffic fetches blocks from..to over JSON-RPC (block, receipts and
// callTracer traces), checks that each holds txPerBlock transactions, that
// only the deliberate reverts failed, and adds the kinds of traffic seen.
func checkTraffic(t *testing.T, cl *rpc.Client, con Contracts, from, to uint64, txPerBlock int, seen map[string]bool) {
	t.Helper()
	ctx := t.Context()
	for n := from; n <= to; n++ {
		num := hexutil.EncodeUint64(n)
		var block rpcBlock
		var receipts []rpcReceipt
		var traces []txTrace
		if err := cl.CallContext(ctx, &block, "eth_getBlockByNumber", num, true); err != nil {
			t.Fatal(err)
		}
		if err := cl.CallContext(ctx, &receipts, "eth_getBlockReceipts", num); err != nil {
			t.Fatal(err)
		}
		if err := cl.CallContext(ctx, &traces, "debug_traceBlockByNumber", num, map[string]any{"tracer": "callTracer"}); err != nil {
			t.Fatal(err)
		}
		if len(block.Transactions) != txPerBlock || len(receipts) != txPerBlock || len(traces) != txPerBlock {
			t.Fatalf("block %d: %d txs, %d receipts, %d traces; want %d", n, len(block.Transactions), len(receipts), len(traces), txPerBlock)
		}
		for i, tx := range block.Transactions {
			r := receipts[i]
			if r.Status == 0 && !deliberateRevert(con, tx) {
				t.Errorf("block %d: tx %s (to %v, input %x...) failed", n, tx.Hash, tx.To, tx.Input[:min(4, len(tx.Input))])
			}
			markKinds(tx, r, traces[i], func(k string) { seen[k] = true })
		}
	}
}

// TestRestart runs a chain with a data dir, closes it and starts it again:
// the old blocks keep their hashes, the chain grows on top of the stored head,
// the contracts are not redeployed and every kind of traffic goes on, with
// every generated transaction accepted; reorgs work before and after the
// restart.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, BlockInterval: -1, TxPerBlock: 24, Seed: 11}
	ctx := t.Context()

	// First run: the deployments, some traffic and a reorg.
	c1, warns1 := startPersistent(t, cfg)
	if err := c1.Mine(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Reorg(ctx, 2); err != nil {
		t.Fatal(err)
	}
	old := canonicalHashes(c1)
	oldHead := uint64(len(old) - 1)
	con := c1.Contracts()
	closeChain(t, c1)
	if n := warns1.Load(); n != 0 {
		t.Fatalf("first run: %d warnings", n)
	}
	st, ok, err := readDataDirState(dir)
	if err != nil || !ok || st.Branch != 1 || st.ChainID != DefaultChainID || st.Contracts != con || st.Genesis != old[0] {
		t.Fatalf("state file: %+v %v %v", st, ok, err)
	}

	// Second run: Start mines one block on top of the stored head.
	c2, warns2 := startPersistent(t, cfg)
	if head := c2.Head().Number; head != oldHead+1 {
		t.Fatalf("head after restart %d, want %d", head, oldHead+1)
	}
	if c2.branch != 1 {
		t.Fatalf("reorg counter %d after restart, want 1", c2.branch)
	}
	cl := dial(t, c2.HTTPURL())
	for n, want := range old {
		if got, ok := hashByNumber(t, cl, uint64(n)); !ok || got != want {
			t.Fatalf("block %d after restart: %s, want %s", n, got, want)
		}
	}
	var parent *rpcHeader
	if err := cl.CallContext(ctx, &parent, "eth_getBlockByNumber", hexutil.EncodeUint64(oldHead+1), false); err != nil || parent == nil || parent.ParentHash != old[oldHead] {
		t.Fatalf("block %d after restart: %+v %v, want parent %s", oldHead+1, parent, err, old[oldHead])
	}
	// The contracts were not deployed again: the deployer sent its 9
	// deployments, the metadata collections' deployments and special mints,
	// and after the restart only the two transactions that point the
	// collections at the new process's metadata server.
	ec := ethclient.NewClient(cl)
	if nonce, err := ec.NonceAt(ctx, c2.Deployer(), nil); err != nil || nonce != uint64(len(coreDeployments())+len(metaDeployments(""))+2) {
		t.Fatalf("deployer nonce %d, %v", nonce, err)
	}
	if c2.Contracts() != con {
		t.Fatalf("contracts moved: %+v", c2.Contracts())
	}
	// A block of the first run can still be traced (archive state on disk).
	var traces []txTrace
	if err := cl.CallContext(ctx, &traces, "debug_traceBlockByNumber", "0x2", map[string]any{"tracer": "callTracer"}); err != nil || len(traces) != cfg.TxPerBlock {
		t.Fatalf("trace of block 2 after restart: %d traces, %v", len(traces), err)
	}

	// Traffic of every kind after the restart, every transaction accepted.
	seen := map[string]bool{}
	next := oldHead + 1
	for len(seen) < len(trafficKinds) {
		if head := c2.Head().Number; head > oldHead+30 {
			t.Fatalf("after %d blocks only saw %v", head-oldHead, seen)
		}
		checkTraffic(t, cl, con, next, c2.Head().Number, cfg.TxPerBlock, seen)
		next = c2.Head().Number + 1
		if err := c2.Mine(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("all kinds seen within %d blocks after the restart", next-oldHead-1)

	// A reorg after the restart replaces the blocks with new transactions.
	res, err := c2.Reorg(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if res.NewHead.Number != res.OldHead.Number+1 || len(res.Added) != 4 {
		t.Fatalf("reorg after restart: %+v", res)
	}
	bc := c2.eth.BlockChain()
	oldTxs := map[common.Hash]bool{}
	for i, h := range res.Removed {
		for _, tx := range bc.GetBlock(h, res.ForkPoint.Number+1+uint64(i)).Transactions() {
			oldTxs[tx.Hash()] = true
		}
	}
	for i, h := range res.Added {
		for _, tx := range bc.GetBlock(h, res.ForkPoint.Number+1+uint64(i)).Transactions() {
			if oldTxs[tx.Hash()] {
				t.Fatalf("reorg after restart: tx %s in both branches", tx.Hash())
			}
		}
	}
	checkTraffic(t, cl, con, res.ForkPoint.Number+1, res.NewHead.Number, cfg.TxPerBlock, seen)
	final := canonicalHashes(c2)
	closeChain(t, c2)
	if n := warns2.Load(); n != 0 {
		t.Fatalf("second run: %d warnings", n)
	}

	// Third run: the reorganised branch was stored.
	c3, warns3 := startPersistent(t, cfg)
	got := canonicalHashes(c3)
	if len(got) != len(final)+1 || fmt.Sprint(got[:len(final)]) != fmt.Sprint(final) {
		t.Fatalf("third run: %d blocks (want %d), stored chain differs", len(got), len(final)+1)
	}
	if c3.branch != 2 {
		t.Fatalf("third run: reorg counter %d, want 2", c3.branch)
	}
	closeChain(t, c3)
	if n := warns3.Load(); n != 0 {
		t.Fatalf("third run: %d warnings", n)
	}
}

// TestDataDirMismatch checks that a data dir is refused with another chain id
// or another number of accounts, and while another chain uses it.
func TestDataDirMismatch(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, BlockInterval: -1, TxPerBlock: -1}
	c, _ := startPersistent(t, cfg)
	other := cfg
	other.ListenAddress = "127.0.0.1:0"
	other.Logger = slog.New(slog.DiscardHandler)
	other.noLogIndex = true
	if _, err := Start(t.Context(), other); err == nil {
		t.Fatal("second chain on the same data dir started")
	}
	closeChain(t, c)
	for _, mod := range []func(*Config){
		func(c *Config) { c.ChainID = 77 },
		func(c *Config) { c.Accounts = 3 },
	} {
		bad := other
		mod(&bad)
		if c, err := Start(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "remove the directory") {
			if c != nil {
				c.Close()
			}
			t.Fatalf("config %+v: err = %v", bad, err)
		}
	}
	// The unchanged config still starts.
	c, _ = startPersistent(t, cfg)
	closeChain(t, c)
}

const helperDirEnv = "MORAINE_DEVCHAIN_TEST_HELPER_DIR"

// TestHelperProcess is not a test: TestRestartAfterKill runs the test binary
// with only this function and helperDirEnv set. It mines blocks on a data dir
// and prints "block <number> <hash>" after each, until it is killed.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper of TestRestartAfterKill")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // if the parent is gone
	defer cancel()
	c, err := Start(ctx, Config{DataDir: dir, ListenAddress: "127.0.0.1:0", BlockInterval: -1, TxPerBlock: 16, Seed: 5, noLogIndex: true,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for ctx.Err() == nil {
		if err := c.Mine(ctx, 1); err != nil {
			t.Fatal(err)
		}
		h := c.Head()
		fmt.Printf("block %d %s\n", h.Number, h.Hash)
	}
}

// TestRestartAfterKill kills (SIGKILL) a process mining on a data dir, while it
// seals a block, and starts a chain on the same dir: it continues from the
// blocks mined before, with the same hashes, and every generated transaction
// is accepted.
func TestRestartAfterKill(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.v=false")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	printed := map[uint64]common.Hash{}
	var last uint64
	sc := bufio.NewScanner(out)
	for last < 12 && sc.Scan() {
		var n uint64
		var h string
		if _, err := fmt.Sscanf(sc.Text(), "block %d %s", &n, &h); err != nil {
			t.Fatalf("helper printed %q", sc.Text())
		}
		printed[n], last = common.HexToHash(h), n
	}
	if last < 12 {
		cmd.Wait()
		t.Fatalf("helper stopped at block %d: %v\n%s", last, sc.Err(), stderr.String())
	}
	// Kill it while it seals the next block.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(dir, stateFileName)); err != nil {
		t.Fatal(err)
	}

	cfg := Config{DataDir: dir, BlockInterval: -1, TxPerBlock: 16, Seed: 5}
	c, warns := startPersistent(t, cfg)
	got := canonicalHashes(c)
	stored := uint64(len(got) - 2) // Start mined one block on top of the stored head
	t.Logf("killed after block %d was printed; stored head %d", last, stored)
	if stored < last {
		// Mine syncs the database before it returns: the printed blocks are on disk.
		t.Fatalf("stored head %d, below the last block mined before the kill (%d)", stored, last)
	}
	for n := uint64(2); n <= min(stored, last); n++ { // block 1 is mined by Start, not printed
		if got[n] != printed[n] {
			t.Fatalf("block %d: %s after the restart, %s before", n, got[n], printed[n])
		}
	}
	if err := c.Mine(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	cl := dial(t, c.HTTPURL())
	checkTraffic(t, cl, c.Contracts(), stored+1, c.Head().Number, cfg.TxPerBlock, map[string]bool{})
	closeChain(t, c)
	if n := warns.Load(); n != 0 {
		t.Fatalf("%d warnings", n)
	}
}

// freeze runs a cycle of go-ethereum's freezer now (it runs about once a
// minute by itself): the blocks up to the finalized one move to the ancient
// store. The node wraps the database in a type of its own, hence reflection.
func freeze(t *testing.T, c *Chain) uint64 {
	t.Helper()
	v := reflect.ValueOf(c.eth.ChainDb())
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if f := v.FieldByName("Database"); v.Kind() == reflect.Struct && f.IsValid() {
		v = f
	}
	fz, ok := v.Interface().(interface{ Freeze() error })
	if !ok {
		t.Fatalf("database %T has no Freeze", v.Interface())
	}
	if err := fz.Freeze(); err != nil {
		t.Fatal(err)
	}
	frozen, err := c.eth.ChainDb().Ancients()
	if err != nil {
		t.Fatal(err)
	}
	return frozen
}

// TestReorgFrozen reorganises blocks that go-ethereum's freezer has already
// moved to its ancient store (finalized blocks, after about a minute), in
// memory and with a data dir (then also across a restart).
func TestReorgFrozen(t *testing.T) {
	for _, persist := range []bool{false, true} {
		t.Run(map[bool]string{false: "memory", true: "datadir"}[persist], func(t *testing.T) {
			cfg := Config{BlockInterval: -1, TxPerBlock: 3, Seed: 9}
			if persist {
				cfg.DataDir = t.TempDir()
			}
			c, warns := startPersistent(t, cfg)
			ctx := t.Context()
			cl := dial(t, c.HTTPURL())
			// head 41 (finalized 32), reorg from 31; head 72 (finalized 64), reorg from 8.
			for _, step := range []struct{ mine, depth int }{{40, 10}, {30, 64}} {
				if err := c.Mine(ctx, step.mine); err != nil {
					t.Fatal(err)
				}
				head := c.Head().Number
				if frozen := freeze(t, c); frozen < head-uint64(step.depth)+2 {
					t.Fatalf("head %d: %d blocks frozen, too few to test", head, frozen)
				}
				res, err := c.Reorg(ctx, step.depth)
				if err != nil {
					t.Fatalf("depth %d: %v", step.depth, err)
				}
				if res.NewHead.Number != head+1 {
					t.Fatalf("depth %d: %+v", step.depth, res)
				}
				for i, want := range res.Added {
					n := res.ForkPoint.Number + 1 + uint64(i)
					if got, ok := hashByNumber(t, cl, n); !ok || got != want || i < len(res.Removed) && got == res.Removed[i] {
						t.Fatalf("depth %d: block %d is %s, want %s", step.depth, n, got, want)
					}
				}
			}
			if err := c.Mine(ctx, 30); err != nil { // head 103, finalized 96
				t.Fatal(err)
			}
			freeze(t, c)
			final := canonicalHashes(c)
			checkTraffic(t, cl, c.Contracts(), uint64(len(final)-40), uint64(len(final)-1), cfg.TxPerBlock, map[string]bool{}) // the second reorg and after
			closeChain(t, c)
			if n := warns.Load(); n != 0 {
				t.Fatalf("%d warnings", n)
			}
			if !persist {
				return
			}
			c, _ = startPersistent(t, cfg)
			if got := canonicalHashes(c); fmt.Sprint(got[:len(final)]) != fmt.Sprint(final) {
				t.Fatal("stored chain differs after the restart")
			}
			if _, err := c.Reorg(ctx, 20); err != nil { // from 84, below the stored frozen blocks
				t.Fatal(err)
			}
			closeChain(t, c)
		})
	}
}
