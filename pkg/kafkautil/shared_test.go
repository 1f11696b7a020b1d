package kafkautil

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// countingDecompressor counts the batches it decompresses.
type countingDecompressor struct {
	inner kgo.Decompressor
	calls atomic.Int32
}

func (c *countingDecompressor) Decompress(src []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	c.calls.Add(1)
	return c.inner.Decompress(src, codec)
}

// Consumers decompressing the same batch at the same time, or one after
// the other, decompress it once and get the same bytes; different batches
// are not confused; what is kept stays under the bound; corrupt input is an
// error for every consumer and is not kept.
func TestSharedDecompressor(t *testing.T) {
	counter := &countingDecompressor{inner: newLZ4Decompressor(maxDecompressedBatch)}
	d := NewSharedDecompressor(3 << 20).(*sharedDecompressor)
	d.inner = counter
	c := newLZ4Compressor()
	batch := func(seed int) ([]byte, []byte) {
		src := payload(1<<20, false)
		src[0] = byte(seed) // distinct contents, same length
		out, _ := c.Compress(new(bytes.Buffer), src)
		return src, bytes.Clone(out)
	}

	want, comp := batch(1)
	var wg sync.WaitGroup
	results := make([][]byte, 4)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := d.Decompress(comp, kgo.CodecLz4)
			if err != nil {
				t.Error(err)
			}
			results[i] = out
		}()
	}
	wg.Wait()
	for i, out := range results {
		if !bytes.Equal(out, want) {
			t.Fatalf("consumer %d got other bytes", i)
		}
		if &out[0] != &results[0][0] {
			t.Errorf("consumer %d got its own copy", i)
		}
	}
	if n := counter.calls.Load(); n != 1 {
		t.Errorf("one batch for four consumers decompressed %d times", n)
	}

	var last []byte
	for seed := 2; seed <= 6; seed++ { // 5 more batches of 1 MiB: the first ones go
		w, comp := batch(seed)
		last = comp
		out, err := d.Decompress(comp, kgo.CodecLz4)
		if err != nil || !bytes.Equal(out, w) {
			t.Fatalf("batch %d: %v", seed, err)
		}
	}
	if d.held > 3<<20 || len(d.entries) != 3 {
		t.Errorf("%d bytes in %d batches kept, bound 3 MiB", d.held, len(d.entries))
	}
	if _, err := d.Decompress(last, kgo.CodecLz4); err != nil || counter.calls.Load() != 6 {
		t.Errorf("the last batch again: err %v, %d decompressions (want it kept: 6)", err, counter.calls.Load())
	}
	if _, err := d.Decompress([]byte("not lz4 at all"), kgo.CodecLz4); err == nil {
		t.Error("corrupt input decompressed")
	}
	if _, err := d.Decompress([]byte("not lz4 at all"), kgo.CodecLz4); err == nil || counter.calls.Load() != 8 {
		t.Errorf("corrupt input again: err %v, %d decompressions (want a new try: 8)", err, counter.calls.Load())
	}
}
