package tokenmeta

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/moraine-data/moraine/pkg/evm"
)

func tokenAddr(n byte) evm.Address {
	var a evm.Address
	a[0], a[19] = 0x70, n
	return a
}

func abiEncodeString(s string) string {
	w := func(n int) string {
		b := make([]byte, 32)
		b[31], b[30] = byte(n), byte(n>>8)
		return hex.EncodeToString(b)
	}
	data := []byte(s)
	padded := make([]byte, (len(data)+31)/32*32)
	copy(padded, data)
	return "0x" + w(32) + w(len(data)) + hex.EncodeToString(padded)
}

func bytes32(s string) string {
	b := make([]byte, 32)
	copy(b, s)
	return "0x" + hex.EncodeToString(b)
}

func uintWord(n int) string {
	b := make([]byte, 32)
	b[31] = byte(n)
	b[30] = byte(n >> 8)
	return "0x" + hex.EncodeToString(b)
}

// node is a fake JSON-RPC node answering eth_call from a table of
// (token, selector) -> result ("revert" answers with an error).
type node struct {
	answers map[string]string
	calls   atomic.Int32
	fail    atomic.Bool
	blocks  atomic.Value // the block parameter of the last eth_call
}

func (n *node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.calls.Add(1)
	if n.fail.Load() {
		http.Error(w, "down", http.StatusBadGateway)
		return
	}
	var reqs []struct {
		ID     int               `json:"id"`
		Method string            `json:"method"`
		Params []json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&reqs); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var out []map[string]any
	for _, q := range reqs {
		var args struct{ To, Data string }
		if q.Method == "eth_blockNumber" {
			out = append(out, map[string]any{"jsonrpc": "2.0", "id": q.ID, "result": "0x10"})
			continue
		}
		if q.Method == "eth_call" && len(q.Params) > 1 {
			var block string
			_ = json.Unmarshal(q.Params[1], &block)
			n.blocks.Store(block)
		}
		if q.Method == "eth_getCode" {
			// The answers table keys code by address and method.
			_ = json.Unmarshal(q.Params[0], &args.To)
			args.Data = q.Method
		} else {
			_ = json.Unmarshal(q.Params[0], &args)
		}
		res, ok := n.answers[strings.ToLower(args.To)+args.Data]
		switch {
		case strings.HasPrefix(res, "error:"):
			code, msg, _ := strings.Cut(strings.TrimPrefix(res, "error:"), ":")
			c, _ := strconv.Atoi(code)
			out = append(out, map[string]any{"jsonrpc": "2.0", "id": q.ID, "error": map[string]any{"code": c, "message": msg}})
		case !ok || res == "revert":
			out = append(out, map[string]any{"jsonrpc": "2.0", "id": q.ID, "error": map[string]any{"code": 3, "message": "execution reverted"}})
		default:
			out = append(out, map[string]any{"jsonrpc": "2.0", "id": q.ID, "result": res})
		}
	}
	_ = json.NewEncoder(w).Encode(out)
}

var (
	usdc    = tokenAddr(1) // ABI strings, 6 decimals
	mkr     = tokenAddr(2) // bytes32 name and symbol
	nft     = tokenAddr(3) // no decimals()
	dead    = tokenAddr(4) // reverts everything
	empty   = tokenAddr(5) // answers 0x (an EOA)
	badDec  = tokenAddr(6) // decimals 300
	noName  = tokenAddr(7) // symbol only
	weirdly = tokenAddr(8) // invalid UTF-8 and NULs in the name
)

func newNode() *node {
	n := &node{answers: map[string]string{}}
	set := func(a evm.Address, name, symbol, decimals string) {
		for sel, v := range map[string]string{selName: name, selSymbol: symbol, selDecimals: decimals} {
			if v != "" {
				n.answers[a.Hex()+sel] = v
			}
		}
	}
	set(usdc, abiEncodeString("USD Coin"), abiEncodeString("USDC"), uintWord(6))
	set(mkr, bytes32("Maker"), bytes32("MKR"), uintWord(18))
	set(nft, abiEncodeString("Dokyo"), abiEncodeString("DOKYO"), "revert")
	set(dead, "revert", "revert", "revert")
	set(empty, "0x", "0x", "0x")
	set(badDec, abiEncodeString("Big"), abiEncodeString("BIG"), uintWord(300))
	set(noName, "revert", abiEncodeString("NN"), uintWord(18))
	set(weirdly, abiEncodeString("a\x00b\xffc"), abiEncodeString("W"), uintWord(0))
	return n
}

func TestResolve(t *testing.T) {
	n := newNode()
	srv := httptest.NewServer(n)
	defer srv.Close()
	reg := prometheus.NewRegistry()
	r := New(Config{BatchTokens: 3}, map[uint64][]string{43114: {srv.URL}}, Deps{Registerer: reg})
	all := []evm.Address{usdc, mkr, nft, dead, empty, badDec, noName, weirdly, usdc}
	got := r.Resolve(t.Context(), 43114, all)
	for _, tc := range []struct {
		name string
		a    evm.Address
		want *Token
	}{
		{"abi strings", usdc, &Token{Name: "USD Coin", Symbol: "USDC", Decimals: 6, HasDecimals: true}},
		{"bytes32", mkr, &Token{Name: "Maker", Symbol: "MKR", Decimals: 18, HasDecimals: true}},
		{"nft without decimals", nft, &Token{Name: "Dokyo", Symbol: "DOKYO"}},
		{"reverts", dead, nil},
		{"empty results", empty, nil},
		{"decimals out of uint8 range", badDec, &Token{Name: "Big", Symbol: "BIG"}},
		{"no name", noName, nil},
		{"sanitized text", weirdly, &Token{Name: "ab\uFFFDc", Symbol: "W", HasDecimals: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, ok := got[tc.a]
			if !ok {
				t.Fatal("missing from the result")
			}
			if (g == nil) != (tc.want == nil) || g != nil && *g != *tc.want {
				t.Fatalf("got %+v, want %+v", g, tc.want)
			}
		})
	}
	calls := n.calls.Load()
	if calls != 3 { // 8 distinct tokens in batches of 3
		t.Errorf("%d HTTP requests, want 3", calls)
	}
	// Everything is cached, answers and non-answers alike.
	again := r.Resolve(t.Context(), 43114, all)
	if n.calls.Load() != calls || len(again) != len(got) || *again[usdc] != *got[usdc] || again[dead] != nil {
		t.Fatalf("second Resolve went to the node or differs")
	}
	if hits := testutil.ToFloat64(r.lookup.WithLabelValues("hit")); hits != 8 {
		t.Errorf("hits = %v", hits)
	}
}

func TestTransportFailureIsRetriedAfterTTL(t *testing.T) {
	n := newNode()
	srv := httptest.NewServer(n)
	defer srv.Close()
	now := time.Unix(1000, 0)
	r := New(Config{FailureTTL: 30 * time.Second}, map[uint64][]string{1: {srv.URL}}, Deps{Now: func() time.Time { return now }})
	n.fail.Store(true)
	if tok := r.Resolve(t.Context(), 1, []evm.Address{usdc})[usdc]; tok != nil {
		t.Fatalf("got %+v from a failing node", tok)
	}
	n.fail.Store(false)
	// The pool tried the node a few times; the second Resolve asks nothing.
	failed := n.calls.Load()
	if tok := r.Resolve(t.Context(), 1, []evm.Address{usdc})[usdc]; tok != nil || n.calls.Load() != failed {
		t.Fatalf("failure not remembered: %+v, %d calls", tok, n.calls.Load())
	}
	now = now.Add(31 * time.Second)
	if tok := r.Resolve(t.Context(), 1, []evm.Address{usdc})[usdc]; tok == nil || tok.Symbol != "USDC" {
		t.Fatalf("not retried after the TTL: %+v", tok)
	}
}

func TestFallbackURLAndTimeout(t *testing.T) {
	n := newNode()
	good := httptest.NewServer(n)
	defer good.Close()
	r := New(Config{}, map[uint64][]string{1: {"http://127.0.0.1:1/rpc/secret-key", good.URL}}, Deps{})
	if tok := r.Resolve(t.Context(), 1, []evm.Address{mkr})[mkr]; tok == nil || tok.Symbol != "MKR" {
		t.Fatalf("second URL not used: %+v", tok)
	}

	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer slow.Close()
	defer close(release)
	r = New(Config{CallTimeout: 100 * time.Millisecond}, map[uint64][]string{1: {slow.URL}}, Deps{})
	start := time.Now()
	if tok := r.Resolve(context.Background(), 1, []evm.Address{mkr})[mkr]; tok != nil {
		t.Fatalf("got %+v", tok)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("timeout not honoured: %v", d)
	}
}

func TestUnknownChainAndEviction(t *testing.T) {
	n := newNode()
	srv := httptest.NewServer(n)
	defer srv.Close()
	r := New(Config{CacheSize: 2}, map[uint64][]string{1: {srv.URL}}, Deps{})
	if got := r.Resolve(t.Context(), 999, []evm.Address{usdc}); got[usdc] != nil {
		t.Fatal("answer for a chain without RPC")
	}
	r.Resolve(t.Context(), 1, []evm.Address{usdc, mkr, nft})
	if r.Len() != 2 {
		t.Fatalf("cache holds %d entries, want 2", r.Len())
	}
}

func TestABIDecoding(t *testing.T) {
	for _, tc := range []struct {
		in     string
		want   string
		wantOK bool
	}{
		{abiEncodeString(""), "", true},
		{abiEncodeString(strings.Repeat("x", 300)), strings.Repeat("x", maxText), true},
		{"0x" + strings.Repeat("00", 31) + "20" + strings.Repeat("ff", 32), "", false}, // length overflows
		{"0x" + strings.Repeat("ff", 64), "", false},                                   // offset overflows
		{"0x1234", "", false},
	} {
		got, ok := abiString(decodeHex(tc.in))
		if ok != tc.wantOK || got != tc.want {
			t.Errorf("abiString(%.20s…) = %q, %v", tc.in, got, ok)
		}
	}
	if _, ok := abiUint8(decodeHex("0x12")); ok {
		t.Error("short decimals accepted")
	}
	if decodeHex("0xzz") != nil || decodeHex("0x1") != nil {
		t.Error("bad hex decoded")
	}
}

func TestDescribe(t *testing.T) {
	n := newNode()
	code := func(a evm.Address) { n.answers[a.Hex()+"eth_getCode"] = "0x6080" }
	supports := func(a evm.Address, id string) {
		n.answers[a.Hex()+selSupportsInterface+id+strings.Repeat("0", 56)] = uintWord(1)
	}
	for _, a := range []evm.Address{usdc, mkr, nft, dead, noName} {
		code(a)
	}
	items := tokenAddr(9) // ERC-1155 with neither name nor symbol
	code(items)
	supports(nft, interfaceERC721)
	supports(items, interfaceERC1155)
	n.answers[usdc.Hex()+selSupportsInterface+interfaceERC721+strings.Repeat("0", 56)] = uintWord(0)
	account := tokenAddr(10) // no code: eth_getCode answers 0x
	n.answers[account.Hex()+"eth_getCode"] = "0x"
	srv := httptest.NewServer(n)
	defer srv.Close()
	reg := prometheus.NewRegistry()
	r := New(Config{BatchTokens: 4}, map[uint64][]string{1: {srv.URL}}, Deps{Registerer: reg, Subsystem: "query"})
	got, err := r.Describe(t.Context(), 1, []evm.Address{usdc, mkr, nft, dead, noName, items, account})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		a    evm.Address
		want Contract
	}{
		{"erc20 (supportsInterface false)", usdc, Contract{HasCode: true, Kind: evm.ERC20, Name: "USD Coin", Symbol: "USDC", Decimals: 6, HasDecimals: true}},
		{"erc20 bytes32", mkr, Contract{HasCode: true, Kind: evm.ERC20, Name: "Maker", Symbol: "MKR", Decimals: 18, HasDecimals: true}},
		{"erc721", nft, Contract{HasCode: true, Kind: evm.ERC721, Name: "Dokyo", Symbol: "DOKYO"}},
		{"contract answering nothing", dead, Contract{HasCode: true}},
		// Resolve's rule: a token answers name() and symbol().
		{"decimals and symbol without name", noName, Contract{HasCode: true, Symbol: "NN", Decimals: 18, HasDecimals: true}},
		{"erc1155 without metadata", items, Contract{HasCode: true, Kind: evm.ERC1155}},
		{"no code", account, Contract{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if g := got[tc.a]; g == nil || *g != tc.want {
				t.Fatalf("got %+v, want %+v", g, tc.want)
			}
		})
	}
	calls := n.calls.Load()
	if _, err := r.Describe(t.Context(), 1, []evm.Address{usdc, account}); err != nil || n.calls.Load() != calls {
		t.Fatalf("second Describe: err %v, went to the node: %v", err, n.calls.Load() != calls)
	}
	if v := testutil.ToFloat64(r.lookup.WithLabelValues("ok")); v != 6 {
		t.Errorf("ok lookups = %v, want 6 (the account has no code)", v)
	}
	if n := testutil.CollectAndCount(reg, "moraine_query_token_metadata_lookups_total"); n != 4 {
		t.Errorf("%d series under the query subsystem", n)
	}

	n.fail.Store(true)
	if got, err := r.Describe(t.Context(), 1, []evm.Address{tokenAddr(11)}); err == nil || got[tokenAddr(11)] != nil {
		t.Fatalf("a failing node gave %v, %v", got, err)
	}
	if _, err := r.Describe(t.Context(), 2, []evm.Address{usdc}); err == nil {
		t.Fatal("no error for a chain without RPC URLs")
	}
}

// Describe and Resolve decide "is a token" by one rule: the contract that
// Resolve calls no token is no ERC-20 for Describe either.
func TestOneTokenRule(t *testing.T) {
	n := newNode()
	for _, a := range []evm.Address{usdc, noName, nft} {
		n.answers[a.Hex()+"eth_getCode"] = "0x6080"
	}
	srv := httptest.NewServer(n)
	defer srv.Close()
	r := New(Config{}, map[uint64][]string{1: {srv.URL}}, Deps{})
	addrs := []evm.Address{usdc, noName, nft}
	tokens := r.Resolve(t.Context(), 1, addrs)
	contracts, err := r.Describe(t.Context(), 1, addrs)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if isToken, erc20 := tokens[a] != nil, contracts[a].Kind == evm.ERC20; isToken != erc20 && contracts[a].HasDecimals {
			t.Errorf("%s: Resolve token %v, Describe ERC-20 %v", a.Hex(), isToken, erc20)
		}
	}
}

// A failure to ask the node is an error for as long as it is remembered,
// never an answer: Describe returns the error, not "no code".
func TestFailureIsAnErrorWhileRemembered(t *testing.T) {
	n := newNode()
	n.answers[usdc.Hex()+"eth_getCode"] = "0x6080"
	srv := httptest.NewServer(n)
	defer srv.Close()
	now := time.Unix(1000, 0)
	reg := prometheus.NewRegistry()
	r := New(Config{FailureTTL: 10 * time.Second}, map[uint64][]string{1: {srv.URL}}, Deps{Now: func() time.Time { return now }, Registerer: reg})
	describe := func() (*Contract, error) {
		t.Helper()
		got, err := r.Describe(t.Context(), 1, []evm.Address{usdc})
		return got[usdc], err
	}
	n.fail.Store(true)
	if c, err := describe(); err == nil || c != nil {
		t.Fatalf("failing node: %+v, %v", c, err)
	}
	n.fail.Store(false)
	calls := n.calls.Load()
	if c, err := describe(); err == nil || c != nil || n.calls.Load() != calls {
		t.Fatalf("within FailureTTL: %+v, err %v, asked the node again: %v", c, err, n.calls.Load() != calls)
	}
	if v := testutil.ToFloat64(r.lookup.WithLabelValues("hit")); v != 0 {
		t.Errorf("a remembered failure counted as %v hits", v)
	}
	now = now.Add(11 * time.Second)
	if c, err := describe(); err != nil || c == nil || c.Kind != evm.ERC20 {
		t.Fatalf("after FailureTTL: %+v, %v", c, err)
	}

	// An RPC error answering eth_getCode is the node's failure, not an
	// address without code.
	other := tokenAddr(12)
	n.answers[other.Hex()+"eth_getCode"] = "revert" // the fake answers it with an error
	if got, err := r.Describe(t.Context(), 1, []evm.Address{other}); err == nil || got[other] != nil {
		t.Fatalf("eth_getCode error: %+v, %v", got[other], err)
	}

	// No RPC URL: an error every time, and nothing cached.
	for range 2 {
		if got, err := r.Describe(t.Context(), 2, []evm.Address{usdc}); err == nil || got[usdc] != nil {
			t.Fatalf("chain without RPC URL: %+v, %v", got[usdc], err)
		}
	}

	// A caller that gave up is not the node failing: nothing remembered.
	n.fail.Store(true)
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.Describe(gone, 1, []evm.Address{tokenAddr(13)}); err == nil {
		t.Fatal("no error for a cancelled call")
	}
	n.fail.Store(false)
	n.answers[tokenAddr(13).Hex()+"eth_getCode"] = "0x6080"
	if got, err := r.Describe(t.Context(), 1, []evm.Address{tokenAddr(13)}); err != nil || got[tokenAddr(13)] == nil || !got[tokenAddr(13)].HasCode {
		t.Fatalf("after a cancelled call: %+v, %v", got[tokenAddr(13)], err)
	}
}

// "No code" is kept AbsentTTL (a CREATE2 address can be deployed later);
// an answer is kept until evicted.
func TestAbsenceExpires(t *testing.T) {
	n := newNode()
	later := tokenAddr(14)
	n.answers[later.Hex()+"eth_getCode"] = "0x"
	n.answers[usdc.Hex()+"eth_getCode"] = "0x6080"
	srv := httptest.NewServer(n)
	defer srv.Close()
	now := time.Unix(1000, 0)
	r := New(Config{AbsentTTL: time.Minute}, map[uint64][]string{1: {srv.URL}}, Deps{Now: func() time.Time { return now }})
	describe := func(a evm.Address) *Contract {
		t.Helper()
		got, err := r.Describe(t.Context(), 1, []evm.Address{a})
		if err != nil || got[a] == nil {
			t.Fatalf("%+v, %v", got[a], err)
		}
		return got[a]
	}
	if describe(later).HasCode || !describe(usdc).HasCode {
		t.Fatal("wrong first answers")
	}
	// Deployed now; usdc destroyed (an answer stays cached regardless).
	n.answers[later.Hex()+"eth_getCode"] = "0x6080"
	n.answers[usdc.Hex()+"eth_getCode"] = "0x"
	now = now.Add(59 * time.Second)
	if describe(later).HasCode {
		t.Fatal("absence not kept within AbsentTTL")
	}
	now = now.Add(2 * time.Second)
	if !describe(later).HasCode {
		t.Fatal("absence kept past AbsentTTL: a later deployment stays unseen")
	}
	now = now.Add(time.Hour)
	if !describe(usdc).HasCode {
		t.Fatal("an answer expired")
	}
}
