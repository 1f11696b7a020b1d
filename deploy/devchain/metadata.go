package devchain

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// URI modes of the metadata collections (MetaURI in contracts/MoraineMeta.sol).
const (
	uriDefault   uint8 = 0
	uriPath      uint8 = 1
	uriAbsolute  uint8 = 2
	uriNotString uint8 = 3
	uriInvalidOp uint8 = 4
)

// MetaTrafficIDBase is added to the ids of the metadata collection's
// tokens that the traffic mints, to keep them clear of MetaTokens.
const MetaTrafficIDBase = 1_000_000

// MetaItemIDs is the number of template ids (1..MetaItemIDs) of the
// metadata items that the traffic mints.
const MetaItemIDs = 5

// MetaToken is a token the development chain mints in its metadata
// collections when it deploys them, with the indexStatus of the Data API's
// NftTokenMetadataStatus that its metadata earns from moraine's metadata
// worker (with private targets allowed and the IPFS gateway at the chain's
// /ipfs/).
type MetaToken struct {
	// ERC1155 says which collection: Contracts.MetaItems, else MetaNFT.
	ERC1155 bool   `json:"erc1155"`
	ID      uint64 `json:"id"`
	// Status is the expected indexStatus; Name, when set, the document's name.
	Status string `json:"status"`
	Name   string `json:"name,omitempty"`
	// What the token's URI is, in words.
	About string `json:"about"`

	mode uint8
	text string
	burn bool
}

// MetaTokens lists the special tokens of the metadata collections: for
// each failure of the metadata worker one token that shows it, and good
// documents by every way a URI can lead to one. The traffic then mints more
// tokens with good documents (ids from MetaTrafficIDBase; items 1..MetaItemIDs).
func MetaTokens() []MetaToken {
	big := "data:application/json;base64," + base64.StdEncoding.EncodeToString([]byte(`{"name":"Meta #2 (base64 data URI)","description":"on chain"}`))
	return []MetaToken{
		{ID: 1, Status: "INDEXED", Name: "Moraine Meta #1", About: "http document at the default URI", mode: uriDefault},
		{ID: 2, Status: "INDEXED", Name: "Meta #2 (base64 data URI)", About: "base64 data: URI", mode: uriAbsolute, text: big},
		{ID: 3, Status: "INDEXED", Name: "Meta #3 (plain data URI)", About: "plain data: URI",
			mode: uriAbsolute, text: `data:application/json,{"name":"Meta #3 (plain data URI)","attributes":[{"trait_type":"kind","value":"plain"}]}`},
		{ID: 4, Status: "INDEXED", Name: "Meta #4 (ipfs)", About: "ipfs:// URI, fetched through the gateway", mode: uriAbsolute, text: "ipfs://moraine/meta/4.json"},
		{ID: 5, Status: "INVALID_METADATA_JSON", About: "a document that is not JSON", mode: uriPath, text: "invalid-json.json"},
		{ID: 6, Status: "INVALID_METADATA", About: "JSON that is not metadata", mode: uriPath, text: "not-metadata.json"},
		{ID: 7, Status: "METADATA_CONTENT_TOO_LARGE", About: "a 2 MiB document", mode: uriPath, text: "too-large.json"},
		{ID: 8, Status: "THROTTLED_TOKEN_URI", About: "HTTP 429 on every request", mode: uriPath, text: "throttled.json"},
		{ID: 9, Status: "UNREACHABLE_TOKEN_URI", About: "HTTP 404", mode: uriPath, text: "gone.json"},
		{ID: 10, Status: "INVALID_TOKEN_URI_SCHEME", About: "an ftp:// URI", mode: uriAbsolute, text: "ftp://metadata.moraine.invalid/10.json"},
		{ID: 11, Status: "INVALID_TOKEN_URI", About: "not a URI", mode: uriAbsolute, text: "not a token uri"},
		{ID: 12, Status: "INVALID_TOKEN_URI", About: "tokenURI returns a number, not a string", mode: uriNotString},
		{ID: 13, Status: "UNKNOWN", About: "tokenURI fails in the EVM without reverting (an invalid opcode)", mode: uriInvalidOp},
		{ID: 14, Status: "MISSING_TOKEN", About: "burned: tokenURI reverts", mode: uriDefault, burn: true},
		{ID: 15, Status: "INDEXED", Name: "Meta #15 (after retries)", About: "HTTP 503 on the first two requests, then the document", mode: uriPath, text: "flaky.json"},
		{ERC1155: true, ID: 1000, Status: "UNREACHABLE_TOKEN_URI", About: "an item whose uri is a closed port", mode: uriAbsolute, text: "http://127.0.0.1:1/item.json"},
	}
}

// metadataBase is the URL prefix of this chain's metadata documents.
func (c *Chain) metadataBase() string {
	if c.cfg.MetadataBaseURL != "" {
		return c.cfg.MetadataBaseURL
	}
	return c.HTTPURL() + "/nft/"
}

// MetadataBaseURL is the URL prefix the metadata collections' token URIs
// use (Config.MetadataBaseURL, or the HTTP endpoint + "/nft/").
func (c *Chain) MetadataBaseURL() string { return c.metadataBase() }

// tooLargeBytes is the size of the too-large document: twice the metadata
// worker's default limit.
const tooLargeBytes = 2 << 20

// metadataServer serves the documents the metadata collections' URIs name,
// on the chain's JSON-RPC address:
//
//	/nft/erc721/<id>.json         a good ERC-721 document
//	/nft/erc1155/<64 hex>.json    a good ERC-1155 document (the {id} template)
//	/nft/invalid-json.json        not JSON
//	/nft/not-metadata.json        JSON that is not metadata
//	/nft/too-large.json           2 MiB of valid JSON
//	/nft/throttled.json           always 429 Too Many Requests
//	/nft/flaky.json               503 twice, then a good document (per process)
//	/ipfs/<cid>/<path>            an IPFS gateway: a good document for every path
//	anything else                 404
type metadataServer struct {
	mu    sync.Mutex
	flaky int
}

func (s *metadataServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	path := r.URL.Path
	if rest, ok := strings.CutPrefix(path, "/ipfs/"); ok && strings.Contains(rest, "/") {
		writeJSON(w, fmt.Sprintf(`{"name":%q,"description":"served by the development chain's IPFS gateway","image":"ipfs://moraine/image.png"}`, ipfsName(rest)))
		return
	}
	rest, ok := strings.CutPrefix(path, "/nft/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasPrefix(rest, "erc721/") && strings.HasSuffix(rest, ".json"):
		id := strings.TrimSuffix(strings.TrimPrefix(rest, "erc721/"), ".json")
		if _, err := strconv.ParseUint(id, 10, 64); err != nil {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, fmt.Sprintf(`{"name":"Moraine Meta #%s","description":"a token of the development chain","image":"ipfs://moraine/meta/%s.png",`+
			`"external_url":"https://moraine.invalid/meta/%s","background_color":"0a0a0a","attributes":[{"trait_type":"serial","value":%s}]}`, id, id, id, id))
	case strings.HasPrefix(rest, "erc1155/") && strings.HasSuffix(rest, ".json"):
		hexID := strings.TrimSuffix(strings.TrimPrefix(rest, "erc1155/"), ".json")
		id, err := strconv.ParseUint(strings.TrimLeft(hexID, "0"), 16, 64)
		if len(hexID) != 64 || (err != nil && strings.Trim(hexID, "0") != "") {
			http.NotFound(w, r) // the worker did not substitute {id}
			return
		}
		writeJSON(w, fmt.Sprintf(`{"name":"Moraine Meta Item %d","description":"an item","image":"ipfs://moraine/items/%d.png","decimals":0,`+
			`"properties":{"rarity":"common","id":%d}}`, id, id, id))
	case rest == "invalid-json.json":
		writeJSON(w, `{"name": "broken", "description": `)
	case rest == "not-metadata.json":
		writeJSON(w, `{"error":"this is not token metadata","status":42}`)
	case rest == "too-large.json":
		w.Header().Set("Content-Type", "application/json")
		pad := strings.Repeat("x", 1024)
		_, _ = w.Write([]byte(`{"name":"too large","padding":[`))
		for i := 0; i < tooLargeBytes/1024; i++ {
			if i > 0 {
				_, _ = w.Write([]byte(","))
			}
			if _, err := fmt.Fprintf(w, "%q", pad); err != nil {
				return
			}
		}
		_, _ = w.Write([]byte("]}"))
	case rest == "throttled.json":
		w.Header().Set("Retry-After", "60")
		http.Error(w, "too many requests", http.StatusTooManyRequests)
	case rest == "flaky.json":
		s.mu.Lock()
		s.flaky++
		n := s.flaky
		s.mu.Unlock()
		if n <= 2 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, `{"name":"Meta #15 (after retries)","description":"served after two failures"}`)
	default:
		http.NotFound(w, r)
	}
}

// ipfsName names the document of an IPFS path: "Meta #4 (ipfs)" for the
// special token, the path otherwise.
func ipfsName(path string) string {
	if path == "moraine/meta/4.json" {
		return "Meta #4 (ipfs)"
	}
	return "ipfs " + path
}

func writeJSON(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(body))
}
