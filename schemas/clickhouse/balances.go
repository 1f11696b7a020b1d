package clickhouse

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// The bal_key of balances (migration 12): the level of a row, where it
// stands in the block order, whose balance of which token it changes, and
// the block it comes from, as bytes that sort in the order reads need. The
// levels and their parents and buckets are described by the migration and
// docs/balances.md.
const (
	// BalanceLevelDelta rows are a holder's net change of one token in one
	// block (parent: the block's level-1 bucket; bucket: the block number).
	BalanceLevelDelta uint8 = 0
	// BalanceLevelBucket rows are the sum of the canonical deltas of one
	// level-1 bucket (parent: the level-2 bucket; bucket: the level-1
	// bucket).
	BalanceLevelBucket uint8 = 1
	// BalanceLevelEpoch rows are the sum of the level-1 rows of one level-2
	// bucket (parent: 0; bucket: the level-2 bucket).
	BalanceLevelEpoch uint8 = 2
	// BalanceLevelOpening rows are opening balances of a chain indexed from
	// a block after genesis (parent: 0; bucket: the block they are read at).
	BalanceLevelOpening uint8 = 3

	// BucketBits: a level-1 bucket is 2^10 = 1,024 blocks.
	BucketBits = 10
	// EpochBits: a level-2 bucket is 2^20 = 1,048,576 blocks (1,024
	// level-1 buckets).
	EpochBits = 20

	// BalanceHolderPrefixLen is the length of the prefix shared by one
	// holder's rows of one level and parent: chain id, level, parent,
	// holder.
	BalanceHolderPrefixLen = 8 + 1 + 8 + 20
	// BalancePairLen is the length of a pair in keys: token, token id,
	// kind, so pairs sort as the lists show them.
	BalancePairLen = 20 + 32 + 1
	// BalanceKeyLen is the length of a whole key: the holder prefix, the
	// pair, then bucket and block hash.
	BalanceKeyLen = BalanceHolderPrefixLen + BalancePairLen + 8 + 32
)

// Offsets of a bal_key's parts (0-based; SQL's substring counts from 1).
const (
	balLevelAt  = 8
	balParentAt = 9
	balHolderAt = 17
	// BalancePairAt locates the pair (token, token id, kind); BalanceKindAt
	// its kind byte.
	BalancePairAt = 37
	BalanceKindAt = BalancePairAt + 20 + 32
	balBucketAt   = BalancePairAt + BalancePairLen
	balHashAt     = balBucketAt + 8
)

// BalancePair is what a balance is of: a token of one kind (evm.Kind's
// values: 1 ERC-20, 2 ERC-721, 3 ERC-1155) and, for ERC-721 and ERC-1155,
// a token id (a 32-byte big-endian number; zero for ERC-20).
type BalancePair struct {
	Kind    uint8
	Token   [20]byte
	TokenID [32]byte
}

// PairBytes is the pair as keys hold it: token, token id, kind.
type PairBytes [BalancePairLen]byte

// Bytes is p as keys hold it; its order is the lists' (token, then token
// id, then kind).
func (p BalancePair) Bytes() (b PairBytes) {
	copy(b[:], p.Token[:])
	copy(b[20:], p.TokenID[:])
	b[52] = p.Kind
	return b
}

// Pair reads a pair back.
func (b PairBytes) Pair() BalancePair {
	p := BalancePair{Kind: b[52]}
	copy(p.Token[:], b[:20])
	copy(p.TokenID[:], b[20:52])
	return p
}

// MaxPair is the greatest pair.
var MaxPair = func() (b PairBytes) {
	for i := range b {
		b[i] = 0xff
	}
	return b
}()

// BalanceKey is a balances.bal_key.
type BalanceKey [BalanceKeyLen]byte

// NewBalanceKey is the key of a row of the given level.
func NewBalanceKey(chainID uint64, level uint8, parent uint64, holder [20]byte, bucket uint64, p BalancePair, blockHash [32]byte) BalanceKey {
	var k BalanceKey
	binary.BigEndian.PutUint64(k[0:], chainID)
	k[balLevelAt] = level
	binary.BigEndian.PutUint64(k[balParentAt:], parent)
	copy(k[balHolderAt:], holder[:])
	pb := p.Bytes()
	copy(k[BalancePairAt:], pb[:])
	binary.BigEndian.PutUint64(k[balBucketAt:], bucket)
	copy(k[balHashAt:], blockHash[:])
	return k
}

// DeltaKey is the key of holder's delta of p in the block (number,
// blockHash).
func DeltaKey(chainID uint64, holder [20]byte, number uint64, p BalancePair, blockHash [32]byte) BalanceKey {
	return NewBalanceKey(chainID, BalanceLevelDelta, number>>BucketBits, holder, number, p, blockHash)
}

// BucketSumKey is the key of holder's sum of p over level-1 bucket b.
func BucketSumKey(chainID uint64, holder [20]byte, b uint64, p BalancePair) BalanceKey {
	return NewBalanceKey(chainID, BalanceLevelBucket, b>>(EpochBits-BucketBits), holder, b, p, [32]byte{})
}

// EpochSumKey is the key of holder's sum of p over level-2 bucket e.
func EpochSumKey(chainID uint64, holder [20]byte, e uint64, p BalancePair) BalanceKey {
	return NewBalanceKey(chainID, BalanceLevelEpoch, 0, holder, e, p, [32]byte{})
}

// OpeningKey is the key of holder's opening balance of p, read at block.
func OpeningKey(chainID uint64, holder [20]byte, block uint64, p BalancePair) BalanceKey {
	return NewBalanceKey(chainID, BalanceLevelOpening, 0, holder, block, p, [32]byte{})
}

// BalanceHolderRange is the [from, to] range of holder's rows of one level
// and parent whose pair is in [first, last] (every bucket and block).
func BalanceHolderRange(chainID uint64, level uint8, parent uint64, holder [20]byte, first, last PairBytes) (from, to BalanceKey) {
	from = NewBalanceKey(chainID, level, parent, holder, 0, first.Pair(), [32]byte{})
	to = NewBalanceKey(chainID, level, parent, holder, 0, last.Pair(), [32]byte{})
	for i := balBucketAt; i < BalanceKeyLen; i++ {
		to[i] = 0xff
	}
	return from, to
}

// BalanceParentPrefix is the prefix of every row of one level and parent
// (all holders): what a rollup reads.
func BalanceParentPrefix(chainID uint64, level uint8, parent uint64) []byte {
	p := make([]byte, 0, balHolderAt)
	p = binary.BigEndian.AppendUint64(p, chainID)
	p = append(p, level)
	return binary.BigEndian.AppendUint64(p, parent)
}

// BalancePrefixRange is the [from, to] range of every key that starts with
// prefix (at most BalanceKeyLen bytes).
func BalancePrefixRange(prefix []byte) (from, to BalanceKey) {
	copy(from[:], prefix)
	copy(to[:], prefix)
	for i := len(prefix); i < BalanceKeyLen; i++ {
		to[i] = 0xff
	}
	return from, to
}

// ParseBalanceKey reads a key as ClickHouse returns it.
func ParseBalanceKey(s string) (BalanceKey, error) {
	var k BalanceKey
	if len(s) != BalanceKeyLen {
		return k, fmt.Errorf("bal_key of %d bytes, want %d", len(s), BalanceKeyLen)
	}
	copy(k[:], s)
	return k, nil
}

// ChainID is the key's chain.
func (k *BalanceKey) ChainID() uint64 { return binary.BigEndian.Uint64(k[0:]) }

// Level is the key's level.
func (k *BalanceKey) Level() uint8 { return k[balLevelAt] }

// Parent is the key's parent bucket.
func (k *BalanceKey) Parent() uint64 { return binary.BigEndian.Uint64(k[balParentAt:]) }

// Holder is the address whose balance the row changes.
func (k *BalanceKey) Holder() (a [20]byte) {
	copy(a[:], k[balHolderAt:])
	return a
}

// Bucket is the key's bucket: the block number of a delta.
func (k *BalanceKey) Bucket() uint64 { return binary.BigEndian.Uint64(k[balBucketAt:]) }

// PairBytes is what the row is a balance of, as the key holds it.
func (k *BalanceKey) PairBytes() (b PairBytes) {
	copy(b[:], k[BalancePairAt:])
	return b
}

// Pair is what the row is a balance of.
func (k *BalanceKey) Pair() BalancePair { return k.PairBytes().Pair() }

// BlockHash is the hash of a delta's block (zero on other levels).
func (k *BalanceKey) BlockHash() (h [32]byte) {
	copy(h[:], k[balHashAt:])
	return h
}

// SQLBalanceKey is the SQL expression of a bal_key from expressions of its
// parts (chain id, level, parent, bucket, kind: unsigned integers; holder,
// token: FixedString(20); token id, block hash: FixedString(32)), for the
// benchmark's seed.
func SQLBalanceKey(chainID, level, parent, holder, bucket, kind, token, tokenID, blockHash string) string {
	return "toFixedString(concat(" + strings.Join([]string{sqlBigEndian(chainID, 8), sqlBigEndian(level, 1),
		sqlBigEndian(parent, 8), holder, token, tokenID, sqlBigEndian(kind, 1), sqlBigEndian(bucket, 8), blockHash}, ", ") +
		"), " + fmt.Sprint(BalanceKeyLen) + ")"
}

// The pair_key of balance_pairs (migration 12): one row per (holder, pair)
// that ever had a delta, the directory paged lists read their pairs from.
const (
	// PairKeyHolderLen is the length of one holder's prefix: chain id and
	// holder.
	PairKeyHolderLen = 8 + 20
	// PairKeyLen is the length of a key: the holder prefix and the pair.
	PairKeyLen = PairKeyHolderLen + BalancePairLen
)

// PairKey is a balance_pairs.pair_key.
type PairKey [PairKeyLen]byte

// NewPairKey is the directory key of holder's pair p.
func NewPairKey(chainID uint64, holder [20]byte, p PairBytes) PairKey {
	var k PairKey
	binary.BigEndian.PutUint64(k[0:], chainID)
	copy(k[8:], holder[:])
	copy(k[PairKeyHolderLen:], p[:])
	return k
}

// PairKeyOf is the directory key of a balances row's holder and pair.
func PairKeyOf(k *BalanceKey) PairKey {
	return NewPairKey(k.ChainID(), k.Holder(), k.PairBytes())
}

// Pair is the key's pair.
func (k *PairKey) Pair() (b PairBytes) {
	copy(b[:], k[PairKeyHolderLen:])
	return b
}

// SQLPairKeyOf is the SQL expression of the directory key of a bal_key
// expression: its chain, holder and pair.
func SQLPairKeyOf(balKey string) string {
	return fmt.Sprintf("toFixedString(concat(substring(%s, 1, 8), substring(%s, %d, %d)), %d)",
		balKey, balKey, balHolderAt+1, 20+BalancePairLen, PairKeyLen)
}

// SQLTokenID is the SQL expression of the 32-byte token id word of an
// unsigned integer expression x (as UInt64), for the benchmark's seed.
func SQLTokenID(x string) string {
	return "concat(unhex('" + strings.Repeat("00", 24) + "'), " + sqlBigEndian(x, 8) + ")"
}

// The nft_key of nft_transfers (migration 12): one NFT transfer, ordered by
// token, token id and position in the chain.
const (
	// NFTPrefixLen is the length of the prefix shared by one NFT's rows:
	// chain id, token, token id.
	NFTPrefixLen = 8 + 20 + 32
	// NFTKeyLen is the length of a key: the prefix, then kind, block
	// number, log index, sub-index and block hash.
	NFTKeyLen = NFTPrefixLen + 1 + 8 + 4 + 4 + 32
	// NFTEntryPartiesLen is the length of the from and to addresses that
	// start an entry; the amount (decimal) follows them.
	NFTEntryPartiesLen = 40
)

// NFTPosition is where one NFT transfer stands in the chain.
type NFTPosition struct {
	Kind      uint8
	Block     uint64
	LogIndex  uint32
	Sub       uint32
	BlockHash [32]byte
}

// NFTKey is an nft_transfers.nft_key.
type NFTKey [NFTKeyLen]byte

// NewNFTKey is the key of a transfer of (token, id) at p.
func NewNFTKey(chainID uint64, token [20]byte, id [32]byte, p NFTPosition) NFTKey {
	var k NFTKey
	binary.BigEndian.PutUint64(k[0:], chainID)
	copy(k[8:], token[:])
	copy(k[28:], id[:])
	k[60] = p.Kind
	binary.BigEndian.PutUint64(k[61:], p.Block)
	binary.BigEndian.PutUint32(k[69:], p.LogIndex)
	binary.BigEndian.PutUint32(k[73:], p.Sub)
	copy(k[77:], p.BlockHash[:])
	return k
}

// NFTRange is the [from, to] range of the transfers of token's ids in
// [firstID, lastID].
func NFTRange(chainID uint64, token [20]byte, firstID, lastID [32]byte) (from, to NFTKey) {
	from = NewNFTKey(chainID, token, firstID, NFTPosition{})
	to = NewNFTKey(chainID, token, lastID, NFTPosition{})
	for i := NFTPrefixLen; i < NFTKeyLen; i++ {
		to[i] = 0xff
	}
	return from, to
}

// ParseNFTKey reads a key as ClickHouse returns it.
func ParseNFTKey(s string) (NFTKey, error) {
	var k NFTKey
	if len(s) != NFTKeyLen {
		return k, fmt.Errorf("nft_key of %d bytes, want %d", len(s), NFTKeyLen)
	}
	copy(k[:], s)
	return k, nil
}

// TokenID is the key's token id.
func (k *NFTKey) TokenID() (id [32]byte) {
	copy(id[:], k[28:])
	return id
}

// Position is where k's transfer stands.
func (k *NFTKey) Position() NFTPosition {
	p := NFTPosition{
		Kind:     k[60],
		Block:    binary.BigEndian.Uint64(k[61:]),
		LogIndex: binary.BigEndian.Uint32(k[69:]),
		Sub:      binary.BigEndian.Uint32(k[73:]),
	}
	copy(p.BlockHash[:], k[77:])
	return p
}

// NFTEntry is an nft_transfers entry: the transfer's parties and amount.
func NFTEntry(dst []byte, from, to [20]byte, amount string) []byte {
	dst = append(dst, from[:]...)
	dst = append(dst, to[:]...)
	return append(dst, amount...)
}

// ParseNFTEntry splits an entry.
func ParseNFTEntry(entry string) (from, to [20]byte, amount string, err error) {
	if len(entry) < NFTEntryPartiesLen {
		return from, to, "", fmt.Errorf("nft_transfers entry of %d bytes", len(entry))
	}
	copy(from[:], entry[:20])
	copy(to[:], entry[20:40])
	return from, to, entry[40:], nil
}

// SQLNFTKey is the SQL expression of an nft_key (as SQLBalanceKey).
func SQLNFTKey(chainID, token, tokenID, kind, block, logIndex, sub, blockHash string) string {
	return "toFixedString(concat(" + strings.Join([]string{sqlBigEndian(chainID, 8), token, tokenID, sqlBigEndian(kind, 1),
		sqlBigEndian(block, 8), sqlBigEndian(logIndex, 4), sqlBigEndian(sub, 4), blockHash}, ", ") +
		"), " + fmt.Sprint(NFTKeyLen) + ")"
}

// Kinds of balance_progress rows (migration 12).
const (
	// ProgressFirstBlock: the first block whose deltas were written
	// (version 2^64-1 - block: the lowest wins).
	ProgressFirstBlock uint8 = 0
	// ProgressBuckets: level-1 buckets summed (version = value).
	ProgressBuckets uint8 = 1
	// ProgressEpochs: level-2 buckets summed (version = value).
	ProgressEpochs uint8 = 2
)
