package balances

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/testenv"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
	"github.com/moraine-data/moraine/schemas/record"
)

// fakeNode answers balances from a function, counting the pairs asked.
type fakeNode struct {
	mu     sync.Mutex
	asked  int
	answer func(holder evm.Address, block uint64, p schema.BalancePair) (*big.Int, error)
	native func(addr evm.Address, block uint64) (*big.Int, error)
}

func (f *fakeNode) BalancesAt(_ context.Context, _ uint64, holder evm.Address, block uint64, pairs []schema.BalancePair) ([]*big.Int, error) {
	f.mu.Lock()
	f.asked += len(pairs)
	f.mu.Unlock()
	out := make([]*big.Int, len(pairs))
	for i, p := range pairs {
		v, err := f.answer(holder, block, p)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (f *fakeNode) NativeBalance(_ context.Context, _ uint64, addr evm.Address, block uint64) (*big.Int, error) {
	return f.native(addr, block)
}

// A chain indexed from block 5000: a holder's balance of a pair is the
// node's at block 4999 plus the transfers since, read from the node once
// and kept (an ERC-721 one from the token's first transfer since, without
// the node); a pair the node cannot say is partial (its transfers only),
// and asked again by the next read; a named ERC-20 token without any
// transfer since is opened too.
func TestOpeningBalancesIntegration(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	ctx := t.Context()
	const chainID = 11
	c := newTestChain(t, conn, chainID)
	var zero evm.Address
	first := &record.Block{ChainId: chainID, Number: 5000, Hash: wordN(5000), Transactions: []*record.Transaction{{Status: 1, Logs: []*record.Log{
		erc20Log(usd, alice, bob, big.NewInt(30)),      // alice had 100 at 4999 (the node says)
		erc721Log(art, carol, alice, 7),                // carol owned #7 (its first transfer says so)
		single1155Log(items, alice, zero, alice, 1, 5), // minted: alice had 2 of #1 before
		erc20Log(multi, carol, alice, big.NewInt(1)),   // the node cannot say carol's multi
	}}}}
	for i, l := range first.Transactions[0].Logs {
		l.LogIndex = uint32(i)
	}
	c.write(first)
	c.write(&record.Block{ChainId: chainID, Number: 6000, Hash: wordN(6000), Transactions: []*record.Transaction{{Status: 1, Logs: []*record.Log{
		erc20Log(usd, bob, carol, big.NewInt(10)),
	}}}})
	c.flush()

	working := true
	node := &fakeNode{answer: func(holder evm.Address, block uint64, p schema.BalancePair) (*big.Int, error) {
		if block != 4999 {
			return nil, fmt.Errorf("asked at block %d", block)
		}
		if !working {
			return nil, errors.Join(ErrNoState, errors.New("missing trie node"))
		}
		switch {
		case p.Kind == 2:
			return nil, errors.New("ERC-721 openings come from the first transfers, not the node")
		case holder == alice && p.Token == usd:
			return big.NewInt(100), nil
		case holder == carol && p.Token == art:
			return big.NewInt(1), nil
		case holder == alice && p.Token == items:
			return big.NewInt(2), nil
		case holder == alice && p.Token == multi:
			return big.NewInt(4), nil
		case holder == carol && p.Token == multi:
			return nil, nil // a reverting balanceOf
		case holder == bob && p.Token == items && p.Kind == 3:
			return big.NewInt(9), nil // bob's, never moved since 4999
		}
		return new(big.Int), nil
	}}
	db := Conn{Conn: conn, Timeout: time.Minute}
	reader := NewReader(db, BlockTable{DB: db}, NewOpener(db, NewNFTs(db, BlockTable{DB: db}), node, 5*time.Second, slog.New(slog.DiscardHandler)))
	read := func(holder evm.Address, q Query) []string {
		t.Helper()
		q.ChainID, q.Holder = chainID, holder
		if q.Block == 0 {
			q.Block = 6000
		}
		res, err := reader.At(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if res.Progress.Complete() || res.Progress.OpeningBlock() != 4999 {
			t.Fatalf("progress %+v", res.Progress)
		}
		return describeResult(res)
	}
	want := func(got []string, want ...string) {
		t.Helper()
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	x := func(a evm.Address) string { return fmt.Sprintf("%x", a[19]) }
	want(read(alice, Query{}), "1 "+x(usd)+"#0 70", "1 "+x(multi)+"#0 5", "2 "+x(art)+"#7 1", "3 "+x(items)+"#1 7")
	want(read(carol, Query{}), "1 "+x(usd)+"#0 10", "1 "+x(multi)+"#0 -1 partial") // #7 left: 1 - 1
	asked := node.asked
	// Opened once: the second read asks the node only about the pair it
	// could not say.
	want(read(alice, Query{}), "1 "+x(usd)+"#0 70", "1 "+x(multi)+"#0 5", "2 "+x(art)+"#7 1", "3 "+x(items)+"#1 7")
	want(read(carol, Query{}), "1 "+x(usd)+"#0 10", "1 "+x(multi)+"#0 -1 partial")
	if node.asked != asked+1 {
		t.Fatalf("the node was asked about %d pairs again, want 1", node.asked-asked)
	}
	// At block 5000, with the same openings.
	want(read(bob, Query{Block: 5000}), "1 "+x(usd)+"#0 30")
	// A named ERC-20 token bob never moved since 4999 is opened; an
	// ERC-1155 one is not found by name (its ids are unknown).
	want(read(bob, Query{Kinds: []uint8{1}, Tokens: []evm.Address{usd, items}}), "1 "+x(usd)+"#0 20")
	// The node down: pairs already opened are whole, new ones partial.
	working = false
	want(read(bob, Query{Kinds: []uint8{1}, Tokens: []evm.Address{multi}}), "1 "+x(multi)+"#0 0 partial")
	want(read(bob, Query{}), "1 "+x(usd)+"#0 20")
}

// The verifier compares samples of served balances with the node's at a
// settled block: all match while the node agrees, and a token whose
// balanceOf says otherwise (a rebasing token) counts mismatches.
func TestVerifierIntegration(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	ctx := t.Context()
	const chainID = 12
	c := newTestChain(t, conn, chainID)
	s := &sim{rng: newRand(3), chainID: chainID, holders: []evm.Address{alice, bob, carol}}
	for n := uint64(0); n < 3000; n += 7 {
		c.write(s.block(n, 0))
	}
	c.flush()
	db := Conn{Conn: conn, Timeout: time.Minute}
	reader := NewReader(db, BlockTable{DB: db}, nil)
	truth := func(holder evm.Address, block uint64, p schema.BalancePair) *big.Int {
		for _, line := range c.expected(holder, block, []uint8{p.Kind}) {
			if strings.HasPrefix(line, fmt.Sprintf("%d %x#%s ", p.Kind, p.Token[19], evm.Decimal(p.TokenID[:]))) {
				v, _ := new(big.Int).SetString(line[strings.LastIndexByte(line, ' ')+1:], 10)
				return v
			}
		}
		return new(big.Int)
	}
	rebasing := false
	node := &fakeNode{
		answer: func(holder evm.Address, block uint64, p schema.BalancePair) (*big.Int, error) {
			v := truth(holder, block, p)
			if rebasing && p.Token == usd && p.Kind == 1 {
				v.Add(v, big.NewInt(1))
			}
			return v, nil
		},
		native: func(addr evm.Address, block uint64) (*big.Int, error) { return big.NewInt(int64(addr[19]) * 1000), nil },
	}
	reg := prometheus.NewRegistry()
	v := NewVerifier(VerifierConfig{Samples: 20, Depth: 100}, VerifierDeps{DB: db, Reader: reader, Node: node,
		Native: NewNative(node, time.Second, 100, reg, "test"), NativeNode: node,
		Heads:  func(context.Context) (map[uint64]uint64, error) { return map[uint64]uint64{chainID: 2996}, nil },
		Logger: slog.New(slog.DiscardHandler), Registerer: reg, Subsystem: "test"})
	count := func(kind, result string) float64 {
		return testutil.ToFloat64(v.checks.WithLabelValues(kind, result))
	}
	if err := v.Round(ctx); err != nil {
		t.Fatal(err)
	}
	matched := count("erc20", "match") + count("erc721", "match") + count("erc1155", "match")
	if matched < 10 || count("native", "match") < 2 {
		t.Fatalf("%v pairs and %v natives matched", matched, count("native", "match"))
	}
	for _, k := range []string{"erc20", "erc721", "erc1155", "native"} {
		if n := count(k, "mismatch") + count(k, "error") + count(k, "no_answer"); n != 0 {
			t.Fatalf("%s: %v checks did not match", k, n)
		}
	}
	rebasing = true
	for range 5 {
		if err := v.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if count("erc20", "mismatch") == 0 {
		t.Fatal("a token whose balanceOf differs from its transfers counted no mismatch")
	}
}
