package kafkautil

import (
	"bytes"
	"testing"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLZ4CompressorFrames compresses inputs of several sizes (one and
// several lz4 blocks, random data that does not compress, text again after
// it: the size guesses are wrong both ways) into a reused buffer, as
// franz-go's producer does, and checks that franz-go's own
// decompressor and the consumers' give the input back, and that the frame
// carries no content checksum (the flag bit of its FLG byte), as the Java
// producer's do.
func TestLZ4CompressorFrames(t *testing.T) {
	c := newLZ4Compressor()
	ours := newLZ4Decompressor(maxDecompressedBatch)
	theirs := kgo.DefaultDecompressor()
	dst := new(bytes.Buffer)
	for _, tc := range []struct {
		name   string
		n      int
		random bool
	}{
		{"small", 1000, false},
		{"several 4 MiB blocks", 9 << 20, false},
		{"random", 1 << 20, true},
		{"text after random", 2 << 20, false},
		{"empty", 0, false},
	} {
		src := payload(tc.n, tc.random)
		dst.Reset()
		out, typ := c.Compress(dst, src)
		if typ != kgo.CodecLz4 {
			t.Fatalf("%s: codec %v", tc.name, typ)
		}
		if len(out) < 7 || !bytes.Equal(out[:4], []byte{0x04, 0x22, 0x4d, 0x18}) {
			t.Fatalf("%s: not an lz4 frame: % x", tc.name, out[:min(len(out), 8)])
		}
		if flg := out[4]; flg&0x04 != 0 {
			t.Errorf("%s: FLG %08b has the content checksum bit", tc.name, flg)
		}
		if n := lz4.CompressBlockBound(len(src)) + 32 + 4*(len(src)>>22); len(out) > n {
			t.Errorf("%s: %d bytes compressed, over lz4's bound %d", tc.name, len(out), n)
		}
		for name, d := range map[string]kgo.Decompressor{"ours": ours, "franz-go": theirs} {
			got, err := d.Decompress(bytes.Clone(out), kgo.CodecLz4)
			if err != nil {
				t.Fatalf("%s: %s decompressor: %v", tc.name, name, err)
			}
			if !bytes.Equal(got, src) {
				t.Errorf("%s: %s decompressor gave %d bytes back, want the %d compressed", tc.name, name, len(got), len(src))
			}
		}
	}
}
