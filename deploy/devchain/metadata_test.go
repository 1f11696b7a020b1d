package devchain

import (
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/ethclient"
)

// TestMetadataCollections checks the metadata collections as the metadata
// worker will see them: each special token's tokenURI / uri answers as its
// mode says (a string, a revert, an out-of-gas failure, a number), the
// http URIs point at this chain's metadata server, which answers as
// documented, and the traffic mints more tokens with good documents.
func TestMetadataCollections(t *testing.T) {
	c := startChain(t, Config{BlockInterval: -1, TxPerBlock: 40, Seed: 11})
	ctx := t.Context()
	if err := c.Mine(ctx, 5); err != nil {
		t.Fatal(err)
	}
	ec := ethclient.NewClient(dial(t, c.HTTPURL()))
	ct := c.Contracts()

	uriOf := func(tok MetaToken) (string, error) {
		contract, method, cc := ct.MetaNFT, "tokenURI", metaERC721
		if tok.ERC1155 {
			contract, method, cc = ct.MetaItems, "uri", metaERC1155
		}
		out, err := ec.CallContract(ctx, ethereum.CallMsg{To: &contract, Data: cc.pack(method, new(big.Int).SetUint64(tok.ID))}, nil)
		if err != nil {
			return "", err
		}
		vals, err := cc.abi.Unpack(method, out)
		if err != nil {
			return "", fmt.Errorf("not a string: %x", out)
		}
		return vals[0].(string), nil
	}
	base := c.HTTPURL() + "/nft/"
	for _, tok := range MetaTokens() {
		uri, err := uriOf(tok)
		switch {
		case tok.mode == uriInvalidOp:
			if err == nil || !strings.Contains(err.Error(), "invalid opcode") {
				t.Errorf("token %d: want an invalid-opcode failure, got %q, %v", tok.ID, uri, err)
			}
			continue
		case tok.burn:
			if err == nil || !strings.Contains(err.Error(), "execution reverted") {
				t.Errorf("token %d: want a revert, got %q, %v", tok.ID, uri, err)
			}
			continue
		case tok.mode == uriNotString:
			if err == nil || !strings.Contains(err.Error(), "not a string") {
				t.Errorf("token %d: want a non-string answer, got %q, %v", tok.ID, uri, err)
			}
			continue
		case err != nil:
			t.Errorf("token %d: %v", tok.ID, err)
			continue
		}
		want := tok.text
		switch tok.mode {
		case uriDefault:
			want = fmt.Sprintf("%serc721/%d.json", base, tok.ID)
		case uriPath:
			want = base + tok.text
		}
		if uri != want {
			t.Errorf("token %d: uri %q, want %q", tok.ID, uri, want)
		}
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(c.HTTPURL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for path, want := range map[string]int{
		"/nft/erc721/1.json": 200, "/nft/erc1155/" + fmt.Sprintf("%064x", 3) + ".json": 200, "/nft/erc1155/{id}.json": 404,
		"/nft/throttled.json": 429, "/nft/gone.json": 404, "/nft/not-metadata.json": 200, "/ipfs/moraine/token.json": 200,
	} {
		if code, body := get(path); code != want {
			t.Errorf("GET %s: %d %s, want %d", path, code, body, want)
		}
	}
	if _, body := get("/nft/too-large.json"); len(body) < tooLargeBytes || !json.Valid([]byte(body)) {
		t.Errorf("too-large.json: %d bytes, valid JSON %v", len(body), json.Valid([]byte(body)))
	}
	for i, want := range []int{503, 503, 200} {
		if code, _ := get("/nft/flaky.json"); code != want {
			t.Errorf("flaky.json request %d: %d, want %d", i+1, code, want)
		}
	}
	if _, body := get("/nft/invalid-json.json"); json.Valid([]byte(body)) {
		t.Errorf("invalid-json.json is valid JSON")
	}
	// The traffic minted tokens of both collections.
	mintedTraffic := false
	for n := uint64(2); n <= c.Head().Number; n++ {
		b, err := ec.BlockByNumber(ctx, new(big.Int).SetUint64(n))
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range b.Transactions() {
			if tx.To() != nil && *tx.To() == ct.MetaNFT && len(tx.Data()) >= 4 && string(tx.Data()[:4]) == string(metaERC721.abi.Methods["mint"].ID) {
				mintedTraffic = true
			}
		}
	}
	if !mintedTraffic {
		t.Error("no traffic mint of the metadata collection in 5 blocks")
	}
}

// TestResumeAddsMetadataCollections resumes a data dir made before the
// metadata collections existed (as `make run`'s .moraine/devchain may be):
// the stored blocks keep their hashes, the collections are deployed at
// their fixed addresses in the next block, and their tokens answer with
// this process's metadata server. A second restart deploys nothing again.
func TestResumeAddsMetadataCollections(t *testing.T) {
	dir := t.TempDir()
	old, _ := startPersistent(t, Config{BlockInterval: -1, TxPerBlock: 8, Seed: 5, DataDir: dir, noMeta: true})
	ctx := t.Context()
	if err := old.Mine(ctx, 3); err != nil {
		t.Fatal(err)
	}
	oldHead := old.Head()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	c, warns := startPersistent(t, Config{BlockInterval: -1, TxPerBlock: 8, Seed: 5, DataDir: dir})
	if err := c.Mine(ctx, 2); err != nil {
		t.Fatal(err)
	}
	cl := dial(t, c.HTTPURL())
	if got, ok := hashByNumber(t, cl, oldHead.Number); !ok || got != oldHead.Hash {
		t.Fatalf("stored head %d changed: %s, want %s", oldHead.Number, got, oldHead.Hash)
	}
	ec := ethclient.NewClient(cl)
	ct := c.Contracts()
	out, err := ec.CallContract(ctx, ethereum.CallMsg{To: &ct.MetaNFT, Data: metaERC721.pack("tokenURI", big.NewInt(1))}, nil)
	if err != nil {
		t.Fatalf("tokenURI(1) after the resume: %v", err)
	}
	vals, err := metaERC721.abi.Unpack("tokenURI", out)
	if err != nil || vals[0].(string) != c.MetadataBaseURL()+"erc721/1.json" {
		t.Fatalf("tokenURI(1) = %v, %v", vals, err)
	}
	if warns.Load() != 0 {
		t.Fatalf("%d warnings", warns.Load())
	}
	nonce, _ := ec.NonceAt(ctx, c.Deployer(), nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2, _ := startPersistent(t, Config{BlockInterval: -1, TxPerBlock: 8, Seed: 5, DataDir: dir})
	ec2 := ethclient.NewClient(dial(t, c2.HTTPURL()))
	if n, _ := ec2.NonceAt(ctx, c2.Deployer(), nil); n != nonce+2 {
		t.Fatalf("deployer nonce %d after the second restart, want %d (only the two base URI updates)", n, nonce+2)
	}
	out, err = ec2.CallContract(ctx, ethereum.CallMsg{To: &ct.MetaItems, Data: metaERC1155.pack("uri", big.NewInt(3))}, nil)
	vals, _ = metaERC1155.abi.Unpack("uri", out)
	if err != nil || len(vals) == 0 || vals[0].(string) != c2.MetadataBaseURL()+"erc1155/{id}.json" {
		t.Fatalf("uri(3) after the second restart = %v, %v", vals, err)
	}
}
