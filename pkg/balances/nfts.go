package balances

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/evm"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// NFTs reads nft_transfers: who owns an NFT, and which token ids a
// collection has. Like balances, it keeps only the transfers of canonical
// blocks.
type NFTs struct {
	db        DB
	canonical Canonical
	// ScanRows is the row budget of reading a collection's remaining ids
	// at once; a larger collection is read in windows of ids.
	ScanRows int
}

// NewNFTs returns the reads of nft_transfers.
func NewNFTs(db DB, canonical Canonical) *NFTs {
	return &NFTs{db: db, canonical: canonical, ScanRows: 16384}
}

// NFT is one token id of a collection, as its canonical transfers leave it.
type NFT struct {
	Token evm.Address
	ID    [32]byte
	// Kind is the kind of its newest transfer (a contract of two kinds may
	// move one id both ways).
	Kind evm.Kind
	// Owner is the recipient of its newest ERC-721 transfer (the zero
	// address once burnt); zero for ERC-1155.
	Owner evm.Address
	// Block is the block of its newest transfer.
	Block uint64
}

const qNFTRows = `SELECT nft_key, entry
FROM nft_transfers
WHERE nft_key >= unhex(?) AND nft_key <= unhex(?)
LIMIT 1 BY nft_key`

// qNFTRowsOf reads the transfers of some ids (the set of their hex words,
// upper case as hex() writes them) of a key range.
const qNFTRowsOf = `SELECT nft_key, entry
FROM nft_transfers
WHERE nft_key >= unhex(?) AND nft_key <= unhex(?) AND hex(substring(nft_key, 29, 32)) IN ?
LIMIT 1 BY nft_key`

type nftRow struct {
	key   schema.NFTKey
	entry string
}

// read reads the rows of [from, to], within a row budget when budget > 0.
func (n *NFTs) read(ctx context.Context, from, to schema.NFTKey, budget int) ([]nftRow, error) {
	var settings clickhouse.Settings
	if budget > 0 {
		settings = rowBudget(budget)
	}
	return n.query(ctx, settings, qNFTRows, hex.EncodeToString(from[:]), hex.EncodeToString(to[:]))
}

func (n *NFTs) query(ctx context.Context, settings clickhouse.Settings, q string, args ...any) ([]nftRow, error) {
	const name = "nft_transfers"
	rows, done, err := n.db.Query(ctx, name, settings, q, args...)
	if err != nil {
		return nil, err
	}
	defer done()
	var out []nftRow
	err = each(name, rows, func() error {
		var key, entry string
		if err := rows.Scan(&key, &entry); err != nil {
			return scanErr(name, err)
		}
		k, err := schema.ParseNFTKey(key)
		if err != nil {
			return fmt.Errorf("balances: %s: %w", name, err)
		}
		out = append(out, nftRow{key: k, entry: entry})
		return nil
	})
	return out, err
}

// canonicalNFTs folds rows (sorted by byPosition) into one NFT per token
// id, from the transfers of canonical blocks; ids with none are dropped.
func (n *NFTs) canonicalNFTs(ctx context.Context, chainID uint64, token evm.Address, rows []nftRow) ([]NFT, error) {
	seen := map[BlockRef]bool{}
	var blocks []BlockRef
	for i := range rows {
		p := rows[i].key.Position()
		if b := (BlockRef{p.Block, p.BlockHash}); !seen[b] {
			seen[b] = true
			blocks = append(blocks, b)
		}
	}
	canon, err := n.canonical.AreCanonical(ctx, chainID, blocks)
	if err != nil {
		return nil, err
	}
	var out []NFT
	for _, r := range rows {
		p := r.key.Position()
		if !canon[BlockRef{p.Block, p.BlockHash}] {
			continue
		}
		_, to, _, err := schema.ParseNFTEntry(r.entry)
		if err != nil {
			return nil, err
		}
		id := r.key.TokenID()
		nft := NFT{Token: token, ID: id, Kind: evm.Kind(p.Kind), Block: p.Block}
		if nft.Kind == evm.ERC721 {
			nft.Owner = to
		}
		// The newest transfer decides, whatever its kind.
		if last := len(out) - 1; last >= 0 && out[last].ID == id {
			out[last] = nft
			continue
		}
		out = append(out, nft)
	}
	return out, nil
}

// FirstSenders returns, for each of token's ids that has a canonical
// ERC-721 transfer, the sender of its first one: on a chain indexed from a
// later block, the owner of the id before the first indexed block (the
// zero address for an id minted since).
func (n *NFTs) FirstSenders(ctx context.Context, chainID uint64, token evm.Address, ids [][32]byte) (map[[32]byte]evm.Address, error) {
	out := map[[32]byte]evm.Address{}
	sorted := slices.Clone(ids)
	slices.SortFunc(sorted, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	// A read names at most firstSendersBatch ids: a statement is at most
	// 256 KiB (max_query_size).
	for lo := 0; lo < len(sorted); lo += firstSendersBatch {
		if err := n.firstSenders(ctx, chainID, token, sorted[lo:min(lo+firstSendersBatch, len(sorted))], out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

const firstSendersBatch = 1000

// firstSenders is FirstSenders of sorted ids.
func (n *NFTs) firstSenders(ctx context.Context, chainID uint64, token evm.Address, ids [][32]byte, out map[[32]byte]evm.Address) error {
	set := make([]any, len(ids))
	for i, id := range ids {
		set[i] = strings.ToUpper(hex.EncodeToString(id[:]))
	}
	from, to := schema.NFTRange(chainID, token, ids[0], ids[len(ids)-1])
	rows, err := n.query(ctx, nil, qNFTRowsOf, hex.EncodeToString(from[:]), hex.EncodeToString(to[:]), clickhouse.GroupSet{Value: set})
	if err != nil {
		return err
	}
	rows = byPosition(rows)
	blocks := make([]BlockRef, 0, len(rows))
	for i := range rows {
		p := rows[i].key.Position()
		blocks = append(blocks, BlockRef{p.Block, p.BlockHash})
	}
	canon, err := n.canonical.AreCanonical(ctx, chainID, blocks)
	if err != nil {
		return err
	}
	for _, r := range rows {
		p := r.key.Position()
		id := r.key.TokenID()
		if _, done := out[id]; done || evm.Kind(p.Kind) != evm.ERC721 || !canon[BlockRef{p.Block, p.BlockHash}] {
			continue
		}
		sender, _, _, err := schema.ParseNFTEntry(r.entry)
		if err != nil {
			return err
		}
		out[id] = sender
	}
	return nil
}

// Token returns the NFT (token, id), or false when no canonical transfer of
// it is indexed.
func (n *NFTs) Token(ctx context.Context, chainID uint64, token evm.Address, id [32]byte) (NFT, bool, error) {
	from, to := schema.NFTRange(chainID, token, id, id)
	rows, err := n.read(ctx, from, to, 0)
	if err != nil {
		return NFT{}, false, err
	}
	nfts, err := n.canonicalNFTs(ctx, chainID, token, byPosition(rows))
	if err != nil || len(nfts) == 0 {
		return NFT{}, false, err
	}
	return nfts[0], true, nil
}

// byPosition sorts rows (which ClickHouse returns part by part, not in key
// order) by token id, then by position in the chain whatever the kind, so
// an id's last canonical row is its newest transfer.
func byPosition(rows []nftRow) []nftRow {
	slices.SortStableFunc(rows, func(a, b nftRow) int {
		pa, pb := a.key.Position(), b.key.Position()
		if c := bytes.Compare(a.key[:schema.NFTPrefixLen], b.key[:schema.NFTPrefixLen]); c != 0 {
			return c
		}
		switch {
		case pa.Block != pb.Block:
			return cmpU64(pa.Block, pb.Block)
		case pa.LogIndex != pb.LogIndex:
			return cmpU64(uint64(pa.LogIndex), uint64(pb.LogIndex))
		}
		return cmpU64(uint64(pa.Sub), uint64(pb.Sub))
	})
	return rows
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// maxID is the greatest token id.
var maxID = func() (id [32]byte) {
	for i := range id {
		id[i] = 0xff
	}
	return id
}()

// firstWindow is the number of ids the first window of a large collection
// spans; each next window spans 16 times more.
const firstWindow = 1024

// Tokens returns up to limit token ids of the collection above after (all
// when after is nil), in numeric order, and whether more may follow. The
// remaining range is read at once when it holds at most ScanRows rows; a
// larger one in windows of ids, growing 16 times each, until limit ids are
// found or the ids end: for a collection numbered 0, 1, 2... a page is one
// or two reads.
func (n *NFTs) Tokens(ctx context.Context, chainID uint64, token evm.Address, after *[32]byte, limit int) ([]NFT, bool, error) {
	start := new(big.Int)
	if after != nil {
		start.SetBytes(after[:]).Add(start, big.NewInt(1))
	}
	maxInt := new(big.Int).SetBytes(maxID[:])
	if start.Cmp(maxInt) > 0 {
		return nil, false, nil
	}
	id := func(v *big.Int) (out [32]byte) { v.FillBytes(out[:]); return out }
	var out []NFT
	from, to := schema.NFTRange(chainID, token, id(start), maxID)
	rows, err := n.read(ctx, from, to, n.ScanRows)
	switch {
	case err == nil:
		nfts, err := n.canonicalNFTs(ctx, chainID, token, byPosition(rows))
		if err != nil {
			return nil, false, err
		}
		if len(nfts) > limit {
			return nfts[:limit], true, nil
		}
		return nfts, false, nil
	case !chclient.TooManyRows(err):
		return nil, false, err
	}
	width := big.NewInt(firstWindow)
	for len(out) <= limit && start.Cmp(maxInt) <= 0 {
		end := new(big.Int).Add(start, width)
		end.Sub(end, big.NewInt(1))
		if end.Cmp(maxInt) > 0 {
			end.Set(maxInt)
		}
		from, to := schema.NFTRange(chainID, token, id(start), id(end))
		rows, err := n.read(ctx, from, to, 0)
		if err != nil {
			return nil, false, err
		}
		nfts, err := n.canonicalNFTs(ctx, chainID, token, byPosition(rows))
		if err != nil {
			return nil, false, err
		}
		out = append(out, nfts...)
		start.Add(end, big.NewInt(1))
		width.Mul(width, big.NewInt(16))
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, start.Cmp(maxInt) <= 0, nil
}
