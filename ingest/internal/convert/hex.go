package convert

import (
	"fmt"
	"math/big"
	"strconv"
)

// The node encodes quantities as 0x-prefixed hex without leading zeros and
// data as 0x-prefixed hex with an even number of digits. These helpers read
// both straight from the JSON input (no intermediate string) and accept an
// empty value for "absent" where the caller allows it.

// strip removes the 0x prefix.
func strip(s []byte) []byte {
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		return s[2:]
	}
	return s
}

// unhex decodes one hex digit; 255 marks a bad digit. A table lookup: call
// data is megabytes of hex per block.
func unhex(c byte) byte { return hexDigits[c] }

var hexDigits = func() (t [256]byte) {
	for i := range t {
		t[i] = 255
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c], t[c-'a'+'A'] = c-'a'+10, c-'a'+10
	}
	return t
}()

// quantity parses a hex quantity that must fit in 64 bits; empty is 0.
func quantity(field string, s []byte) (uint64, error) {
	d := strip(s)
	for len(d) > 16 && d[0] == '0' {
		d = d[1:]
	}
	if len(d) > 16 {
		return 0, fmt.Errorf("%s: quantity %.70q exceeds 64 bits", field, s)
	}
	var v uint64
	for _, c := range d {
		x := unhex(c)
		if x > 15 {
			return 0, fmt.Errorf("%s: bad quantity %.70q", field, s)
		}
		v = v<<4 | uint64(x)
	}
	return v, nil
}

// optQuantity parses a hex quantity that may be absent (nil).
func optQuantity(field string, s []byte) (*uint64, error) {
	if s == nil {
		return nil, nil
	}
	v, err := quantity(field, s)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// decimal converts a hex quantity of up to 256 bits to its decimal string.
// An absent value (nil) gives "", so callers can tell absent from zero.
func decimal(field string, s []byte) (string, error) {
	if s == nil {
		return "", nil
	}
	d := strip(s)
	for len(d) > 1 && d[0] == '0' {
		d = d[1:]
	}
	switch {
	case len(d) == 0 || len(d) == 1 && d[0] == '0':
		return "0", nil
	case len(d) <= 16:
		v, err := quantity(field, d)
		if err != nil {
			return "", err
		}
		return strconv.FormatUint(v, 10), nil
	}
	b, err := bigInt(field, s)
	if err != nil {
		return "", err
	}
	return b.String(), nil
}

// bigInt parses a hex quantity of up to 256 bits; nil is nil.
func bigInt(field string, s []byte) (*big.Int, error) {
	if s == nil {
		return nil, nil
	}
	d := strip(s)
	if len(d) == 0 {
		return new(big.Int), nil
	}
	if len(d) <= 16 {
		v, err := quantity(field, d)
		if err != nil {
			return nil, err
		}
		return new(big.Int).SetUint64(v), nil
	}
	if len(d) > 64 {
		return nil, fmt.Errorf("%s: quantity %.70q exceeds 256 bits", field, s)
	}
	b, ok := new(big.Int).SetString(string(d), 16)
	if !ok {
		return nil, fmt.Errorf("%s: bad quantity %.70q", field, s)
	}
	return b, nil
}

// arena hands out byte slices carved from larger slabs: a block has tens of
// thousands of addresses and hashes, and one allocation per slab instead of
// per field keeps the garbage collector out of the hot path. Everything
// carved lives as long as the block record that holds it.
type arena struct{ slab []byte }

const slabSize = 64 << 10

func (a *arena) alloc(n int) []byte {
	if n > slabSize/8 {
		return make([]byte, n)
	}
	if len(a.slab) < n {
		a.slab = make([]byte, slabSize)
	}
	b := a.slab[:n:n]
	a.slab = a.slab[n:]
	return b
}

// data decodes 0x-prefixed hex bytes; empty, "0x" and absent give nil.
func (a *arena) data(field string, s []byte) ([]byte, error) {
	d := strip(s)
	if len(d) == 0 {
		return nil, nil
	}
	odd := len(d) % 2
	b := a.alloc((len(d) + 1) / 2)
	if odd == 1 {
		// Not valid data encoding, but accept a short value with its
		// leading zero dropped rather than fail the whole block.
		x := unhex(d[0])
		if x > 15 {
			return nil, fmt.Errorf("%s: bad hex %.70q", field, s)
		}
		b[0] = x
		d = d[1:]
	}
	for i := odd; i < len(b); i++ {
		hi, lo := unhex(d[2*(i-odd)]), unhex(d[2*(i-odd)+1])
		if hi > 15 || lo > 15 {
			return nil, fmt.Errorf("%s: bad hex %.70q", field, s)
		}
		b[i] = hi<<4 | lo
	}
	return b, nil
}
