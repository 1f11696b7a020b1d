// Package jsonx is a small pull reader for JSON that decodes in one pass
// without reflection.
//
// Why not encoding/json: a block of a busy chain is megabytes of call-trace
// JSON, mostly hex strings. encoding/json validates the whole input before
// decoding it (two passes), decodes through reflection and allocates a Go
// string for every hex field before it can be turned into bytes. Here the
// caller walks the document with Object/Array callbacks and decodes hex
// straight from the input buffer. On the Gunzilla recording this makes block
// conversion several times faster (see convert's benchmark).
//
// The reader is strict about structure (brackets, commas, colons, string
// escapes) and reports the byte offset of the first error; it does not
// check that numbers are well formed beyond their characters, since the
// JSON-RPC documents it reads carry quantities as strings.
package jsonx

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Reader reads one JSON document from a byte slice. Byte slices it returns
// alias the input unless a string had escapes.
type Reader struct {
	buf []byte
	pos int
}

// NewReader returns a reader over b.
func NewReader(b []byte) *Reader { return &Reader{buf: b} }

// SyntaxError is a malformed document.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("json: %s at offset %d", e.Msg, e.Offset) }

func (r *Reader) fail(msg string) error { return &SyntaxError{Offset: r.pos, Msg: msg} }

// Offset is the current position in the input.
func (r *Reader) Offset() int { return r.pos }

func (r *Reader) ws() {
	for r.pos < len(r.buf) {
		switch r.buf[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

// Peek returns the first byte of the next value without consuming it
// (0 at the end of input).
func (r *Reader) Peek() byte {
	r.ws()
	if r.pos >= len(r.buf) {
		return 0
	}
	return r.buf[r.pos]
}

// Null consumes a null and reports whether there was one.
func (r *Reader) Null() bool {
	if r.Peek() == 'n' && len(r.buf)-r.pos >= 4 && string(r.buf[r.pos:r.pos+4]) == "null" {
		r.pos += 4
		return true
	}
	return false
}

// End checks that only whitespace is left.
func (r *Reader) End() error {
	if r.Peek() != 0 {
		return r.fail("data after the value")
	}
	return nil
}

// Object reads an object, calling fn for every key; fn must consume the
// value (read it or Skip it). The key aliases the input and is valid only
// during the call. A null is accepted as an empty object.
func (r *Reader) Object(fn func(key []byte) error) error {
	if r.Null() {
		return nil
	}
	if r.Peek() != '{' {
		return r.fail("expected object")
	}
	r.pos++
	if r.Peek() == '}' {
		r.pos++
		return nil
	}
	for {
		if r.Peek() != '"' {
			return r.fail("expected object key")
		}
		key, err := r.Bytes()
		if err != nil {
			return err
		}
		if r.Peek() != ':' {
			return r.fail("expected ':'")
		}
		r.pos++
		if err := fn(key); err != nil {
			return err
		}
		switch r.Peek() {
		case ',':
			r.pos++
		case '}':
			r.pos++
			return nil
		default:
			return r.fail("expected ',' or '}' in object")
		}
	}
}

// Array reads an array, calling fn for every element; fn must consume it.
// A null is accepted as an empty array.
func (r *Reader) Array(fn func() error) error {
	if r.Null() {
		return nil
	}
	if r.Peek() != '[' {
		return r.fail("expected array")
	}
	r.pos++
	if r.Peek() == ']' {
		r.pos++
		return nil
	}
	for {
		if err := fn(); err != nil {
			return err
		}
		switch r.Peek() {
		case ',':
			r.pos++
		case ']':
			r.pos++
			return nil
		default:
			return r.fail("expected ',' or ']' in array")
		}
	}
}

// Bytes reads a string and returns its content. Without escapes it aliases
// the input; with escapes it is a new, unescaped slice. A null reads as nil.
// Bytes that are not valid UTF-8 pass through unchanged (encoding/json would
// substitute U+FFFD): callers that keep text must sanitise it.
func (r *Reader) Bytes() ([]byte, error) {
	if r.Null() {
		return nil, nil
	}
	if r.Peek() != '"' {
		return nil, r.fail("expected string")
	}
	start := r.pos + 1
	end, escaped, err := r.stringEnd(start)
	if err != nil {
		return nil, err
	}
	r.pos = end + 1
	if !escaped {
		return r.buf[start:end], nil
	}
	return r.unescape(start, end)
}

// HexBytes reads a string that the caller decodes as hex, checking every
// byte, and returns its content (aliasing the input); a null reads as nil.
// It finds the closing quote with bytes.IndexByte (vectorised) and skips
// Bytes' checks for escapes and control characters, which such a caller
// makes anyway: no hex digit is a backslash or a control character, so a
// string holding one fails its decoding (an escaped quote ends the content
// early, at a backslash). Call inputs, outputs and log data are most of a
// block's bytes, so checking them twice would be a large share of ingest's
// work.
func (r *Reader) HexBytes() ([]byte, error) {
	if r.Null() {
		return nil, nil
	}
	if r.Peek() != '"' {
		return nil, r.fail("expected string")
	}
	start := r.pos + 1
	q := bytes.IndexByte(r.buf[start:], '"')
	if q < 0 {
		r.pos = len(r.buf)
		return nil, r.fail("unterminated string")
	}
	r.pos = start + q + 1
	return r.buf[start : start+q], nil
}

// stringEnd finds the closing quote of a string whose content starts at
// start, and whether the string has escapes. On an error r.pos is the
// offending byte.
func (r *Reader) stringEnd(start int) (end int, escaped bool, err error) {
	buf := r.buf
	for i := start; ; {
		i += plainRun(buf, i)
		if i >= len(buf) {
			r.pos = len(buf)
			return 0, false, r.fail("unterminated string")
		}
		switch c := buf[i]; {
		case c == '"':
			return i, escaped, nil
		case c == '\\':
			escaped = true
			i += 2 // the escaped byte cannot end the string
		case c < 0x20:
			r.pos = i
			return 0, false, r.fail("control character in string")
		default:
			i++
		}
	}
}

// plainRun is how many bytes from buf[i] on are plain string content,
// scanning whole eight-byte words: the bytes before the first quote,
// backslash or control character (or, to save work, space or '!', which
// sort between them) when a word holds one, else every byte of the whole
// words, leaving the caller's byte loop the last few. Strings here are
// mostly long hex (call inputs, outputs, log data), so it tests eight bytes
// at a time with the classic SWAR "has a byte less than n / equal to zero"
// tricks; their lowest flagged byte is exact (false positives only sit
// above a true one), so the first special byte of a word is found without
// a byte loop: object keys and the ends of strings cost one call.
func plainRun(buf []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	j := i
	for ; j+8 <= len(buf); j += 8 {
		x := binary.LittleEndian.Uint64(buf[j:])
		b := x ^ (ones * '\\')
		if m := ((x-ones*('"'+1))&^x | (b-ones)&^b) & highs; m != 0 {
			return j - i + bits.TrailingZeros64(m)/8
		}
	}
	return j - i
}

// String reads a string as a Go string ("" for null).
func (r *Reader) String() (string, error) {
	b, err := r.Bytes()
	return string(b), err
}

func (r *Reader) unescape(start, end int) ([]byte, error) {
	in := r.buf[start:end]
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		c := in[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(in) {
			return nil, &SyntaxError{Offset: start + i, Msg: "bad escape"}
		}
		switch in[i] {
		case '"', '\\', '/':
			out = append(out, in[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			ru, n, ok := hex4(in[i+1:])
			if !ok {
				return nil, &SyntaxError{Offset: start + i, Msg: "bad \\u escape"}
			}
			i += n
			if utf16.IsSurrogate(ru) {
				// A surrogate pair is two escapes; a lone half becomes U+FFFD
				// as in encoding/json.
				if i+2 < len(in) && in[i+1] == '\\' && in[i+2] == 'u' {
					if lo, n2, ok := hex4(in[i+3:]); ok {
						if dec := utf16.DecodeRune(ru, lo); dec != utf8.RuneError {
							ru = dec
							i += 2 + n2
						} else {
							ru = utf8.RuneError
						}
					} else {
						ru = utf8.RuneError
					}
				} else {
					ru = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, ru)
		default:
			return nil, &SyntaxError{Offset: start + i, Msg: "bad escape"}
		}
	}
	return out, nil
}

func hex4(b []byte) (rune, int, bool) {
	if len(b) < 4 {
		return 0, 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	if err != nil {
		return 0, 0, false
	}
	return rune(v), 4, true
}

// Skip consumes the next value of any kind.
func (r *Reader) Skip() error {
	_, err := r.Raw()
	return err
}

// Raw consumes the next value and returns its bytes, aliasing the input.
func (r *Reader) Raw() ([]byte, error) {
	switch c := r.Peek(); c {
	case '"':
		start := r.pos
		if _, err := r.rawString(); err != nil {
			return nil, err
		}
		return r.buf[start:r.pos], nil
	case '{', '[':
		return r.container(true)
	case 0:
		return nil, r.fail("unexpected end of input")
	default:
		start := r.pos
		for r.pos < len(r.buf) {
			switch c := r.buf[r.pos]; {
			case c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r':
				goto done
			case c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' ||
				c >= 'a' && c <= 'z':
				r.pos++
			default:
				return nil, r.fail("unexpected character")
			}
		}
	done:
		lit := r.buf[start:r.pos]
		if len(lit) == 0 {
			return nil, r.fail("expected value")
		}
		if c := lit[0]; c >= 'a' && c <= 'z' {
			if s := string(lit); s != "true" && s != "false" && s != "null" {
				r.pos = start
				return nil, r.fail("bad literal")
			}
		}
		return lit, nil
	}
}

// rawString skips a string starting at r.pos (a quote).
func (r *Reader) rawString() (int, error) {
	end, _, err := r.stringEnd(r.pos + 1)
	if err != nil {
		return 0, err
	}
	r.pos = end + 1
	return end, nil
}

// container skips an object or array by tracking nesting and strings. It
// checks that brackets match; the grammar inside is checked only as far as
// that goes, which is enough to find the end of a value a node sent. With
// checkStrings false (Extent), strings are skipped without checking what is
// inside them.
func (r *Reader) container(checkStrings bool) ([]byte, error) {
	start := r.pos
	var stack [64]byte
	var deep []byte // nesting beyond the stack array
	depth := 0
	for r.pos < len(r.buf) {
		c := r.buf[r.pos]
		if !structural[c] {
			r.pos++
			continue
		}
		switch c {
		case '"':
			var end int
			var err error
			if checkStrings {
				end, _, err = r.stringEnd(r.pos + 1)
			} else {
				end, err = r.skipString(r.pos + 1)
			}
			if err != nil {
				return nil, err
			}
			r.pos = end + 1
			continue
		case '{', '[':
			if depth < len(stack) {
				stack[depth] = c
			} else {
				deep = append(deep, c)
			}
			depth++
		default: // '}' or ']'
			open := byte('{')
			if c == ']' {
				open = '['
			}
			var top byte
			if depth > len(stack) {
				top = deep[depth-1-len(stack)]
			} else if depth > 0 {
				top = stack[depth-1]
			}
			if depth == 0 || top != open {
				return nil, r.fail("mismatched bracket")
			}
			depth--
			if depth >= len(stack) {
				deep = deep[:len(deep)-1]
			}
			if depth == 0 {
				r.pos++
				return r.buf[start:r.pos], nil
			}
		}
		r.pos++
	}
	return nil, r.fail("unterminated container")
}

// structural marks the bytes container stops at.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// Extent consumes the next value and returns its bytes, aliasing the input,
// like Raw, but checks only what finding its end needs: brackets match and
// strings end. What is inside the strings is not checked (control
// characters, escapes), so use it to split a document whose parts are
// parsed, and so checked, afterwards: a JSON-RPC batch answer whose results
// go to their own readers. Strings are skipped with bytes.IndexByte, which
// scans many bytes per instruction: the results are mostly long hex
// strings, and Raw's byte-class checks made the split cost as much as a
// fifth of ingest's CPU.
func (r *Reader) Extent() ([]byte, error) {
	switch r.Peek() {
	case '"':
		start := r.pos
		end, err := r.skipString(r.pos + 1)
		if err != nil {
			return nil, err
		}
		r.pos = end + 1
		return r.buf[start:r.pos], nil
	case '{', '[':
		return r.container(false)
	default:
		return r.Raw()
	}
}

// skipString returns the index of the quote that ends a string whose
// content starts at start: the first quote not escaped, that is, not
// preceded by an odd run of backslashes.
func (r *Reader) skipString(start int) (int, error) {
	for i := start; ; {
		q := bytes.IndexByte(r.buf[i:], '"')
		if q < 0 {
			r.pos = len(r.buf)
			return 0, r.fail("unterminated string")
		}
		q += i
		n := 0
		for j := q - 1; j >= start && r.buf[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return q, nil
		}
		i = q + 1
	}
}
