// Package iox reads streams of known approximate size into one buffer.
package iox

import (
	"errors"
	"io"
	"slices"
)

// ErrTooLarge is returned when a stream holds more than the limit.
var ErrTooLarge = errors.New("iox: more data than the limit")

// ReadAll reads r to its end into one buffer of size bytes (at least 4
// KiB), grown by a quarter (at least 64 KiB) each time the data outgrows
// it, and fails with ErrTooLarge past limit bytes. The result's capacity is
// its length.
//
// Why not io.ReadAll or bytes.Buffer: callers read answers and batches of
// megabytes whose size they can guess from the last one. Both of those
// start small and double, and bytes.Buffer zeroes the whole new capacity at
// each step; here a good guess costs one allocation and a wrong one a
// regrowth that zeroes only what was not copied.
func ReadAll(r io.Reader, size, limit int) ([]byte, error) {
	b, err := ReadAllInto(nil, r, size, limit)
	return b[:len(b):len(b)], err
}

// ReadAllInto is ReadAll reusing buf's memory when it holds size bytes
// (its contents are overwritten), and keeping any spare capacity, so that
// the result can serve as the next buf: a caller that has finished with
// the last answer reads the next into it instead of allocating, and
// zeroing, another.
func ReadAllInto(buf []byte, r io.Reader, size, limit int) ([]byte, error) {
	want := min(max(size, 4<<10), limit)
	if cap(buf) >= want {
		buf = buf[:min(cap(buf), limit)]
	} else {
		buf = make([]byte, want)
	}
	n := 0
	for {
		if n == len(buf) {
			if n == limit {
				// Full: one more byte means the stream exceeds the limit.
				var one [1]byte
				m, err := io.ReadFull(r, one[:])
				if m > 0 {
					return nil, ErrTooLarge
				}
				if err == io.EOF {
					return buf[:n], nil
				}
				return nil, err
			}
			buf = slices.Grow(buf, min(max(n/4, 64<<10), limit-n))
			buf = buf[:min(cap(buf), limit)]
		}
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			return buf[:n], nil
		}
		if err != nil {
			return nil, err
		}
	}
}
