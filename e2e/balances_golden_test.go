package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/moraine-data/moraine/pkg/balances"
	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/testenv"
)

// compareBalancesGolden checks the balance state the pipeline wrote
// (pkg/balances: the reads every balance route makes) against what the
// warehouse's LOGS table implies, with this file's own running sums:
//   - every ERC-20 balance, at every block where it changes, equals the
//     sum of the transfers up to that block (the C-Chain's from genesis);
//   - after every ERC-721 transfer, its recipient owns the token at that
//     block and its sender does not (Gunzilla's, from block 14,000,000:
//     the owner before a token's first recorded transfer is its sender);
//   - the same for ERC-1155 balances where the data has them;
//   - at the head, getTokenDetails names every NFT's last recipient and
//     listTokens lists every collection's ids.
//
// The balance lists themselves carry the chain node's native balance,
// which a replay cannot give (no state): the list routes are checked on
// the development chain (TestBalancesDevchain) against a node.
func compareBalancesGolden(t *testing.T, d dataset, s *stackUp) {
	m := goldenModel(t, d)
	db := balances.Conn{Conn: s.conn, Timeout: time.Minute}
	blocks := balances.BlockTable{DB: db}
	nfts := balances.NewNFTs(db, blocks)
	reader := balances.NewReader(db, blocks, balances.NewOpener(db, nfts, nil, time.Second, testenv.Logger(t)))
	ctx := t.Context()
	addr := func(a string) evm.Address {
		var out evm.Address
		b, _ := hex.DecodeString(strings.TrimPrefix(a, "0x"))
		copy(out[:], b)
		return out
	}
	kindOf := map[int]uint8{20: 1, 721: 2, 1155: 3}
	// held reads what holder holds of one kind and token at block:
	// "token#id" (ERC-20: "token#") -> balance, "partial" where an opening
	// is unknown.
	var spent time.Duration
	nreads := 0
	held := func(holder string, kind int, token string, block uint64) map[string]string {
		t0 := time.Now()
		defer func() { spent += time.Since(t0); nreads++ }()
		res, err := reader.At(ctx, balances.Query{ChainID: d.chainID, Holder: addr(holder), Block: block,
			Kinds: []uint8{kindOf[kind]}, Tokens: []evm.Address{addr(token)}})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, h := range res.Holdings {
			id := ""
			if kind != 20 {
				id = evm.Decimal(h.TokenID[:])
			}
			k := token + "#" + id
			if out[k] = h.Balance.String(); h.Partial {
				out[k] = "partial"
			}
		}
		return out
	}
	balanceOf := func(got map[string]string, token, id string) string { return cmpOr(got[token+"#"+id], "0") }

	type key struct {
		kind              int
		holder, token, id string
	}
	sums := map[key]*big.Int{}
	owner := map[[2]string]string{} // ERC-721 (token, id) -> its last recipient
	var ids []string                // ERC-721 "token#id" in first-seen order
	mm := &mismatches{t: t, where: d.name + " balances"}
	compared := 0
	txs := slices.Clone(m.txs)
	sort.SliceStable(txs, func(i, j int) bool {
		return txs[i].block < txs[j].block || txs[i].block == txs[j].block && txs[i].index < txs[j].index
	})
	for i := 0; i < len(txs); {
		b := txs[i].block
		touched := map[key]bool{}
		var last721 []hTransfer
		for ; i < len(txs) && txs[i].block == b; i++ {
			if txs[i].status != "1" {
				continue
			}
			for _, tr := range txs[i].transfers {
				v, _ := new(big.Int).SetString(tr.value, 10)
				for _, side := range []struct {
					who  string
					sign int64
				}{{tr.from, -1}, {tr.to, 1}} {
					if side.who == zeroAddress {
						continue
					}
					k := key{tr.kind, side.who, tr.token, tr.tokenID}
					if sums[k] == nil {
						sums[k] = new(big.Int)
					}
					sums[k].Add(sums[k], new(big.Int).Mul(v, big.NewInt(side.sign)))
					touched[k] = true
				}
				if tr.kind == 721 {
					nft := [2]string{tr.token, tr.tokenID}
					if _, seen := owner[nft]; !seen {
						ids = append(ids, tr.token+"#"+tr.tokenID)
					}
					owner[nft] = tr.to
					last721 = append(last721, tr)
				}
			}
		}
		// One read per (holder, kind, token) the block touched.
		type read struct {
			kind          int
			holder, token string
		}
		reads := map[read]map[string]string{}
		get := func(kind int, holder, token string) map[string]string {
			r := read{kind, holder, token}
			if _, ok := reads[r]; !ok {
				reads[r] = held(holder, kind, token, b)
			}
			return reads[r]
		}
		for k := range touched {
			if k.kind == 721 {
				continue // below: owners, whatever came before the recording
			}
			got := balanceOf(get(k.kind, k.holder, k.token), k.token, k.id)
			mm.check(fmt.Sprintf("%s of %s#%s at %d", k.holder, k.token, k.id, b), "balance", got, sums[k].String())
			compared++
		}
		for _, tr := range last721 {
			nft := [2]string{tr.token, tr.tokenID}
			for _, who := range []string{tr.from, tr.to} {
				if who == zeroAddress {
					continue
				}
				want := "0"
				if owner[nft] == who {
					want = "1"
				}
				got := balanceOf(get(721, who, tr.token), tr.token, tr.tokenID)
				mm.check(fmt.Sprintf("%s of %s#%s at %d", who, tr.token, tr.tokenID, b), "owned", got, want)
				compared++
			}
		}
	}
	mm.done(compared)
	t.Logf("%d balances at the blocks where they change equal the warehouse's transfers (%d reads in %s)", compared, nreads, spent)

	// At the head, through the API: every NFT's owner, every collection's ids.
	api := &mismatches{t: t, where: d.name + " NFT routes"}
	byToken := map[string][]string{}
	for i, nft := range ids {
		token, id := nft[:42], nft[43:]
		byToken[token] = append(byToken[token], id)
		if i%7 != 0 {
			continue // a sample: listTokens below lists them all
		}
		var got map[string]any
		if code := getJSON(t, fmt.Sprintf("%s/v1/chains/%d/nfts/collections/%s/tokens/%s", s.api, d.chainID, token, id), &got); code != http.StatusOK {
			t.Fatalf("getTokenDetails %s: %d", nft, code)
		}
		want := owner[[2]string{token, id}]
		if want == zeroAddress {
			want = "" // burnt: no owner
		}
		api.check(nft, "ownerAddress", lower(str(got["ownerAddress"])), want)
	}
	for token, want := range byToken {
		var got []string
		for _, it := range pagesOf(t, fmt.Sprintf("%s/v1/chains/%d/nfts/collections/%s/tokens?pageSize=100", s.api, d.chainID, token), "tokens") {
			got = append(got, it["tokenId"].(string))
		}
		sortDecimal(want)
		api.check(token, "token ids", fmt.Sprint(len(got), got[:min(5, len(got))]), fmt.Sprint(len(want), want[:min(5, len(want))]))
	}
	api.done(len(ids))
	ctx2, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var deltas uint64
	if err := s.conn.QueryRow(ctx2, "SELECT count() FROM balances WHERE substring(bal_key, 9, 1) = unhex('00')").Scan(&deltas); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ERC-721 tokens checked through the API; %d delta rows", len(ids), deltas)
}

// TestBalancesEthereumBlock: the recordings of the C-Chain and Gunzilla
// hold no ERC-20 transfer, so the real ERC-20 data is Ethereum mainnet
// block 18,000,000 (erigon's RPC tests: 94 transactions, two of them
// failed, 141 ERC-20 transfers of 34 tokens). Indexed alone (a chain
// starting at that block, without a node to open balances), every
// holder's balance of every token is partial and is exactly its change in
// the block: the sum of the block's transfers from successful
// transactions, which this test computes from the receipts itself.
func TestBalancesEthereumBlock(t *testing.T) {
	read := func(name string) json.RawMessage {
		raw := zstdFile(t, testenv.SharedData(t, "ethereum/erigon_rpc_tests/"+name))
		var pairs []struct {
			Response struct {
				Result json.RawMessage `json:"result"`
			} `json:"response"`
		}
		if err := json.Unmarshal(raw, &pairs); err != nil || len(pairs) == 0 {
			t.Fatalf("%s: %v", name, err)
		}
		return pairs[0].Response.Result
	}
	block, receipts := read("eth_getBlockByNumber_18000000_fullTx.json.zst"), read("eth_getBlockReceipts_18000000.json.zst")
	file := filepath.Join(t.TempDir(), "block_18000000.jsonl")
	line, _ := json.Marshal(map[string]any{"block": block, "receipts": receipts, "traces": []any{}})
	if err := os.WriteFile(file, append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	rpcAddr := freeAddr(t)
	start(t, "replay", "--replay.file", file, "--chain.id", "1", "--replay.mode", "backfill", "--rpc.listen-address", rpcAddr)
	eventually(t, 30*time.Second, "replay source", func() bool {
		_, err := rpcCall("http://"+rpcAddr, "eth_blockNumber")
		return err == nil
	})
	s := startServices(t, `{"evmChainId":"1","name":"Ethereum block 18,000,000","network":"mainnet","rpcUrls":["http://`+rpcAddr+`"],
		"networkToken":{"name":"Ether","symbol":"ETH","decimals":18},"traces":false,"replay":true,"startBlock":18000000}`, pipelineOpts{})
	eventually(t, 2*time.Minute, "block 18,000,000 in ClickHouse", func() bool {
		var n uint64
		_ = s.conn.QueryRow(context.Background(), "SELECT count() FROM chain_heads FINAL WHERE chain_id = 1 AND number = 18000000").Scan(&n)
		return n == 1
	})

	var rs []struct {
		Status string `json:"status"`
		Logs   []struct {
			Address string   `json:"address"`
			Topics  []string `json:"topics"`
			Data    string   `json:"data"`
		} `json:"logs"`
	}
	if err := json.Unmarshal(receipts, &rs); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]*big.Int{} // holder -> token -> change
	transfers, failed := 0, 0
	for _, r := range rs {
		for _, l := range r.Logs {
			if len(l.Topics) != 3 || l.Topics[0] != topicTransfer || len(l.Data) != 66 {
				continue
			}
			if r.Status != "0x1" {
				failed++
				continue
			}
			transfers++
			v := hexToBig(l.Data)
			for i, who := range []string{topicAddr(l.Topics[1]), topicAddr(l.Topics[2])} {
				if who == zeroAddress {
					continue
				}
				if want[who] == nil {
					want[who] = map[string]*big.Int{}
				}
				tok := lower(l.Address)
				if want[who][tok] == nil {
					want[who][tok] = new(big.Int)
				}
				if i == 0 {
					want[who][tok].Sub(want[who][tok], v)
				} else {
					want[who][tok].Add(want[who][tok], v)
				}
			}
		}
	}
	db := balances.Conn{Conn: s.conn, Timeout: time.Minute}
	reader := balances.NewReader(db, balances.BlockTable{DB: db}, nil)
	mm := &mismatches{t: t, where: "block 18,000,000"}
	compared := 0
	for holder, toks := range want {
		var h evm.Address
		b, _ := hex.DecodeString(holder[2:])
		copy(h[:], b)
		res, err := reader.At(t.Context(), balances.Query{ChainID: 1, Holder: h, Block: 18000000, Kinds: []uint8{1}})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, x := range res.Holdings {
			if !x.Partial {
				t.Errorf("%s: a balance of a chain indexed from this block without its opening is not partial", holder)
			}
			got[evm.Address(x.Token).Hex()] = x.Balance.String()
		}
		for tok, v := range toks {
			w := v.String()
			if v.Sign() == 0 {
				w = "" // a change that nets to nothing writes no row
			}
			mm.check(holder+" "+tok, "change", got[tok], w)
			compared++
		}
	}
	mm.done(compared)
	if transfers != 141 || res(t, s) == 0 {
		t.Fatalf("%d transfers of successful transactions (%d of failed ones)", transfers, failed)
	}
	t.Logf("%d holders' changes of %d (holder, token) pairs equal the block's %d transfers", len(want), compared, transfers)
}

// zstdFile reads a zstd-compressed file whole.
func zstdFile(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// res is the number of delta rows written.
func res(t *testing.T, s *stackUp) uint64 {
	var n uint64
	if err := s.conn.QueryRow(context.Background(), "SELECT count() FROM balances").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkMetadataRoutes checks that the fetched metadata of the development
// chain's special NFTs (one per indexStatus) is what getTokenDetails
// renders, and for ERC-721 what the owner's listErc721Balances renders:
// the balance routes read the metadata worker's table (pkg/nftmeta).
func checkMetadataRoutes(t *testing.T, s *stackUp, special map[string]string, rows map[string]nftRow) {
	checked := 0
	for key, want := range special {
		contract, id, _ := strings.Cut(key, "/")
		var d map[string]any
		if code := getJSON(t, fmt.Sprintf("%s/v1/chains/%d/nfts/collections/%s/tokens/%s", s.api, s.chain, contract, id), &d); code != http.StatusOK {
			t.Errorf("getTokenDetails %s: %d", key, code)
			continue
		}
		md, _ := d["metadata"].(map[string]any)
		if got := str(md["indexStatus"]); got != want {
			t.Errorf("getTokenDetails %s: indexStatus %s, want %s", key, got, want)
		}
		if name := rows[key].name; name != "" && str(md["name"]) != name {
			t.Errorf("getTokenDetails %s: metadata.name %q, want %q", key, md["name"], name)
		}
		checked++
		owner := lower(str(d["ownerAddress"]))
		if d["ercType"] != "ERC-721" || owner == "" {
			continue
		}
		found := false
		for _, it := range pagesOf(t, fmt.Sprintf("%s/v1/chains/%d/addresses/%s/balances:listErc721?contractAddress=%s&pageSize=500", s.api, s.chain, owner, contract), "erc721TokenBalances") {
			if it["tokenId"] == id {
				found = true
				if got := str(it["metadata"].(map[string]any)["indexStatus"]); got != want {
					t.Errorf("listErc721Balances of %s, %s: indexStatus %s, want %s", owner, key, got, want)
				}
			}
		}
		if !found {
			t.Errorf("listErc721Balances of %s lacks %s", owner, key)
		}
	}
	if checked == 0 {
		t.Fatal("no NFT checked")
	}
	t.Logf("%d NFTs' metadata through getTokenDetails and their owners' lists", checked)
}
