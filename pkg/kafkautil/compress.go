package kafkautil

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lz4Compressor is the producers' codec: lz4 frames as franz-go's own
// compressor writes them, with two differences.
//
//   - No content checksum, as Kafka's Java producer writes its lz4 frames:
//     the checksum is an xxHash32 over every uncompressed byte, computed by
//     the producer and again by every consumer, although the record batch's
//     CRC-32C, which the broker and franz-go's consumers check, already
//     covers the batch, so the hash is work that protects nothing more.
//   - The output buffer is grown once, to the size the last batch's
//     compression ratio predicts (with a quarter to spare), before writing.
//     franz-go pools it, but the pool is emptied at garbage collections, so
//     on a busy producer it would be regrown by doubling for most batches;
//     and growing it to the worst-case bound instead zeroes about ten
//     times the memory the output needs.
type lz4Compressor struct {
	writers sync.Pool // *lz4.Writer
	// ratio is the last batch's uncompressed/compressed size, in 1/16ths.
	ratio atomic.Int64
}

func newLZ4Compressor() *lz4Compressor {
	c := &lz4Compressor{}
	c.ratio.Store(4 * 16) // a cautious first guess: block records compress about 10:1
	c.writers.New = func() any {
		w := lz4.NewWriter(nil)
		// Fast is franz-go's level too; the options are valid constants,
		// so Apply cannot fail.
		_ = w.Apply(lz4.ChecksumOption(false), lz4.CompressionLevelOption(lz4.Fast))
		return w
	}
	return c
}

// Compress implements kgo.Compressor. The flags concern zstd only.
func (c *lz4Compressor) Compress(dst *bytes.Buffer, src []byte, _ ...kgo.CompressFlag) ([]byte, kgo.CompressionCodecType) {
	w := c.writers.Get().(*lz4.Writer)
	defer c.writers.Put(w)
	// The frame adds a header (at most 19 bytes), a 4-byte size per block
	// (4 MiB blocks) and a 4-byte end mark; a wrong guess only costs the
	// buffer a regrowth.
	guess := int64(len(src)) * 16 / c.ratio.Load() * 5 / 4
	dst.Grow(int(min(guess, int64(lz4.CompressBlockBound(len(src))))) + 32 + 4*(len(src)>>22))
	w.Reset(dst)
	if _, err := w.Write(src); err != nil {
		return nil, kgo.CodecError
	}
	if err := w.Close(); err != nil {
		return nil, kgo.CodecError
	}
	if n := dst.Len(); n > 0 {
		c.ratio.Store(max(int64(len(src))*16/int64(n), 16))
	}
	return dst.Bytes(), kgo.CodecLz4
}
