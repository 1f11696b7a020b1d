package replay

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"math/big"
	"os"
	"sort"
	"strconv"

	"github.com/klauspost/compress/zstd"

	"github.com/moraine-data/moraine/deploy/internal/jsonscan"
)

// Hash is a 32-byte block or transaction hash.
type Hash [32]byte

// Block is one recorded block. Every json field holds the recorded bytes
// unmodified (they are slices of the loaded file) except Hashes and Header,
// which are built from them.
type Block struct {
	Number uint64
	Hash   Hash
	// Full is the recorded eth_getBlockByNumber(n, true) result.
	Full []byte
	// Hashes is Full with the transactions replaced by their hashes
	// (eth_getBlockByNumber(n, false)).
	Hashes []byte
	// Header is Full without transactions, uncles, size, totalDifficulty,
	// withdrawals and blockExtraData: the newHeads notification payload.
	Header []byte
	// Receipts is the recorded array of receipts; Traces the recorded
	// debug_traceBlockByNumber callTracer result ([{txHash, result}]).
	Receipts []byte
	Traces   []byte

	txs      [][]byte // each recorded transaction object
	receipts [][]byte // each recorded receipt, in recorded order
	// Per transaction, in block order: its hash, its receipt and its
	// callTracer frame ("result"), nil when not recorded.
	txHashes  []Hash
	txReceipt [][]byte
	txTrace   [][]byte
}

// Recording is a loaded replay file, indexed by block number, block hash and
// transaction hash.
type Recording struct {
	blocks   []*Block // ascending by number
	byNumber map[uint64]int
	byHash   map[Hash]int
	txs      map[Hash]txLoc
	chainID  uint64 // inferred from the transactions, 0 if unknown
	txCount  int
}

// txLoc locates a transaction: the index of its block and its position.
type txLoc struct{ block, index int }

// Open loads a recording: a JSONL file (zstd-compressed or not, detected from
// its first bytes) with one line per block,
// {"block": <eth_getBlockByNumber(n,true)>, "receipts": [...], "traces": [{"txHash","result"}...]}.
func Open(path string) (*Recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rec, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("replay: %s: %w", path, err)
	}
	return rec, nil
}

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// Read loads a recording from r (see Open).
func Read(r io.Reader) (*Recording, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	head, _ := br.Peek(4)
	var data []byte
	var err error
	if bytes.Equal(head, zstdMagic) {
		dec, derr := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(8<<30))
		if derr != nil {
			return nil, derr
		}
		data, err = io.ReadAll(dec)
		dec.Close()
	} else {
		data, err = io.ReadAll(br)
	}
	if err != nil {
		return nil, err
	}
	return parse(data)
}

func parse(data []byte) (*Recording, error) {
	rec := &Recording{byNumber: map[uint64]int{}, byHash: map[Hash]int{}, txs: map[Hash]txLoc{}}
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		b, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		if rec.chainID == 0 {
			rec.chainID = chainIDOf(b)
		}
		if _, dup := rec.byNumber[b.Number]; dup {
			return nil, fmt.Errorf("line %d: block %d recorded twice", lineNo, b.Number)
		}
		rec.byNumber[b.Number] = -1
		rec.blocks = append(rec.blocks, b)
	}
	if len(rec.blocks) == 0 {
		return nil, fmt.Errorf("no blocks")
	}
	sort.SliceStable(rec.blocks, func(i, j int) bool { return rec.blocks[i].Number < rec.blocks[j].Number })
	for i, b := range rec.blocks {
		rec.byNumber[b.Number] = i
		rec.byHash[b.Hash] = i
		for idx, h := range b.txHashes {
			rec.txs[h] = txLoc{block: i, index: idx}
		}
		rec.txCount += len(b.txs)
	}
	return rec, nil
}

// dropFromHeader are the block fields that a header (newHeads) does not have.
var dropFromHeader = map[string]bool{
	"transactions": true, "uncles": true, "size": true, "totalDifficulty": true,
	"withdrawals": true, "blockExtraData": true,
}

func parseLine(line []byte) (*Block, error) {
	b := &Block{}
	err := jsonscan.EachField(line, func(key, _, val []byte) error {
		switch string(key) {
		case "block":
			b.Full = val
		case "receipts":
			b.Receipts = val
		case "traces":
			b.Traces = val
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if b.Full == nil || bytes.Equal(b.Full, []byte("null")) {
		return nil, fmt.Errorf("no block")
	}
	if b.Receipts == nil || bytes.Equal(b.Receipts, []byte("null")) {
		b.Receipts = []byte("[]")
	}
	if b.Traces == nil || bytes.Equal(b.Traces, []byte("null")) {
		b.Traces = []byte("[]")
	}

	var hashes, header bytes.Buffer
	hashes.WriteByte('{')
	header.WriteByte('{')
	var haveNumber, haveHash bool
	err = jsonscan.EachField(b.Full, func(key, rawKey, val []byte) error {
		k := string(key)
		switch k {
		case "number":
			n, err := parseQuantity(val)
			if err != nil {
				return fmt.Errorf("block number: %w", err)
			}
			b.Number, haveNumber = n, true
		case "hash":
			h, err := parseHash(val)
			if err != nil {
				return fmt.Errorf("block hash: %w", err)
			}
			b.Hash, haveHash = h, true
		}
		if hashes.Len() > 1 {
			hashes.WriteByte(',')
		}
		hashes.Write(rawKey)
		hashes.WriteByte(':')
		if k == "transactions" {
			hashes.WriteByte('[')
			n := 0
			err := jsonscan.EachElement(val, func(tx []byte) error {
				b.txs = append(b.txs, tx)
				if bytes.HasPrefix(tx, []byte{'"'}) { // already a hash
					if n > 0 {
						hashes.WriteByte(',')
					}
					hashes.Write(tx)
					n++
					return nil
				}
				return jsonscan.EachField(tx, func(key, _, v []byte) error {
					if string(key) == "hash" {
						if n > 0 {
							hashes.WriteByte(',')
						}
						hashes.Write(v)
						n++
					}
					return nil
				})
			})
			if err != nil {
				return fmt.Errorf("transactions: %w", err)
			}
			hashes.WriteByte(']')
		} else {
			hashes.Write(val)
		}
		if !dropFromHeader[k] {
			if header.Len() > 1 {
				header.WriteByte(',')
			}
			header.Write(rawKey)
			header.WriteByte(':')
			header.Write(val)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !haveNumber || !haveHash {
		return nil, fmt.Errorf("block without number or hash")
	}
	hashes.WriteByte('}')
	header.WriteByte('}')
	b.Hashes, b.Header = hashes.Bytes(), header.Bytes()
	if err := jsonscan.EachElement(b.Receipts, func(r []byte) error {
		b.receipts = append(b.receipts, r)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("receipts: %w", err)
	}
	if err := b.link(); err != nil {
		return nil, fmt.Errorf("block %d: %w", b.Number, err)
	}
	return b, nil
}

// link finds each transaction's hash, receipt and trace.
func (b *Block) link() error {
	pos := make(map[Hash]int, len(b.txs))
	b.txHashes = make([]Hash, len(b.txs))
	for idx, tx := range b.txs {
		var h Hash
		var err error
		if bytes.HasPrefix(tx, []byte{'"'}) {
			h, err = parseHash(tx)
		} else {
			found := false
			err = jsonscan.EachField(tx, func(key, _, v []byte) error {
				if string(key) == "hash" {
					found = true
					h, err = parseHash(v)
					return err
				}
				return nil
			})
			if err == nil && !found {
				err = fmt.Errorf("transaction %d has no hash", idx)
			}
		}
		if err != nil {
			return err
		}
		b.txHashes[idx] = h
		pos[h] = idx
	}
	b.txReceipt = make([][]byte, len(b.txs))
	b.txTrace = make([][]byte, len(b.txs))
	// Receipts: by transactionHash (falling back to position).
	for idx, r := range b.receipts {
		at, found := -1, false
		_ = jsonscan.EachField(r, func(key, _, v []byte) error {
			if string(key) == "transactionHash" {
				if h, err := parseHash(v); err == nil {
					at, found = pos[h]
				}
			}
			return nil
		})
		if !found && idx < len(b.txs) {
			at = idx
		}
		if at >= 0 {
			b.txReceipt[at] = r
		}
	}
	// Traces: [{"txHash": ..., "result": {...}}].
	idx := 0
	err := jsonscan.EachElement(b.Traces, func(t []byte) error {
		at, found := -1, false
		var result []byte
		err := jsonscan.EachField(t, func(key, _, v []byte) error {
			switch string(key) {
			case "txHash":
				if h, err := parseHash(v); err == nil {
					at, found = pos[h]
				}
			case "result":
				result = v
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !found && idx < len(b.txs) {
			at = idx
		}
		if at >= 0 {
			b.txTrace[at] = result
		}
		idx++
		return nil
	})
	if err != nil {
		return fmt.Errorf("traces: %w", err)
	}
	return nil
}

// chainIDOf reads the EVM chain id from a block's transactions: the chainId
// field, or v of an EIP-155 legacy signature; 0 when none tells.
func chainIDOf(b *Block) uint64 {
	for _, tx := range b.txs {
		var id uint64
		_ = jsonscan.EachField(tx, func(key, _, v []byte) error {
			switch string(key) {
			case "chainId":
				if n, err := parseQuantity(v); err == nil && n != 0 {
					id = n
				}
			case "v":
				// EIP-155 legacy signature: v = chainId*2 + 35 or 36.
				if vv, err := parseQuantity(v); err == nil && vv >= 37 && id == 0 {
					id = (vv - 35) / 2
				}
			}
			return nil
		})
		if id != 0 {
			return id
		}
	}
	return 0
}

// Len is the number of recorded blocks.
func (rec *Recording) Len() int { return len(rec.blocks) }

// TxCount is the number of recorded transactions.
func (rec *Recording) TxCount() int { return rec.txCount }

// Block returns the i-th recorded block in ascending number order.
func (rec *Recording) Block(i int) *Block { return rec.blocks[i] }

// ByNumber returns the block with the given number, or nil.
func (rec *Recording) ByNumber(n uint64) *Block {
	if i, ok := rec.byNumber[n]; ok {
		return rec.blocks[i]
	}
	return nil
}

// First and Last are the lowest and highest recorded block numbers.
func (rec *Recording) First() uint64 { return rec.blocks[0].Number }
func (rec *Recording) Last() uint64  { return rec.blocks[len(rec.blocks)-1].Number }

// ChainID is the EVM chain id read from the recorded transactions (the
// chainId field, or v of EIP-155 legacy signatures), 0 when none tells.
func (rec *Recording) ChainID() uint64 { return rec.chainID }

// parseQuantity parses a JSON hex quantity string ("0x1a") or a JSON integer.
func parseQuantity(raw []byte) (uint64, error) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		s := string(raw[1 : len(raw)-1])
		if len(s) < 3 || (s[:2] != "0x" && s[:2] != "0X") {
			return 0, fmt.Errorf("invalid hex quantity %s", raw)
		}
		if len(s) > 18 {
			v, ok := new(big.Int).SetString(s[2:], 16)
			if !ok || !v.IsUint64() {
				return 0, fmt.Errorf("hex quantity %s out of range", raw)
			}
			return v.Uint64(), nil
		}
		return strconv.ParseUint(s[2:], 16, 64)
	}
	return strconv.ParseUint(string(raw), 10, 64)
}

// parseHash parses a JSON string holding a 0x-prefixed 32-byte hex hash.
func parseHash(raw []byte) (Hash, error) {
	var h Hash
	if len(raw) != 68 || raw[0] != '"' || raw[67] != '"' || raw[1] != '0' || (raw[2] != 'x' && raw[2] != 'X') {
		return h, fmt.Errorf("invalid hash %s", raw)
	}
	if _, err := hex.Decode(h[:], raw[3:67]); err != nil {
		return h, fmt.Errorf("invalid hash %s", raw)
	}
	return h, nil
}
