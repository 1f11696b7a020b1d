// Package jsonscan finds the spans of JSON values without decoding them, so
// that recorded values can be served, or rewritten, byte for byte. It trusts
// its input to be JSON: it checks structure (brackets, quotes, separators),
// not the insides of strings and numbers.
package jsonscan

import (
	"bytes"
	"errors"
	"fmt"
)

// ErrTruncated is returned when the input ends inside a value.
var ErrTruncated = errors.New("truncated JSON")

// SkipWS returns the index of the first non-space byte of d at or after i.
func SkipWS(d []byte, i int) int {
	for i < len(d) {
		switch d[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// SkipString returns the index just past the string that starts at d[i] == '"'.
func SkipString(d []byte, i int) (int, error) {
	i++
	for {
		j := bytes.IndexByte(d[i:], '"')
		if j < 0 {
			return 0, ErrTruncated
		}
		end := i + j
		// The quote is escaped when an odd number of backslashes precede it.
		bs := 0
		for k := end - 1; k >= i && d[k] == '\\'; k-- {
			bs++
		}
		if bs%2 == 0 {
			return end + 1, nil
		}
		i = end + 1
	}
}

// SkipValue returns the index just past the JSON value that starts at d[i].
func SkipValue(d []byte, i int) (int, error) {
	if i >= len(d) {
		return 0, ErrTruncated
	}
	switch d[i] {
	case '"':
		return SkipString(d, i)
	case '{', '[':
		depth := 0
		for i < len(d) {
			switch d[i] {
			case '"':
				j, err := SkipString(d, i)
				if err != nil {
					return 0, err
				}
				i = j
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, ErrTruncated
	default:
		j := i
		for j < len(d) {
			c := d[j]
			if c == ',' || c == ']' || c == '}' || c == ':' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				break
			}
			j++
		}
		if j == i {
			return 0, fmt.Errorf("unexpected %q at offset %d", d[i], i)
		}
		return j, nil
	}
}

// EachField calls fn for every member of the JSON object obj with the key
// (without quotes, not unescaped), the raw key (with quotes) and the raw value.
func EachField(obj []byte, fn func(key, rawKey, val []byte) error) error {
	i := SkipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errors.New("not a JSON object")
	}
	i = SkipWS(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return fmt.Errorf("expected a key at offset %d", i)
		}
		kEnd, err := SkipString(obj, i)
		if err != nil {
			return err
		}
		rawKey := obj[i:kEnd]
		i = SkipWS(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return fmt.Errorf("expected ':' at offset %d", i)
		}
		i = SkipWS(obj, i+1)
		vEnd, err := SkipValue(obj, i)
		if err != nil {
			return err
		}
		if err := fn(rawKey[1:len(rawKey)-1], rawKey, obj[i:vEnd]); err != nil {
			return err
		}
		i = SkipWS(obj, vEnd)
		if i >= len(obj) {
			return ErrTruncated
		}
		switch obj[i] {
		case ',':
			i = SkipWS(obj, i+1)
		case '}':
			return nil
		default:
			return fmt.Errorf("unexpected %q at offset %d", obj[i], i)
		}
	}
}

// EachElement calls fn for every element of the JSON array arr.
func EachElement(arr []byte, fn func(val []byte) error) error {
	i := SkipWS(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return errors.New("not a JSON array")
	}
	i = SkipWS(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return nil
	}
	for {
		vEnd, err := SkipValue(arr, i)
		if err != nil {
			return err
		}
		if err := fn(arr[i:vEnd]); err != nil {
			return err
		}
		i = SkipWS(arr, vEnd)
		if i >= len(arr) {
			return ErrTruncated
		}
		switch arr[i] {
		case ',':
			i = SkipWS(arr, i+1)
		case ']':
			return nil
		default:
			return fmt.Errorf("unexpected %q at offset %d", arr[i], i)
		}
	}
}
