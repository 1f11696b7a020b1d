package kafkautil

import (
	"hash/maphash"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// NewSharedDecompressor returns a decompressor for several consumers of the
// same topics in one process (kgo.WithDecompressor on each of them, after
// BaseOpts), such as the processor's sink and matcher, which both read
// every block batch: each batch is decompressed once, by the consumer that
// fetches it first, and the others get the same bytes. Consumers only read
// them (records, and the events decoded from them, alias the bytes), so
// sharing is safe. Decompressed batches are kept until they add up to
// keepBytes, oldest out first; consumers fetch a batch at about the same
// time, so little is needed.
//
// Without it the sink and the matcher each decompress every batch: twice
// the CPU of one of the processor's largest steps, and twice the garbage.
//
// A batch is known by its compressed bytes' length, codec and 64-bit hash
// (hash/maphash, per process seed): the batches the broker returns carry a
// CRC that franz-go checks first, and a false match would need two distinct
// batches in the small window of kept ones to collide on 64 bits.
func NewSharedDecompressor(keepBytes int) kgo.Decompressor {
	return &sharedDecompressor{
		inner:   newLZ4Decompressor(maxDecompressedBatch),
		seed:    maphash.MakeSeed(),
		keep:    keepBytes,
		entries: map[batchKey]*sharedBatch{},
	}
}

type sharedDecompressor struct {
	inner kgo.Decompressor
	seed  maphash.Seed
	keep  int

	mu      sync.Mutex
	entries map[batchKey]*sharedBatch
	order   []batchKey // oldest first
	held    int        // bytes of the kept, finished batches
}

type batchKey struct {
	n     int
	codec kgo.CompressionCodecType
	hash  uint64
}

type sharedBatch struct {
	done chan struct{} // closed once out and err are set
	out  []byte
	err  error
	held bool // counted in sharedDecompressor.held
}

// Decompress implements kgo.Decompressor.
func (d *sharedDecompressor) Decompress(src []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	if codec == kgo.CodecNone {
		return d.inner.Decompress(src, codec)
	}
	k := batchKey{n: len(src), codec: codec, hash: maphash.Bytes(d.seed, src)}
	d.mu.Lock()
	if b, ok := d.entries[k]; ok {
		d.mu.Unlock()
		<-b.done // another consumer is decompressing it right now
		return b.out, b.err
	}
	b := &sharedBatch{done: make(chan struct{})}
	d.entries[k] = b
	d.order = append(d.order, k)
	d.mu.Unlock()

	b.out, b.err = d.inner.Decompress(src, codec)
	close(b.done)

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.entries[k] != b {
		return b.out, b.err // already evicted
	}
	if b.err != nil {
		delete(d.entries, k) // not kept: a later fetch tries again
		return b.out, b.err
	}
	b.held = true
	d.held += len(b.out)
	for d.held > d.keep && len(d.order) > 0 {
		old := d.order[0]
		d.order = d.order[1:]
		if e, ok := d.entries[old]; ok {
			delete(d.entries, old)
			if e.held {
				d.held -= len(e.out)
			}
		}
	}
	if len(d.order) == 0 || cap(d.order) > 4*len(d.order)+64 {
		d.order = append([]batchKey(nil), d.order...) // let the consumed front go
	}
	return b.out, b.err
}
