package kafkautil

import (
	"bytes"
	"sync"

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
//     covers the batch. It was about 2% of ingest's CPU samples and 3% of
//     the processor's (two consumers) in make bench's pipeline run.
//   - The output buffer is grown to the compression bound before writing.
//     franz-go pools it, but the pool is emptied at every garbage
//     collection, so on a busy producer it was regrown by doubling for
//     most batches.
type lz4Compressor struct {
	writers sync.Pool // *lz4.Writer
}

func newLZ4Compressor() *lz4Compressor {
	c := &lz4Compressor{}
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
	// (4 MiB blocks) and a 4-byte end mark.
	dst.Grow(lz4.CompressBlockBound(len(src)) + 32 + 4*(len(src)>>22))
	w.Reset(dst)
	if _, err := w.Write(src); err != nil {
		return nil, kgo.CodecError
	}
	if err := w.Close(); err != nil {
		return nil, kgo.CodecError
	}
	return dst.Bytes(), kgo.CodecLz4
}
