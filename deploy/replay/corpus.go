package replay

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// A corpus is a large synthetic chain built from recordings (deploy/corpus
// writes them), stored so that a replay server can serve it without holding
// it in memory. It is a directory of three files:
//
//   - blocks.jsonl.zst: the blocks in ascending number order, one line per
//     block in the recording format, compressed as independent zstd frames
//     of BlocksPerFrame blocks each (concatenated frames are one valid zstd
//     stream: `zstd -dc blocks.jsonl.zst` prints the whole chain);
//   - frames.idx: the byte offset of every frame, then the file's size, as
//     little-endian uint64s;
//   - corpus.json: CorpusMeta, written last: a directory without it is an
//     unfinished corpus.
//
// Block numbers are contiguous from First. Every block and transaction hash
// is made by a HashScheme whose key is in corpus.json, so a hash tells the
// block (and the position) it belongs to: looking one up needs no index in
// memory.
const (
	corpusMetaFile  = "corpus.json"
	corpusDataFile  = "blocks.jsonl.zst"
	corpusIndexFile = "frames.idx"
	// CorpusFormat names this layout in CorpusMeta.Format.
	CorpusFormat = "moraine-corpus/1"
)

// CorpusMeta describes a corpus (corpus.json).
type CorpusMeta struct {
	Format  string `json:"format"`
	ChainID uint64 `json:"chainId"`
	First   uint64 `json:"first"`
	Last    uint64 `json:"last"`
	// Blocks, Transactions, Logs and CallFrames count what the corpus holds.
	Blocks         uint64 `json:"blocks"`
	Transactions   uint64 `json:"transactions"`
	Logs           uint64 `json:"logs"`
	CallFrames     uint64 `json:"callFrames"`
	BlocksPerFrame int    `json:"blocksPerFrame"`
	// HashKey is the hex AES-128 key of the HashScheme.
	HashKey string `json:"hashKey"`
	// Generator and Sources say how it was made (informational).
	Generator string         `json:"generator,omitempty"`
	Sources   []CorpusSource `json:"sources,omitempty"`
}

// CorpusSource is one recording a corpus was built from.
type CorpusSource struct {
	File         string `json:"file"`
	Blocks       int    `json:"blocks"`
	Transactions int    `json:"transactions"`
}

// HashScheme makes block and transaction hashes that look random, are unique
// (an AES permutation of the block number, the position and the kind) and can
// be read back without an index: the first 16 bytes are E(kind, position,
// number), the last 16 are E(first 16), which also tells a hash of the scheme
// from any other.
type HashScheme struct{ c cipher.Block }

// NewHashScheme returns the scheme of a 16-byte key.
func NewHashScheme(key []byte) (*HashScheme, error) {
	c, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("replay: hash key: %w", err)
	}
	if len(key) != 16 {
		return nil, fmt.Errorf("replay: hash key of %d bytes, want 16", len(key))
	}
	return &HashScheme{c: c}, nil
}

const (
	hashKindBlock = 1
	hashKindTx    = 2
)

func (s *HashScheme) make(kind byte, n uint64, i uint32) Hash {
	var p [16]byte
	p[0] = kind
	binary.BigEndian.PutUint32(p[4:8], i)
	binary.BigEndian.PutUint64(p[8:], n)
	var h Hash
	s.c.Encrypt(h[:16], p[:])
	s.c.Encrypt(h[16:], h[:16])
	return h
}

// Block is the hash of block n.
func (s *HashScheme) Block(n uint64) Hash { return s.make(hashKindBlock, n, 0) }

// Tx is the hash of the i-th transaction of block n.
func (s *HashScheme) Tx(n uint64, i uint32) Hash { return s.make(hashKindTx, n, i) }

// decode reads a hash of the scheme back; ok is false for any other hash.
func (s *HashScheme) decode(h Hash) (kind byte, n uint64, i uint32, ok bool) {
	var check [16]byte
	s.c.Encrypt(check[:], h[:16])
	if !bytes.Equal(check[:], h[16:]) {
		return 0, 0, 0, false
	}
	var p [16]byte
	s.c.Decrypt(p[:], h[:16])
	if p[1] != 0 || p[2] != 0 || p[3] != 0 {
		return 0, 0, 0, false
	}
	return p[0], binary.BigEndian.Uint64(p[8:]), binary.BigEndian.Uint32(p[4:8]), true
}

// Corpus serves a corpus directory from disk. Blocks are read a frame at a
// time and the most recently used frames are kept decoded (FrameCache).
type Corpus struct {
	meta    CorpusMeta
	f       *os.File
	offsets []uint64 // frame k is [offsets[k], offsets[k+1])
	scheme  *HashScheme
	dec     *zstd.Decoder

	mu     sync.Mutex
	frames map[int]*frame
	recent []int // frame numbers, least recently used first
}

// FrameCache is how many decoded frames a Corpus keeps: a frame of 32
// Gunzilla-sized blocks is about 3.5 MB, and an indexer reading forward with
// a few batches in flight needs two or three.
const FrameCache = 16

type frame struct {
	done   chan struct{}
	blocks []*Block
	err    error
}

// IsCorpus reports whether path is a corpus directory or its corpus.json.
func IsCorpus(path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	if st.IsDir() {
		_, err = os.Stat(filepath.Join(path, corpusMetaFile))
		return err == nil
	}
	return filepath.Base(path) == corpusMetaFile
}

// OpenSource opens a corpus (IsCorpus) or loads a recording (Open).
func OpenSource(path string) (Source, error) {
	if IsCorpus(path) {
		return OpenCorpus(path)
	}
	return Open(path)
}

// OpenCorpus opens a corpus directory (or its corpus.json).
func OpenCorpus(path string) (*Corpus, error) {
	dir := path
	if filepath.Base(path) == corpusMetaFile {
		dir = filepath.Dir(path)
	}
	c, err := openCorpus(dir)
	if err != nil {
		return nil, fmt.Errorf("replay: corpus %s: %w", dir, err)
	}
	return c, nil
}

func openCorpus(dir string) (*Corpus, error) {
	raw, err := os.ReadFile(filepath.Join(dir, corpusMetaFile))
	if err != nil {
		return nil, err
	}
	c := &Corpus{frames: map[int]*frame{}}
	if err := json.Unmarshal(raw, &c.meta); err != nil {
		return nil, fmt.Errorf("%s: %w", corpusMetaFile, err)
	}
	m := c.meta
	switch {
	case m.Format != CorpusFormat:
		return nil, fmt.Errorf("format %q, want %q", m.Format, CorpusFormat)
	case m.Blocks == 0 || m.Last-m.First+1 != m.Blocks:
		return nil, fmt.Errorf("blocks %d..%d do not make %d contiguous blocks", m.First, m.Last, m.Blocks)
	case m.BlocksPerFrame <= 0:
		return nil, errors.New("blocksPerFrame must be positive")
	}
	key, err := hex.DecodeString(m.HashKey)
	if err != nil {
		return nil, fmt.Errorf("hashKey: %w", err)
	}
	if c.scheme, err = NewHashScheme(key); err != nil {
		return nil, err
	}
	idx, err := os.ReadFile(filepath.Join(dir, corpusIndexFile))
	if err != nil {
		return nil, err
	}
	frames := (int(m.Blocks) + m.BlocksPerFrame - 1) / m.BlocksPerFrame
	if len(idx) != 8*(frames+1) {
		return nil, fmt.Errorf("%s holds %d bytes, want %d for %d frames", corpusIndexFile, len(idx), 8*(frames+1), frames)
	}
	c.offsets = make([]uint64, frames+1)
	for k := range c.offsets {
		c.offsets[k] = binary.LittleEndian.Uint64(idx[8*k:])
	}
	if c.f, err = os.Open(filepath.Join(dir, corpusDataFile)); err != nil {
		return nil, err
	}
	if st, err := c.f.Stat(); err != nil || uint64(st.Size()) != c.offsets[frames] {
		c.f.Close()
		return nil, fmt.Errorf("%s is not %d bytes long as %s says", corpusDataFile, c.offsets[frames], corpusIndexFile)
	}
	// DecodeAll from several requests at once, each on its own decoder.
	if c.dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(4), zstd.WithDecoderMaxMemory(1<<30)); err != nil {
		c.f.Close()
		return nil, err
	}
	return c, nil
}

// Close releases the file.
func (c *Corpus) Close() error {
	c.dec.Close()
	return c.f.Close()
}

// Meta describes the corpus.
func (c *Corpus) Meta() CorpusMeta { return c.meta }

// Len is the number of blocks (Source).
func (c *Corpus) Len() int { return int(c.meta.Blocks) }

// TxCount is the number of transactions (Source).
func (c *Corpus) TxCount() int { return int(c.meta.Transactions) }

// First is the lowest block number (Source).
func (c *Corpus) First() uint64 { return c.meta.First }

// Last is the highest block number (Source).
func (c *Corpus) Last() uint64 { return c.meta.Last }

// ChainID is the corpus chain's EVM chain id (Source).
func (c *Corpus) ChainID() uint64 { return c.meta.ChainID }

func (c *Corpus) number(i int) uint64 { return c.meta.First + uint64(i) }

func (c *Corpus) index(n uint64) (int, bool) {
	if n < c.meta.First || n > c.meta.Last {
		return 0, false
	}
	return int(n - c.meta.First), true
}

func (c *Corpus) hashIndex(h Hash) (int, bool) {
	kind, n, _, ok := c.scheme.decode(h)
	if !ok || kind != hashKindBlock {
		return 0, false
	}
	return c.index(n)
}

func (c *Corpus) txLocation(h Hash) (int, int, bool) {
	kind, n, i, ok := c.scheme.decode(h)
	if !ok || kind != hashKindTx {
		return 0, 0, false
	}
	b, ok := c.index(n)
	return b, int(i), ok
}

// load returns the i-th block, reading its frame unless it is cached.
func (c *Corpus) load(i int) (*Block, error) {
	k := i / c.meta.BlocksPerFrame
	fr := c.frame(k)
	<-fr.done
	if fr.err != nil {
		return nil, fr.err
	}
	return fr.blocks[i%c.meta.BlocksPerFrame], nil
}

// frame returns frame k, cached or being read; the first caller reads it.
func (c *Corpus) frame(k int) *frame {
	c.mu.Lock()
	fr, ok := c.frames[k]
	if ok {
		for j, r := range c.recent {
			if r == k {
				c.recent = append(append(c.recent[:j:j], c.recent[j+1:]...), k)
				break
			}
		}
		c.mu.Unlock()
		return fr
	}
	fr = &frame{done: make(chan struct{})}
	c.frames[k] = fr
	c.recent = append(c.recent, k)
	if len(c.recent) > FrameCache {
		delete(c.frames, c.recent[0])
		c.recent = c.recent[1:]
	}
	c.mu.Unlock()
	fr.blocks, fr.err = c.read(k)
	if fr.err != nil {
		// Not cached: the next request tries again.
		c.mu.Lock()
		if c.frames[k] == fr {
			delete(c.frames, k)
		}
		c.mu.Unlock()
	}
	close(fr.done)
	return fr
}

// read decompresses and parses frame k.
func (c *Corpus) read(k int) ([]*Block, error) {
	comp := make([]byte, c.offsets[k+1]-c.offsets[k])
	if _, err := c.f.ReadAt(comp, int64(c.offsets[k])); err != nil {
		return nil, fmt.Errorf("frame %d: %w", k, err)
	}
	data, err := c.dec.DecodeAll(comp, nil)
	if err != nil {
		return nil, fmt.Errorf("frame %d: %w", k, err)
	}
	first := k * c.meta.BlocksPerFrame
	want := min(c.meta.BlocksPerFrame, c.Len()-first)
	blocks := make([]*Block, 0, want)
	for len(data) > 0 {
		line := data
		if j := bytes.IndexByte(data, '\n'); j >= 0 {
			line, data = data[:j], data[j+1:]
		} else {
			data = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		b, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("frame %d, line %d: %w", k, len(blocks)+1, err)
		}
		if n := c.number(first + len(blocks)); b.Number != n {
			return nil, fmt.Errorf("frame %d holds block %d where block %d belongs", k, b.Number, n)
		}
		blocks = append(blocks, b)
	}
	if len(blocks) != want {
		return nil, fmt.Errorf("frame %d holds %d blocks, want %d", k, len(blocks), want)
	}
	return blocks, nil
}

// CorpusWriter writes a corpus directory. Frames may be compressed
// concurrently (CompressFrame) but must be appended in order (AppendFrame).
type CorpusWriter struct {
	dir     string
	f       *os.File
	enc     *zstd.Encoder
	offsets []uint64
	written uint64
	frames  int
	blocks  uint64
}

// CreateCorpus starts a corpus in dir (created; an existing corpus there is
// replaced when Close succeeds).
func CreateCorpus(dir string, level zstd.EncoderLevel) (*CorpusWriter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Unfinished until corpus.json is written again.
	if err := os.Remove(filepath.Join(dir, corpusMetaFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, corpusDataFile))
	if err != nil {
		return nil, err
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(4))
	if err != nil {
		f.Close()
		return nil, err
	}
	return &CorpusWriter{dir: dir, f: f, enc: enc}, nil
}

// CompressFrame compresses the lines of one frame (safe for concurrent use).
func (w *CorpusWriter) CompressFrame(lines []byte, dst []byte) []byte {
	return w.enc.EncodeAll(lines, dst[:0])
}

// AppendFrame writes the next frame, holding blocks blocks.
func (w *CorpusWriter) AppendFrame(compressed []byte, blocks int) error {
	w.offsets = append(w.offsets, w.written)
	if _, err := w.f.Write(compressed); err != nil {
		return err
	}
	w.written += uint64(len(compressed))
	w.frames++
	w.blocks += uint64(blocks)
	return nil
}

// Bytes is the compressed size written so far.
func (w *CorpusWriter) Bytes() uint64 { return w.written }

// Abort stops writing: the directory is left without corpus.json, an
// unfinished corpus that OpenCorpus refuses.
func (w *CorpusWriter) Abort() {
	w.enc.Close()
	w.f.Close()
}

// Close writes the index and then meta, which must describe what was
// appended: every frame but the last holds meta.BlocksPerFrame blocks.
func (w *CorpusWriter) Close(meta CorpusMeta) error {
	defer w.enc.Close()
	meta.Format = CorpusFormat
	if err := w.f.Close(); err != nil {
		return err
	}
	if meta.Blocks != w.blocks || w.frames != (int(w.blocks)+meta.BlocksPerFrame-1)/meta.BlocksPerFrame {
		return fmt.Errorf("replay: corpus meta says %d blocks in frames of %d, %d blocks in %d frames were written",
			meta.Blocks, meta.BlocksPerFrame, w.blocks, w.frames)
	}
	idx := make([]byte, 0, 8*(len(w.offsets)+1))
	for _, o := range append(w.offsets, w.written) {
		idx = binary.LittleEndian.AppendUint64(idx, o)
	}
	if err := os.WriteFile(filepath.Join(w.dir, corpusIndexFile), idx, 0o644); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(w.dir, corpusMetaFile), append(raw, '\n'), 0o644)
}
