package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBalancesDevchain runs the development chain's traffic (ERC-20 mints
// and transfers, ERC-721 mints and transfers, ERC-1155 single and batch,
// tokens created by a factory, reverted transfers) through the pipeline
// for more than a level-1 bucket of blocks, with reorgs, and checks every
// balance route against the node's own balanceOf / ownerOf /
// eth_getBalance at the same block: at the head, just below it (unsettled,
// after a reorg there), on both sides of the first bucket boundary (summed
// by the roller) and at reorged blocks. Then the NFT routes, the official
// SDK, the verifier's metric, and a second pipeline indexing the same chain
// from a later block (opening balances from the node).
func TestBalancesDevchain(t *testing.T) {
	rpcAddr := freeAddr(t)
	start(t, "devchain", "--rpc.listen-address", rpcAddr, "--block.interval", "0s", "--traffic.tx-per-block", "12")
	rpcURL := "http://" + rpcAddr
	eventually(t, 60*time.Second, "devchain RPC", func() bool {
		_, err := rpcCall(rpcURL, "eth_blockNumber")
		return err == nil
	})
	mined := time.Now()
	for range 1060 / 53 { // a call of its own per 53 blocks: one long call would time out
		if _, err := rpcCall(rpcURL, "moraine_mine", 53); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("mined 1,060 blocks in %s", time.Since(mined).Round(time.Millisecond))
	chainJSON := func(startBlock uint64) string {
		return `{"evmChainId":"43112","name":"Development chain","network":"devnet",
		"rpcUrls":["` + rpcURL + `"],"wsUrl":"ws://` + rpcAddr + `","networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},
		"traces":true,"webhooks":true,"startBlock":` + strconv.FormatUint(startBlock, 10) + `}`
	}
	opts := pipelineOpts{
		// Buckets are summed 16 blocks past their end (the reorgs below are
		// 3 deep), and the verifier checks 16 below the head every second.
		processorArgs: []string{"--processor.balances-settle-blocks", "16"},
		queryArgs: []string{"--query.reorg-window", "4", "--balances.verify-interval", "1s", "--balances.verify-depth", "16",
			"--balances.verify-samples", "10"},
	}
	s := startServices(t, chainJSON(0), opts)
	waitHead := func(s *stackUp) uint64 {
		raw, err := rpcCall(rpcURL, "eth_getBlockByNumber", "latest", false)
		if err != nil {
			t.Fatal(err)
		}
		var head struct{ Number, Hash string }
		_ = json.Unmarshal(raw, &head)
		n := hexToBig(head.Number).Uint64()
		eventually(t, 3*time.Minute, "head "+head.Hash+" in ClickHouse", func() bool {
			var got string
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.conn.QueryRow(ctx, "SELECT lower(hex(hash)) FROM chain_heads FINAL WHERE chain_id = 43112 AND number = ?", n).Scan(&got)
			return "0x"+got == lower(head.Hash)
		})
		return n
	}
	head := waitHead(s)
	// A reorg below the head, then more blocks (the orphaned blocks settle),
	// then one at the head that stays unsettled.
	if _, err := rpcCall(rpcURL, "moraine_reorg", 3); err != nil {
		t.Fatal(err)
	}
	reorged := []uint64{head - 2, head - 1, head}
	if _, err := rpcCall(rpcURL, "moraine_mine", 30); err != nil {
		t.Fatal(err)
	}
	waitHead(s)
	if _, err := rpcCall(rpcURL, "moraine_reorg", 2); err != nil {
		t.Fatal(err)
	}
	head = waitHead(s)
	time.Sleep(6 * time.Second) // the query service's settled snapshot refreshes every 5 s

	// The roller summed the settled buckets.
	var buckets uint64
	if err := s.conn.QueryRow(context.Background(), "SELECT argMax(value, version) FROM balance_progress WHERE chain_id = 43112 AND kind = 1").Scan(&buckets); err != nil {
		t.Fatal(err)
	}
	if buckets < 1 {
		t.Fatalf("no balance bucket summed at head %d", head)
	}
	o := newNodeOracle(t, rpcURL, 0, head)
	t.Logf("head %d, %d level-1 buckets summed; %d holders, %d ERC-20 tokens, %d ERC-721 ids, %d ERC-1155 ids",
		head, buckets, len(o.holders), len(o.erc20), o.count(o.erc721), o.count(o.erc1155))
	for _, k := range []string{"mint", "erc20", "erc721", "erc1155", "batch"} {
		if o.kinds[k] == 0 {
			t.Fatalf("the traffic has no %s transfer: %v", k, o.kinds)
		}
	}
	// The head (lists paged 7 at a time), the block below it (a reorg
	// replaced both), both sides of the first bucket boundary (summed),
	// a block of the first reorg's branch, and an early block.
	for _, b := range []uint64{head, head - 1, 1023, 1024, reorged[1], 500} {
		t.Run(fmt.Sprintf("block %d", b), func(t *testing.T) { compareBalances(t, s.api, o, b, o.holders, false, b == head) })
	}
	t.Run("NFT routes", func(t *testing.T) { compareNFTRoutes(t, s.api, o, head) })
	t.Run("official SDK", func(t *testing.T) { runBalancesSDK(t, s.api, o, head) })
	t.Run("verifier", func(t *testing.T) {
		checks := func() map[string]float64 { return scrape(t, s.metrics["query"], "moraine_query_balance_checks_total") }
		eventually(t, time.Minute, "verifier checks", func() bool {
			c := checks()
			return c[`{kind="erc20",result="match"}`] > 0 && c[`{kind="native",result="match"}`] > 0
		})
		c := checks()
		for _, k := range []string{"erc20", "erc721", "erc1155", "native"} {
			if n := c[`{kind="`+k+`",result="mismatch"}`]; n != 0 {
				t.Errorf("%s: %v mismatches", k, n)
			}
		}
		t.Logf("verifier: %v", c)
	})

	// The same chain indexed from block 777: balances are opened at block
	// 776 by the node, so the pairs moved since are exact, and the lists
	// say they may lack the others.
	t.Run("indexed from block 777", func(t *testing.T) {
		late := startServices(t, chainJSON(777), opts)
		head := waitHead(late)
		since := newNodeOracle(t, rpcURL, 777, head)
		compareBalances(t, late.api, newNodeOracleScope(o, since), head, since.holders, true, false)
		resp, err := http.Get(fmt.Sprintf("%s/v1/chains/43112/addresses/%s/balances:listErc20", late.api, since.holders[0]))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-Moraine-Incomplete"); !strings.Contains(got, "indexed from block 777") {
			t.Errorf("X-Moraine-Incomplete: %q", got)
		}
		if code := getJSON(t, fmt.Sprintf("%s/v1/chains/43112/addresses/%s/balances:getNative?blockNumber=700", late.api, since.holders[0]), nil); code != http.StatusBadRequest {
			t.Errorf("a block before the opening block: %d, want 400", code)
		}
	})
}

// nodeOracle is what the node says: the canonical transfer logs of a block
// range, and balances read with eth_call at any block.
type nodeOracle struct {
	t       testing.TB
	url     string
	holders []string
	erc20   []string            // ERC-20 tokens
	erc721  map[string][]string // token -> ids (decimal)
	erc1155 map[string][]string
	kinds   map[string]int
}

func (o *nodeOracle) count(m map[string][]string) int {
	n := 0
	for _, ids := range m {
		n += len(ids)
	}
	return n
}

// newNodeOracle reads the transfer logs of blocks from..to.
func newNodeOracle(t testing.TB, rpcURL string, from, to uint64) *nodeOracle {
	raw, err := rpcCall(rpcURL, "eth_getLogs", map[string]any{"fromBlock": fmt.Sprintf("0x%x", from), "toBlock": fmt.Sprintf("0x%x", to),
		"topics": []any{[]string{topicTransfer, topicTransferSingle, topicTransferBatch}}})
	if err != nil {
		t.Fatal(err)
	}
	var logs []struct {
		Address string   `json:"address"`
		Topics  []string `json:"topics"`
		Data    string   `json:"data"`
	}
	if err := json.Unmarshal(raw, &logs); err != nil {
		t.Fatal(err)
	}
	o := &nodeOracle{t: t, url: rpcURL, erc721: map[string][]string{}, erc1155: map[string][]string{}, kinds: map[string]int{}}
	holders, erc20 := map[string]bool{}, map[string]bool{}
	ids := map[string]map[string]bool{}
	addID := func(m map[string][]string, token, id string) {
		if ids[token] == nil {
			ids[token] = map[string]bool{}
		}
		if !ids[token][id] {
			ids[token][id] = true
			m[token] = append(m[token], id)
		}
	}
	party := func(topic string) string {
		a := "0x" + topic[len(topic)-40:]
		if a != zeroAddress {
			holders[a] = true
		} else {
			o.kinds["mint"]++
		}
		return a
	}
	for _, l := range logs {
		token := lower(l.Address)
		data := strings.TrimPrefix(l.Data, "0x")
		switch {
		case l.Topics[0] == topicTransfer && len(l.Topics) == 3 && len(data) == 64:
			party(l.Topics[1])
			party(l.Topics[2])
			erc20[token] = true
			o.kinds["erc20"]++
		case l.Topics[0] == topicTransfer && len(l.Topics) == 4:
			party(l.Topics[1])
			party(l.Topics[2])
			addID(o.erc721, token, hexToDec(l.Topics[3]))
			o.kinds["erc721"]++
		case l.Topics[0] == topicTransferSingle && len(l.Topics) == 4:
			party(l.Topics[2])
			party(l.Topics[3])
			addID(o.erc1155, token, hexToDec("0x"+data[:64]))
			o.kinds["erc1155"]++
		case l.Topics[0] == topicTransferBatch && len(l.Topics) == 4:
			party(l.Topics[2])
			party(l.Topics[3])
			n := hexToBig(data[128:192]).Int64() // the ids array: offset, then length, then words
			for i := range n {
				addID(o.erc1155, token, hexToDec("0x"+data[192+64*i:256+64*i]))
			}
			o.kinds["batch"]++
		}
	}
	for a := range holders {
		o.holders = append(o.holders, a)
	}
	for a := range erc20 {
		o.erc20 = append(o.erc20, a)
	}
	sort.Strings(o.holders)
	sort.Strings(o.erc20)
	return o
}

// newNodeOracleScope is full with the tokens and ids of since only (what a
// late-start chain's lists can know).
func newNodeOracleScope(full, since *nodeOracle) *nodeOracle {
	out := *full
	out.holders, out.erc20, out.erc721, out.erc1155 = since.holders, since.erc20, since.erc721, since.erc1155
	return &out
}

// calls runs eth_calls at block in JSON-RPC batches and returns their
// results as numbers (nil for a revert).
func (o *nodeOracle) calls(block uint64, reqs [][2]string) []*big.Int {
	out := make([]*big.Int, len(reqs))
	for i, r := range o.rawCalls(block, reqs) {
		if r != "" {
			out[i] = hexToBig(r)
		}
	}
	return out
}

// rawCalls runs eth_calls at block in JSON-RPC batches and returns their
// hex results ("" for a revert).
func (o *nodeOracle) rawCalls(block uint64, reqs [][2]string) []string {
	out := make([]string, len(reqs))
	for lo := 0; lo < len(reqs); lo += 200 {
		part := reqs[lo:min(lo+200, len(reqs))]
		var batch []map[string]any
		for i, r := range part {
			batch = append(batch, map[string]any{"jsonrpc": "2.0", "id": i, "method": "eth_call",
				"params": []any{map[string]string{"to": r[0], "data": r[1]}, fmt.Sprintf("0x%x", block)}})
		}
		body, _ := json.Marshal(batch)
		resp, err := http.Post(o.url, "application/json", strings.NewReader(string(body)))
		if err != nil {
			o.t.Fatal(err)
		}
		var answers []struct {
			ID     int    `json:"id"`
			Result string `json:"result"`
			Error  any    `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&answers)
		resp.Body.Close()
		if err != nil {
			o.t.Fatal(err)
		}
		for _, a := range answers {
			if a.Error == nil {
				out[lo+a.ID] = a.Result
			}
		}
	}
	return out
}

func word(dec string) string {
	n, _ := new(big.Int).SetString(dec, 10)
	return fmt.Sprintf("%064x", n)
}

func padAddr(a string) string { return strings.Repeat("0", 24) + strings.TrimPrefix(a, "0x") }

// expected is what the node says holder holds at block: ERC-20 token ->
// balance, ERC-721 "token#id", ERC-1155 "token#id" -> balance (non-zero
// only).
func (o *nodeOracle) expected(block uint64, holders []string) (erc20, erc721, erc1155 map[string]map[string]string) {
	erc20, erc721, erc1155 = map[string]map[string]string{}, map[string]map[string]string{}, map[string]map[string]string{}
	for _, h := range holders {
		erc20[h], erc721[h], erc1155[h] = map[string]string{}, map[string]string{}, map[string]string{}
	}
	var reqs [][2]string
	var keys [][3]string // kind, holder, key
	for _, h := range holders {
		for _, tok := range o.erc20 {
			reqs = append(reqs, [2]string{tok, "0x70a08231" + padAddr(h)})
			keys = append(keys, [3]string{"20", h, tok})
		}
	}
	for tok, ids := range o.erc721 {
		for _, id := range ids {
			reqs = append(reqs, [2]string{tok, "0x6352211e" + word(id)})
			keys = append(keys, [3]string{"721", "", tok + "#" + id})
		}
	}
	// ERC-1155 by balanceOfBatch, the getter every standard ERC-1155
	// contract has with the standard's argument order (the development
	// chain's balanceOf takes (id, account)).
	var batches [][2]string
	var batchKeys [][2]string // holder, token
	for _, h := range holders {
		for tok, ids := range o.erc1155 {
			data := "0x4e1273f4" + word("64") + word(strconv.Itoa(64+32+32*len(ids))) + word(strconv.Itoa(len(ids)))
			for range ids {
				data += padAddr(h)
			}
			data += word(strconv.Itoa(len(ids)))
			for _, id := range ids {
				data += word(id)
			}
			batches = append(batches, [2]string{tok, data})
			batchKeys = append(batchKeys, [2]string{h, tok})
		}
	}
	// A contract without balanceOfBatch (the development chain's metadata
	// collection) is asked id by id through its balanceOf(id, account)
	// getter.
	var singles [][2]string
	var singleKeys [][3]string // holder, token, id
	for i, r := range o.rawCalls(block, batches) {
		h, tok := batchKeys[i][0], batchKeys[i][1]
		r = strings.TrimPrefix(r, "0x")
		if len(r) < 128+64*len(o.erc1155[tok]) {
			for _, id := range o.erc1155[tok] {
				singles = append(singles, [2]string{tok, "0x3656eec2" + word(id) + padAddr(h)})
				singleKeys = append(singleKeys, [3]string{h, tok, id})
			}
			continue
		}
		for j, id := range o.erc1155[tok] {
			if v := hexToBig(r[128+64*j : 192+64*j]); v.Sign() != 0 {
				erc1155[h][tok+"#"+id] = v.String()
			}
		}
	}
	for i, v := range o.calls(block, singles) {
		if v == nil {
			o.t.Fatalf("neither balanceOfBatch nor balanceOf(id, account) of %s answers", singleKeys[i][1])
		}
		if v.Sign() != 0 {
			k := singleKeys[i]
			erc1155[k[0]][k[1]+"#"+k[2]] = v.String()
		}
	}
	for i, v := range o.calls(block, reqs) {
		k := keys[i]
		switch {
		case v == nil || (k[0] != "721" && v.Sign() == 0):
		case k[0] == "20":
			erc20[k[1]][k[2]] = v.String()
		case k[0] == "721":
			owner := "0x" + fmt.Sprintf("%064x", v)[24:]
			if m, ok := erc721[owner]; ok {
				m[k[2]] = "1"
			}
		}
	}
	return erc20, erc721, erc1155
}

// pagesOf follows a balance list's pages and returns its items.
func pagesOf(t testing.TB, first string, key string) []map[string]any {
	var out []map[string]any
	next := ""
	for range 100 {
		u := first
		if next != "" {
			u += "&pageToken=" + url.QueryEscape(next)
		}
		var page map[string]any
		if code := getJSON(t, u, &page); code != http.StatusOK {
			t.Fatalf("GET %s: %d", u, code)
		}
		for _, it := range page[key].([]any) {
			out = append(out, it.(map[string]any))
		}
		if next, _ = page["nextPageToken"].(string); next == "" {
			return out
		}
	}
	t.Fatalf("%s: more than 100 pages", first)
	return nil
}

// compareBalances checks every balance route of every holder at block
// with the node's answers (paged: 7 items a page). With partial, a holder's ERC-721 and ERC-1155
// list may lack NFTs it has not moved since the chain's first indexed
// block (o then names only the tokens and ids of transfers since).
func compareBalances(t *testing.T, api string, o *nodeOracle, block uint64, holders []string, partial, paged bool) {
	e20, e721, e1155 := o.expected(block, holders)
	bad, compared := 0, 0
	diff := func(what string, got, want map[string]string) {
		if partial {
			// The list lacks what the holder has not moved since the
			// first indexed block; what it lists must be exact.
			want = restrict(want, got)
		}
		compared += len(want)
		for k, w := range want {
			if got[k] != w {
				bad++
				t.Errorf("%s %s: got %q, want %q", what, k, got[k], w)
			}
		}
		if !partial {
			for k, g := range got {
				if _, ok := want[k]; !ok {
					bad++
					t.Errorf("%s %s: got %q, want none", what, k, g)
				}
			}
		}
	}
	for _, h := range holders {
		base := fmt.Sprintf("%s/v1/chains/43112/addresses/%s/balances:", api, h)
		q := fmt.Sprintf("?blockNumber=%d&pageSize=500", block)
		if paged {
			q = fmt.Sprintf("?blockNumber=%d&pageSize=7", block)
		}
		got := map[string]string{}
		for _, it := range pagesOf(t, base+"listErc20"+q, "erc20TokenBalances") {
			got[lower(it["address"].(string))] = it["balance"].(string)
		}
		diff(h+" ERC-20", got, e20[h])
		got = map[string]string{}
		for _, it := range pagesOf(t, base+"listErc721"+q, "erc721TokenBalances") {
			if lower(it["ownerAddress"].(string)) != h {
				t.Errorf("%s: ownerAddress %s", h, it["ownerAddress"])
			}
			got[lower(it["address"].(string))+"#"+it["tokenId"].(string)] = "1"
		}
		diff(h+" ERC-721", got, e721[h])
		got = map[string]string{}
		for _, it := range pagesOf(t, base+"listErc1155"+q, "erc1155TokenBalances") {
			got[lower(it["address"].(string))+"#"+it["tokenId"].(string)] = it["balance"].(string)
		}
		diff(h+" ERC-1155", got, e1155[h])
		collectibles := pagesOf(t, base+"listCollectibles"+q, "collectibleBalances")
		if !partial && len(collectibles) != len(e721[h])+len(e1155[h]) {
			t.Errorf("%s: %d collectibles, want %d", h, len(collectibles), len(e721[h])+len(e1155[h]))
		}
		var native map[string]any
		if code := getJSON(t, base+"getNative?blockNumber="+strconv.FormatUint(block, 10), &native); code != http.StatusOK {
			t.Fatalf("getNative: %d", code)
		}
		raw, err := rpcCall(o.url, "eth_getBalance", h, fmt.Sprintf("0x%x", block))
		if err != nil {
			t.Fatal(err)
		}
		var hexBal string
		_ = json.Unmarshal(raw, &hexBal)
		if got, want := native["nativeTokenBalance"].(map[string]any)["balance"], hexToDec(hexBal); got != want {
			bad++
			t.Errorf("%s native: got %v, want %s", h, got, want)
		}
		compared++
		if bad > 20 {
			t.Fatal("too many differences")
		}
	}
	if compared < len(holders)+10 {
		t.Fatalf("block %d: only %d balances compared", block, compared)
	}
	t.Logf("block %d: %d holders, %d balances equal the node's", block, len(holders), compared)
}

// restrict keeps want's entries that got lists too.
func restrict(want, got map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		if _, ok := got[k]; ok {
			out[k] = v
		}
	}
	return out
}

// compareNFTRoutes checks listTokens and getTokenDetails of every NFT
// collection at the head with the node.
func compareNFTRoutes(t *testing.T, api string, o *nodeOracle, head uint64) {
	for tok, ids := range o.erc721 {
		var got []string
		for _, it := range pagesOf(t, fmt.Sprintf("%s/v1/chains/43112/nfts/collections/%s/tokens?pageSize=100", api, tok), "tokens") {
			got = append(got, it["tokenId"].(string))
		}
		want := slices.Clone(ids)
		sortDecimal(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %d token ids listed, want %d", tok, len(got), len(want))
		}
		var reqs [][2]string
		for _, id := range ids {
			reqs = append(reqs, [2]string{tok, "0x6352211e" + word(id)})
		}
		owners := o.calls(head, reqs)
		for i, id := range ids {
			if i%10 != 0 {
				continue
			}
			var d map[string]any
			if code := getJSON(t, fmt.Sprintf("%s/v1/chains/43112/nfts/collections/%s/tokens/%s", api, tok, id), &d); code != http.StatusOK {
				t.Fatalf("getTokenDetails %s#%s: %d", tok, id, code)
			}
			want := "0x" + fmt.Sprintf("%064x", owners[i])[24:]
			if got := lower(str(d["ownerAddress"])); got != want || d["ercType"] != "ERC-721" {
				t.Errorf("%s#%s: owner %s (%v), want %s", tok, id, got, d["ercType"], want)
			}
		}
	}
	for tok, ids := range o.erc1155 {
		var got []string
		for _, it := range pagesOf(t, fmt.Sprintf("%s/v1/chains/43112/nfts/collections/%s/tokens?pageSize=100", api, tok), "tokens") {
			got = append(got, it["tokenId"].(string))
		}
		want := slices.Clone(ids)
		sortDecimal(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: token ids %v, want %v", tok, got, want)
		}
	}
}

func sortDecimal(s []string) {
	slices.SortFunc(s, func(a, b string) int {
		x, _ := new(big.Int).SetString(a, 10)
		y, _ := new(big.Int).SetString(b, 10)
		return x.Cmp(y)
	})
}

// runBalancesSDK drives every balance and NFT method of the official SDK
// (query/sdktest/balances.mjs) with what the node says.
func runBalancesSDK(t *testing.T, api string, o *nodeOracle, head uint64) {
	block := head - 20
	e20, e721, e1155 := o.expected(block, o.holders)
	busiest := func(m map[string]map[string]string) string {
		best := ""
		for h, v := range m {
			if best == "" || len(v) > len(m[best]) || len(v) == len(m[best]) && h < best {
				best = h
			}
		}
		return best
	}
	var native string
	h20 := busiest(e20)
	raw, err := rpcCall(o.url, "eth_getBalance", h20, fmt.Sprintf("0x%x", block))
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(raw, &native)
	h721, h1155 := busiest(e721), busiest(e1155)
	var nftTok, nftID string
	for k := range e721[h721] {
		nftTok, nftID, _ = strings.Cut(k, "#")
		break
	}
	var itemTok string
	for tok := range o.erc1155 {
		itemTok = tok
	}
	fx, err := json.Marshal(map[string]any{
		"chainId": "43112", "block": strconv.FormatUint(block, 10),
		"erc20":  map[string]any{"holder": h20, "balances": e20[h20], "native": hexToDec(native)},
		"erc721": map[string]any{"holder": h721, "tokens": e721[h721]}, "erc1155": map[string]any{"holder": h1155, "balances": e1155[h1155]},
		"nft":   map[string]any{"address": nftTok, "tokenId": nftID, "ids": len(o.erc721[nftTok])},
		"items": map[string]any{"address": itemTok, "ids": len(o.erc1155[itemTok])},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "balances.mjs")
	cmd.Dir = sdkDir(t)
	cmd.Env = append(os.Environ(), "MORAINE_SDKTEST_URL="+api, "MORAINE_SDKTEST_FIXTURE="+string(fx))
	out, err := cmd.CombinedOutput()
	t.Logf("node balances.mjs:\n%s", out)
	if err != nil || !strings.Contains(string(out), ", 0 failures") {
		t.Fatalf("the official SDK's balance calls failed: %v", err)
	}
}
