package e2e

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// devchainNFTs describes the metadata collections of a development chain.
type devchainNFTs struct {
	contracts struct {
		NFT, Items, MetaNFT, MetaItems string
	}
	tokens []struct {
		ERC1155 bool   `json:"erc1155"`
		ID      uint64 `json:"id"`
		Status  string `json:"status"`
		Name    string `json:"name"`
		About   string `json:"about"`
	}
}

// startNFTDevchain runs a development chain (a block every 300 ms with
// txPerBlock transactions) and reads its metadata collections.
func startNFTDevchain(t *testing.T, txPerBlock string) (rpcAddr, rpcURL string, d devchainNFTs) {
	t.Helper()
	rpcAddr = freeAddr(t)
	start(t, "devchain", "--rpc.listen-address", rpcAddr, "--block.interval", "300ms", "--traffic.tx-per-block", txPerBlock)
	rpcURL = "http://" + rpcAddr
	eventually(t, 60*time.Second, "devchain RPC", func() bool {
		_, err := rpcCall(rpcURL, "eth_blockNumber")
		return err == nil
	})
	return rpcAddr, rpcURL, readDevchainNFTs(t, rpcURL)
}

func readDevchainNFTs(t *testing.T, rpcURL string) devchainNFTs {
	t.Helper()
	var d devchainNFTs
	for method, into := range map[string]any{"moraine_contracts": &d.contracts, "moraine_metaTokens": &d.tokens} {
		raw, err := rpcCall(rpcURL, method)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, into); err != nil {
			t.Fatalf("%s: %v: %s", method, err, raw)
		}
	}
	if d.contracts.MetaNFT == "" || len(d.tokens) == 0 {
		t.Fatalf("the development chain has no metadata collections: %+v", d)
	}
	return d
}

// nftRow is a stored metadata row, as this test reads it.
type nftRow struct {
	status, name string
	version      uint64
	retrying     bool
}

// nftRows reads every stored NFT metadata row, keyed "<contract>/<token id>".
func nftRows(t *testing.T, s *stackUp) map[string]nftRow {
	t.Helper()
	rows, err := s.conn.Query(t.Context(), `SELECT lower(hex(contract)), token_id, status, name, version, next_attempt_at
FROM nft_metadata FINAL WHERE chain_id = ?`, s.chain)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]nftRow{}
	for rows.Next() {
		var contract, id, status, name string
		var version, next uint64
		if err := rows.Scan(&contract, &id, &status, &name, &version, &next); err != nil {
			t.Fatal(err)
		}
		out["0x"+contract+"/"+id] = nftRow{status: status, name: name, version: version, retrying: next != 0}
	}
	return out
}

func nftKey(contract string, id uint64) string {
	return strings.ToLower(contract) + "/" + fmt.Sprint(id)
}

// TestNFTMetadataDevchain indexes the development chain with the whole
// pipeline (the devchain and the four services as binaries, on the real
// stack) and checks the metadata worker's result for every special token of
// the metadata collections, one per indexStatus the worker can store
// (moraine_metaTokens), for the traffic's tokens of every collection
// (http, the {id} template of ERC-1155, ipfs:// through the gateway), and
// then that a processor killed with SIGKILL and restarted with discovery
// reading every block again fetches nothing twice: no stored row is
// rewritten.
func TestNFTMetadataDevchain(t *testing.T) {
	rpcAddr, rpcURL, d := startNFTDevchain(t, "16")
	s := startServices(t, devchainChain(rpcURL, rpcAddr), pipelineOpts{processorArgs: []string{
		"--nft.allow-private-targets", "--nft.ipfs-gateway", rpcURL + "/ipfs/",
		// Compressed: the throttled, flaky and closed-port tokens reach their
		// final status in seconds.
		"--nft.retry-schedule", "300ms,300ms,300ms,300ms",
	}})

	special := map[string]string{} // key -> wanted status
	names := map[string]string{}
	for _, tok := range d.tokens {
		contract := d.contracts.MetaNFT
		if tok.ERC1155 {
			contract = d.contracts.MetaItems
		}
		special[nftKey(contract, tok.ID)] = tok.Status
		names[nftKey(contract, tok.ID)] = tok.Name
	}
	statuses := map[string]bool{}
	for _, st := range special {
		statuses[st] = true
	}
	// Every status the worker stores as final, and UNINDEXED which the
	// rendering gives a token without a row (TestNodeUnavailable... in the
	// worker's tests shows it stored while a node does not answer).
	for _, st := range []string{"UNKNOWN", "MISSING_TOKEN", "INVALID_TOKEN_URI", "INVALID_TOKEN_URI_SCHEME", "UNREACHABLE_TOKEN_URI",
		"THROTTLED_TOKEN_URI", "METADATA_CONTENT_TOO_LARGE", "INVALID_METADATA", "INVALID_METADATA_JSON", "INDEXED"} {
		if !statuses[st] {
			t.Fatalf("no special token of the development chain shows %s", st)
		}
	}
	var rows map[string]nftRow
	eventually(t, 3*time.Minute, "every special token's final status", func() bool {
		rows = nftRows(t, s)
		for k, want := range special {
			if r, ok := rows[k]; !ok || r.status != want || r.retrying {
				return false
			}
		}
		return true
	})
	for k, want := range names {
		if want != "" && rows[k].name != want {
			t.Errorf("%s: name %q, want %q", k, rows[k].name, want)
		}
	}
	t.Run("through the balance and NFT routes", func(t *testing.T) { checkMetadataRoutes(t, s, special, rows) })
	// The traffic's tokens: good documents, by every collection.
	eventually(t, time.Minute, "traffic tokens of every collection indexed", func() bool {
		rows = nftRows(t, s)
		per := map[string]int{}
		for k, r := range rows {
			if _, isSpecial := special[k]; isSpecial || r.retrying {
				continue
			}
			if r.status != "INDEXED" {
				t.Fatalf("traffic token %s: %s", k, r.status)
			}
			per[k[:strings.IndexByte(k, '/')]]++
		}
		for _, c := range []string{d.contracts.NFT, d.contracts.Items, d.contracts.MetaNFT, d.contracts.MetaItems} {
			if per[strings.ToLower(c)] == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("%d NFTs stored", len(rows))

	// Crash the processor and let discovery read every block again (a new
	// discovery group starts from the first block): the worker skips every
	// NFT it stored, so no row is rewritten.
	before := nftRows(t, s)
	s.flags["processor"] = append(s.flags["processor"], "--nft.discovery-group", "e2e-rediscovery-"+hex.EncodeToString([]byte(t.Name()))[:8])
	s.crash("processor")
	eventually(t, 2*time.Minute, "discovery to read every block again", func() bool {
		produced := 0.0
		for _, v := range scrape(t, s.metrics["processor"], "moraine_processor_nft_discovered_total") {
			produced += v
		}
		skipped := scrape(t, s.metrics["processor"], "moraine_processor_nft_metadata_requests_total")[`{result="skipped"}`]
		return produced >= float64(len(before)) && skipped >= float64(len(before))
	})
	after := nftRows(t, s)
	rewritten := 0
	for k, r := range before {
		if r.retrying {
			continue
		}
		if after[k].version != r.version {
			rewritten++
			t.Errorf("%s rewritten after the restart (%s -> %s)", k, r.status, after[k].status)
		}
	}
	t.Logf("after the restart: %d rows before, %d now, %d rewritten", len(before), len(after), rewritten)
}

// TestNFTMetadataRefusesInternalTargets runs the metadata worker as in
// production (private targets refused) on the development chain, whose
// metadata server listens on 127.0.0.1: every http token URI is refused
// (UNREACHABLE_TOKEN_URI, final, never retried, nothing fetched), while
// data: URIs and ipfs:// through the operator's gateway (trusted, on
// loopback too) are indexed.
func TestNFTMetadataRefusesInternalTargets(t *testing.T) {
	rpcAddr, rpcURL, d := startNFTDevchain(t, "8")
	s := startServices(t, devchainChain(rpcURL, rpcAddr), pipelineOpts{processorArgs: []string{
		"--nft.ipfs-gateway", rpcURL + "/ipfs/", "--nft.retry-schedule", "300ms,300ms,300ms,300ms",
	}})
	want := map[uint64]string{
		1:  "UNREACHABLE_TOKEN_URI", // http://127.0.0.1:<port>/nft/erc721/1.json
		2:  "INDEXED",               // data:
		4:  "INDEXED",               // ipfs:// through the gateway
		8:  "UNREACHABLE_TOKEN_URI", // would be THROTTLED: refused before any request
		15: "UNREACHABLE_TOKEN_URI",
	}
	var mismatch string
	defer func() {
		if t.Failed() {
			t.Logf("last mismatch: %s", mismatch)
		}
	}()
	eventually(t, 2*time.Minute, "the tokens' statuses", func() bool {
		rows := nftRows(t, s)
		for id, st := range want {
			if r := rows[nftKey(d.contracts.MetaNFT, id)]; r.status != st || r.retrying {
				mismatch = fmt.Sprintf("token %d: %+v, want %s", id, r, st)
				return false
			}
		}
		return true
	})
	attempts := queryString(t, s, fmt.Sprintf(`SELECT toString(max(attempt)) FROM nft_metadata FINAL WHERE chain_id = %d AND status = 'UNREACHABLE_TOKEN_URI'`, s.chain))
	if attempts != "1" {
		t.Errorf("refused targets were retried: max attempt %s", attempts)
	}
	detail := queryString(t, s, fmt.Sprintf(`SELECT any(error) FROM nft_metadata FINAL WHERE chain_id = %d AND contract = unhex('%s') AND token_id = '1'`,
		s.chain, strings.TrimPrefix(strings.ToLower(d.contracts.MetaNFT), "0x")))
	if !strings.Contains(detail, "refused") || !strings.Contains(detail, "loopback") {
		t.Errorf("token 1's error %q does not say it was refused as a loopback address", detail)
	}
}

func queryString(t *testing.T, s *stackUp, q string) string {
	t.Helper()
	var out string
	if err := s.conn.QueryRow(t.Context(), q).Scan(&out); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// devchainChain is the chains-file entry of a development chain at rpcURL.
func devchainChain(rpcURL, rpcAddr string) string {
	return fmt.Sprintf(`{"evmChainId":"43112","name":"Development chain","network":"devnet",
		"rpcUrls":["%s"],"wsUrl":"ws://%s","networkToken":{"name":"Avalanche","symbol":"AVAX","decimals":18},
		"traces":true,"webhooks":true,"startBlock":0}`, rpcURL, rpcAddr)
}
