package kafkautil

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/iox"
)

// maxDecompressedBatch bounds what one fetched batch may decompress to, as
// franz-go's own decompressor does by default (a custom one must bound
// itself).
const maxDecompressedBatch = 1 << 30

// lz4Decompressor decodes lz4 record batches (what moraine's producers
// write) straight into one slice per batch, sized from the ratio of the
// batches before it; other codecs go to franz-go's decompressor.
//
// Why: franz-go streams lz4 into a pooled bytes.Buffer and then clones the
// result, since records alias it. The pool is emptied at every garbage
// collection, so on a busy consumer the buffer is regrown by doubling for
// most batches, then copied. Here a batch costs one allocation, plus a rare
// regrowth when it compresses better than the last.
type lz4Decompressor struct {
	fallback kgo.Decompressor
	max      int
	// ratio is the last batch's decompressed/compressed size, in 1/16ths.
	// Within one client, consecutive batches compress alike.
	ratio   atomic.Int64
	readers sync.Pool // *lz4Reader
}

type lz4Reader struct {
	src   bytes.Reader
	inner *lz4.Reader
}

func newLZ4Decompressor(max int) *lz4Decompressor {
	d := &lz4Decompressor{fallback: kgo.DefaultDecompressor(), max: max}
	d.ratio.Store(10 * 16) // a guess for the first batch: block records compress about 10:1
	d.readers.New = func() any {
		r := &lz4Reader{}
		r.inner = lz4.NewReader(&r.src)
		return r
	}
	return d
}

// Decompress implements kgo.Decompressor.
func (d *lz4Decompressor) Decompress(src []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	if codec != kgo.CodecLz4 {
		return d.fallback.Decompress(src, codec)
	}
	r := d.readers.Get().(*lz4Reader)
	defer d.readers.Put(r)
	r.src.Reset(src)
	r.inner.Reset(&r.src)

	// An eighth over the estimate: consecutive batches of block records
	// (about 10:1) differ by up to a tenth in how well they compress. Each
	// batch gets a fresh slice, never a reused one: its records, and the
	// events decoded from them, alias it.
	dst, err := iox.ReadAll(r.inner, len(src)*int(d.ratio.Load())/16*9/8, d.max)
	if errors.Is(err, iox.ErrTooLarge) {
		return nil, kgo.ErrMaxDecompress
	}
	if err != nil {
		return nil, err
	}
	if len(src) > 0 {
		d.ratio.Store(int64(len(dst)) * 16 / int64(len(src)))
	}
	return dst, nil
}
