package kafkautil

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// compress encodes src the way franz-go's producer does.
func compress(t *testing.T, codec kgo.CompressionCodec, src []byte) ([]byte, kgo.CompressionCodecType) {
	t.Helper()
	c, err := kgo.DefaultCompressor(codec)
	if err != nil {
		t.Fatal(err)
	}
	out, typ := c.Compress(new(bytes.Buffer), src)
	return bytes.Clone(out), typ
}

// payload is n bytes of hex-like text (compresses well) or random bytes.
func payload(n int, random bool) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	b := make([]byte, n)
	for i := range b {
		if random {
			b[i] = byte(rng.Uint32())
		} else {
			b[i] = "0123456789abcdef"[rng.IntN(4)]
		}
	}
	return b
}

// TestLZ4DecompressorRoundTrip decodes what franz-go's producer encodes,
// in an order that makes the size estimate too small (random data after
// compressible data), too large, and exact, and checks each result is
// exactly the input with no spare capacity that a later append could
// write into.
func TestLZ4DecompressorRoundTrip(t *testing.T) {
	d := newLZ4Decompressor(maxDecompressedBatch)
	for _, tc := range []struct {
		name   string
		n      int
		random bool
	}{
		{"small text", 1000, false},
		{"large text, several 4 MiB lz4 blocks", 9 << 20, false},
		{"random after text: estimate far too small", 6 << 20, true},
		{"text after random: estimate too large", 3 << 20, false},
		{"one byte", 1, false},
		{"same size again", 3 << 20, false},
	} {
		src := payload(tc.n, tc.random)
		comp, typ := compress(t, kgo.Lz4Compression(), src)
		if typ != kgo.CodecLz4 {
			t.Fatalf("%s: compressed with codec %v", tc.name, typ)
		}
		got, err := d.Decompress(comp, kgo.CodecLz4)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !bytes.Equal(got, src) {
			t.Fatalf("%s: decoded %d bytes, want the %d compressed", tc.name, len(got), len(src))
		}
		if cap(got) != len(got) {
			t.Errorf("%s: cap %d > len %d", tc.name, cap(got), len(got))
		}
	}
}

// TestLZ4DecompressorOtherCodecs hands codecs other than lz4 to franz-go.
func TestLZ4DecompressorOtherCodecs(t *testing.T) {
	d := newLZ4Decompressor(maxDecompressedBatch)
	src := payload(100_000, false)
	for _, codec := range []kgo.CompressionCodec{kgo.SnappyCompression(), kgo.ZstdCompression(), kgo.GzipCompression()} {
		comp, typ := compress(t, codec, src)
		got, err := d.Decompress(comp, typ)
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("codec %v: err %v, equal %v", typ, err, bytes.Equal(got, src))
		}
	}
	if got, err := d.Decompress(src, kgo.CodecNone); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("no codec: err %v", err)
	}
}

// TestLZ4DecompressorRejects bounds the output and rejects corrupt input.
func TestLZ4DecompressorRejects(t *testing.T) {
	src := payload(1<<20, false)
	comp, _ := compress(t, kgo.Lz4Compression(), src)

	d := newLZ4Decompressor(1 << 19)
	if _, err := d.Decompress(comp, kgo.CodecLz4); !errors.Is(err, kgo.ErrMaxDecompress) {
		t.Fatalf("1 MiB batch under a 512 KiB bound: err %v, want ErrMaxDecompress", err)
	}
	d = newLZ4Decompressor(1 << 20)
	if got, err := d.Decompress(comp, kgo.CodecLz4); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("batch exactly at the bound: err %v", err)
	}

	corrupt := bytes.Clone(comp)
	corrupt[len(corrupt)/2] ^= 0xff
	if _, err := d.Decompress(corrupt, kgo.CodecLz4); err == nil {
		t.Fatal("corrupt batch decoded without an error")
	}
	if _, err := d.Decompress(comp[:len(comp)/2], kgo.CodecLz4); err == nil {
		t.Fatal("truncated batch decoded without an error")
	}
	// The pooled reader still works after the failures.
	if got, err := d.Decompress(comp, kgo.CodecLz4); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("after failures: err %v", err)
	}
}
