package iox

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// ReadAll returns the whole stream whatever the size guess (none, too
// small, exact, too large), read in small pieces or all at once, with no
// spare capacity.
func TestReadAll(t *testing.T) {
	for _, n := range []int{0, 1, 4 << 10, 100_000, 3 << 20} {
		want := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
		for _, size := range []int{0, 1, n / 3, n, 2 * n} {
			for _, r := range []io.Reader{bytes.NewReader(want), iotest.OneByteReader(bytes.NewReader(want)), iotest.DataErrReader(bytes.NewReader(want))} {
				got, err := ReadAll(r, size, 1<<30)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("n %d, size %d: %d bytes, err %v", n, size, len(got), err)
				}
				if cap(got) != len(got) {
					t.Fatalf("n %d, size %d: cap %d > len %d", n, size, cap(got), len(got))
				}
			}
		}
	}
}

// Past the limit ReadAll fails; at the limit it does not.
func TestReadAllLimit(t *testing.T) {
	data := bytes.Repeat([]byte{'x'}, 100_000)
	for _, size := range []int{0, 50_000, 100_000, 200_000} {
		if _, err := ReadAll(bytes.NewReader(data), size, 99_999); !errors.Is(err, ErrTooLarge) {
			t.Errorf("size %d, one byte over the limit: err %v, want ErrTooLarge", size, err)
		}
		if got, err := ReadAll(bytes.NewReader(data), size, 100_000); err != nil || len(got) != len(data) {
			t.Errorf("size %d, exactly the limit: %d bytes, err %v", size, len(got), err)
		}
	}
}

// A read error other than the end of the stream is returned.
func TestReadAllError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(bytes.NewReader(make([]byte, 10_000)), iotest.ErrReader(boom))
	if _, err := ReadAll(r, 0, 1<<30); !errors.Is(err, boom) {
		t.Fatalf("err %v, want boom", err)
	}
}

// ReadAllInto reads into buf's memory when it is large enough, and
// allocates otherwise; either way the result is the whole stream.
func TestReadAllInto(t *testing.T) {
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<12) // 64 KiB
	buf := make([]byte, 0, 100<<10)
	got, err := ReadAllInto(buf, bytes.NewReader(want), len(want), 1<<30)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%d bytes, err %v", len(got), err)
	}
	if &got[0] != &buf[:1][0] {
		t.Errorf("a large enough buf was not reused")
	}
	small := make([]byte, 10)
	got, err = ReadAllInto(small, iotest.OneByteReader(bytes.NewReader(want)), len(want), 1<<30)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("small buf: %d bytes, err %v", len(got), err)
	}
	if _, err := ReadAllInto(buf, bytes.NewReader(want), len(want), 1000); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit: err %v, want ErrTooLarge", err)
	}
}
