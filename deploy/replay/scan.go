package replay

import (
	"bytes"
	"errors"
	"fmt"
)

// A small JSON scanner that finds the spans of values without decoding them,
// so that recorded values can be served byte for byte.

var errTruncated = errors.New("truncated JSON")

func skipWS(d []byte, i int) int {
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

// skipString returns the index just past the string that starts at d[i] == '"'.
func skipString(d []byte, i int) (int, error) {
	i++
	for {
		j := bytes.IndexByte(d[i:], '"')
		if j < 0 {
			return 0, errTruncated
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

// skipValue returns the index just past the JSON value that starts at d[i].
func skipValue(d []byte, i int) (int, error) {
	if i >= len(d) {
		return 0, errTruncated
	}
	switch d[i] {
	case '"':
		return skipString(d, i)
	case '{', '[':
		depth := 0
		for i < len(d) {
			switch d[i] {
			case '"':
				j, err := skipString(d, i)
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
		return 0, errTruncated
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

// eachField calls fn for every member of the JSON object obj with the key
// (without quotes, not unescaped), the raw key (with quotes) and the raw value.
func eachField(obj []byte, fn func(key, rawKey, val []byte) error) error {
	i := skipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errors.New("not a JSON object")
	}
	i = skipWS(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return fmt.Errorf("expected a key at offset %d", i)
		}
		kEnd, err := skipString(obj, i)
		if err != nil {
			return err
		}
		rawKey := obj[i:kEnd]
		i = skipWS(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return fmt.Errorf("expected ':' at offset %d", i)
		}
		i = skipWS(obj, i+1)
		vEnd, err := skipValue(obj, i)
		if err != nil {
			return err
		}
		if err := fn(rawKey[1:len(rawKey)-1], rawKey, obj[i:vEnd]); err != nil {
			return err
		}
		i = skipWS(obj, vEnd)
		if i >= len(obj) {
			return errTruncated
		}
		switch obj[i] {
		case ',':
			i = skipWS(obj, i+1)
		case '}':
			return nil
		default:
			return fmt.Errorf("unexpected %q at offset %d", obj[i], i)
		}
	}
}

// eachElement calls fn for every element of the JSON array arr.
func eachElement(arr []byte, fn func(val []byte) error) error {
	i := skipWS(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return errors.New("not a JSON array")
	}
	i = skipWS(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return nil
	}
	for {
		vEnd, err := skipValue(arr, i)
		if err != nil {
			return err
		}
		if err := fn(arr[i:vEnd]); err != nil {
			return err
		}
		i = skipWS(arr, vEnd)
		if i >= len(arr) {
			return errTruncated
		}
		switch arr[i] {
		case ',':
			i = skipWS(arr, i+1)
		case ']':
			return nil
		default:
			return fmt.Errorf("unexpected %q at offset %d", arr[i], i)
		}
	}
}
