// Package jcs serializes JSON in the canonical form of RFC 8785 (JSON
// Canonicalization Scheme): object members sorted by the UTF-16 code units
// of their names, no insignificant whitespace, strings with the minimal
// ECMAScript escaping, numbers in the ECMAScript Number-to-String form.
//
// Webhook bodies are sent in this form, so the bytes delivery signs are the
// bytes a receiver canonicalizes (CONTRACT.md section 5.4). Go's
// encoding/json is not JCS: it escapes <, > and & and keeps struct field
// order.
//
// The encoder takes a tree of map[string]any, []any, string, bool, integer
// types and float64, and refuses nil anywhere: a webhook payload never
// carries null (the official SDK rejects it), so a nil is a bug to report,
// not a value to write.
package jcs

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrNull is returned for a nil value anywhere in the tree.
var ErrNull = errors.New("jcs: null is not allowed")

// Marshal returns the canonical JSON of v.
func Marshal(v any) ([]byte, error) {
	return Append(make([]byte, 0, 1024), v)
}

// Append appends the canonical JSON of v to dst.
func Append(dst []byte, v any) ([]byte, error) {
	return appendValue(dst, v, "$")
}

func appendValue(dst []byte, v any, path string) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return nil, fmt.Errorf("%w (at %s)", ErrNull, path)
	case string:
		return appendString(dst, x, path)
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return appendInt(dst, x, path)
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint64:
		if x > 1<<53 {
			return nil, fmt.Errorf("jcs: integer %d at %s is not exactly representable as an IEEE 754 double", x, path)
		}
		return strconv.AppendUint(dst, x, 10), nil
	case float64:
		return AppendNumber(dst, x)
	case map[string]any:
		return appendObject(dst, x, path)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendValue(dst, e, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case []map[string]any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			if e == nil {
				return nil, fmt.Errorf("%w (at %s[%d])", ErrNull, path, i)
			}
			var err error
			if dst, err = appendObject(dst, e, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case []string:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendString(dst, e, path); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	}
	return nil, fmt.Errorf("jcs: unsupported type %T at %s", v, path)
}

func appendInt(dst []byte, x int64, path string) ([]byte, error) {
	if x > 1<<53 || x < -(1<<53) {
		return nil, fmt.Errorf("jcs: integer %d at %s is not exactly representable as an IEEE 754 double", x, path)
	}
	return strconv.AppendInt(dst, x, 10), nil
}

func appendObject(dst []byte, m map[string]any, path string) ([]byte, error) {
	if m == nil {
		return nil, fmt.Errorf("%w (at %s)", ErrNull, path)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareUTF16)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendString(dst, k, path); err != nil {
			return nil, err
		}
		dst = append(dst, ':')
		if dst, err = appendValue(dst, m[k], path+"."+k); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// compareUTF16 orders strings by their UTF-16 code units (RFC 8785 3.2.3).
// For the common all-ASCII case that is byte order; it differs from byte
// (code point) order only for characters above U+FFFF against U+E000-U+FFFF.
func compareUTF16(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] >= utf8.RuneSelf || b[i] >= utf8.RuneSelf {
			return slices.Compare(utf16.Encode([]rune(a[i:])), utf16.Encode([]rune(b[i:])))
		}
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return len(a) - len(b)
}

const hexDigits = "0123456789abcdef"

// appendString writes s with the escaping of ECMAScript JSON.stringify:
// \" \\ \b \f \n \r \t, other controls as \u00xx, everything else as is.
func appendString(dst []byte, s, path string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("jcs: string at %s is not valid UTF-8", path)
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), nil
}

// AppendNumber writes f as ECMAScript's Number.prototype.toString does
// (ECMA-262 7.1.12.1, required by RFC 8785 3.2.2.3). NaN and infinities
// are not JSON and are refused.
func AppendNumber(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("jcs: %v is not a JSON number", f)
	}
	if f == 0 { // +0 and -0 alike
		return append(dst, '0'), nil
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// Shortest digits that round-trip, as in the standard: s has k digits
	// and the value is s x 10^(n-k).
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	mant, exp := e, 0
	for i, c := range e {
		if c == 'e' {
			mant = e[:i]
			exp, _ = strconv.Atoi(string(e[i+1:]))
			break
		}
	}
	digits := make([]byte, 0, len(mant))
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	k, n := len(digits), exp+1
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for i := 0; i < n-k; i++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for i := 0; i < -n; i++ {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst, nil
}
