package jsonx

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// walk converts a document to Go values through the Reader, the way the
// converter walks RPC answers, so the result can be compared with
// encoding/json's.
func walk(r *Reader) (any, error) {
	switch r.Peek() {
	case '{':
		m := map[string]any{}
		err := r.Object(func(k []byte) error {
			v, err := walk(r)
			m[string(k)] = v
			return err
		})
		return m, err
	case '[':
		a := []any{}
		err := r.Array(func() error {
			v, err := walk(r)
			a = append(a, v)
			return err
		})
		return a, err
	case '"':
		return r.String()
	default:
		raw, err := r.Raw()
		if err != nil {
			return nil, err
		}
		var v any
		return v, json.Unmarshal(raw, &v)
	}
}

func TestReaderMatchesEncodingJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
	}{
		{"empty object", `{}`},
		{"empty array", `[]`},
		{"rpc answer", `{"jsonrpc":"2.0","id":7,"result":{"number":"0x1","transactions":[],"uncles":[]}}`},
		{"nested with whitespace", " {\n\t\"a\" : [ 1 , 2.5e3 , -3 , true , false , null ] ,\r\n \"b\" : { \"c\" : { } } } "},
		{"escapes", `{"s":"quote \" backslash \\ slash \/ tab \t nl \n \b \f \r"}`},
		{"unicode escapes", `{"s":"caf\u00e9 \u2603 \ud83d\ude00"}`},
		{"lone surrogate becomes U+FFFD", `{"s":"\ud83d x"}`},
		{"utf-8 passes through", `{"s":"Grüße ☃"}`},
		{"revert reason with quotes", `{"revertReason":"it said \"no\""}`},
		{"brackets inside strings", `{"a":"]}{[","b":["}"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want any
			require.NoError(t, json.Unmarshal([]byte(tc.doc), &want))
			r := NewReader([]byte(tc.doc))
			got, err := walk(r)
			require.NoError(t, err)
			require.NoError(t, r.End())
			require.Equal(t, want, got)

			// Raw of the whole document is the document minus outer space.
			r = NewReader([]byte(tc.doc))
			raw, err := r.Raw()
			require.NoError(t, err)
			require.True(t, json.Valid(raw), "%s", raw)
		})
	}
}

func TestReaderRejectsMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
	}{
		{"unterminated object", `{"a":1`},
		{"unterminated string", `{"a":"x`},
		{"missing colon", `{"a" 1}`},
		{"missing comma", `{"a":1 "b":2}`},
		{"mismatched brackets", `{"a":[1}`},
		{"bad escape", `{"a":"\x"}`},
		{"bad unicode escape", `{"a":"\u12"}`},
		{"control character", "{\"a\":\"x\ny\"}"},
		{"bad literal", `{"a":nul}`},
		{"trailing comma", `[1,]`},
		{"truncated", `[`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader([]byte(tc.doc))
			_, err := walk(r)
			if err == nil {
				err = r.End()
			}
			require.Error(t, err)
			var se *SyntaxError
			require.ErrorAs(t, err, &se)
		})
	}
}

func TestNullReadsAsEmpty(t *testing.T) {
	r := NewReader([]byte(`{"a":null,"b":null,"c":null}`))
	calls := 0
	require.NoError(t, r.Object(func(k []byte) error {
		switch string(k) {
		case "a":
			return r.Object(func([]byte) error { calls++; return nil })
		case "b":
			return r.Array(func() error { calls++; return nil })
		default:
			b, err := r.Bytes()
			require.Nil(t, b)
			return err
		}
	}))
	require.Zero(t, calls)
}

func TestBytesAliasesInputWithoutEscapes(t *testing.T) {
	doc := []byte(`"0xabcdef"`)
	b, err := NewReader(doc).Bytes()
	require.NoError(t, err)
	require.Equal(t, "0xabcdef", string(b))
	require.Equal(t, &doc[1], &b[0], "no copy for a plain string")
}

// FuzzReader checks that the reader never panics, accepts every valid
// document, and reads it as encoding/json does.
func FuzzReader(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[1,"x",{"b":null}]}`, `"\u00e9"`, `{"a":"\\\""}`, `[1,]`, `{"a"`, `nul`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		r := NewReader(doc)
		got, err := walk(r)
		if err == nil {
			err = r.End()
		}
		if !json.Valid(doc) || !utf8.Valid(doc) {
			// Any error (or none, for what is not checked) is fine, but no
			// panic. Invalid UTF-8 passes through where encoding/json
			// would substitute U+FFFD: callers sanitise text fields.
			return
		}
		var want any
		if json.Unmarshal(doc, &want) != nil {
			return // valid syntax that Go cannot hold, e.g. 1e1000
		}
		require.NoError(t, err, "%q", doc)
		require.Equal(t, want, got)
	})
}

// TestPlainRun checks the eight-at-a-time scan against a byte loop: it must
// stop exactly at the first byte below 0x23 (control characters, space, '!'
// and the quote) or backslash when a whole word holds it, and otherwise
// accept the whole words, for every byte value at every offset.
func TestPlainRun(t *testing.T) {
	special := func(c byte) bool { return c == '\\' || c <= '"' }
	for _, fill := range []byte{'a', '0', ' ', 0x7f, 0x80, 0xc3, 0xff} {
		for n := 0; n <= 24; n++ {
			for p := 0; p <= n; p++ {
				for c := 0; c < 256; c++ {
					buf := bytes.Repeat([]byte{fill}, n)
					if p < n {
						buf[p] = byte(c)
					}
					for start := 0; start <= min(n, 3); start++ {
						naive := 0
						for start+naive < n && !special(buf[start+naive]) {
							naive++
						}
						want := (n - start) / 8 * 8 // the whole words
						if naive < want {
							want = naive
						}
						if got := plainRun(buf, start); got != want {
							t.Fatalf("plainRun(%q, %d) = %d, want %d", buf, start, got, want)
						}
					}
				}
			}
		}
	}
}

// TestStringAcrossWords reads strings whose escapes, quotes and control
// characters fall at every offset of the eight-byte words.
func TestStringAcrossWords(t *testing.T) {
	for n := 0; n < 20; n++ {
		for p := 0; p < n; p++ {
			for _, c := range []string{`\"`, `\\`, `\u00e9`, "é", "\x1f"} {
				content := strings.Repeat("a", p) + c + strings.Repeat("b", n-p)
				doc := `"` + content + `"`
				got, err := NewReader([]byte(doc)).String()
				var want string
				wantErr := json.Unmarshal([]byte(doc), &want)
				if (err != nil) != (wantErr != nil) || got != want {
					t.Fatalf("String(%q) = %q, %v; encoding/json: %q, %v", doc, got, err, want, wantErr)
				}
			}
		}
	}
}

// extentCases are valid documents for Extent, with what trips a naive
// splitter: escaped quotes after backslash runs, brackets in strings,
// nesting deeper than Extent's fixed stack.
var extentCases = []string{
	`{}`, `[]`, `"x"`, `""`, `7`, `-1.5e3`, `true`, `null`,
	`{"jsonrpc":"2.0","id":7,"result":{"number":"0x1","transactions":[],"uncles":[]}}`,
	`{"s":"quote \" backslash \\ slash \/ tab \t nl \n \b \f \r"}`,
	`{"a":"\\","b":"\\\\","c":"\\\"","d":"x\\\\\"y"}`,
	`"\\"`, `"\"\\"`,
	`{"a":"]}{[","b":["}"]}`,
	" {\n\t\"a\" : [ 1 , 2.5e3 , -3 , true , false , null ] ,\r\n \"b\" : { \"c\" : { } } } ",
	strings.Repeat(`[{"a":`, 70) + `"deep"` + strings.Repeat(`}]`, 70),
}

// TestExtentMatchesRaw: on valid JSON, Extent ends where Raw ends and
// returns the same bytes, followed by more values in an array.
func TestExtentMatchesRaw(t *testing.T) {
	for _, doc := range extentCases {
		for _, d := range []string{doc, "[" + doc + "," + doc + "]"} {
			require.True(t, json.Valid([]byte(d)), "%s", d)
			want, err := NewReader([]byte(d)).Raw()
			require.NoError(t, err)
			r := NewReader([]byte(d))
			got, err := r.Extent()
			require.NoError(t, err, "%s", d)
			require.Equal(t, string(want), string(got))
			require.NoError(t, r.End(), "%s", d)
		}
	}
}

// Extent still reports an unfinished or mismatched document.
func TestExtentRejectsWhatHasNoEnd(t *testing.T) {
	for _, doc := range []string{`{"a":"x`, `{"a":1`, `{"a":[1}`, `"\"`, `[`, `]`, `{"a":"\\\"}`} {
		_, err := NewReader([]byte(doc)).Extent()
		var se *SyntaxError
		require.ErrorAs(t, err, &se, "%q", doc)
	}
}

// FuzzExtent: whatever Raw accepts, Extent accepts with the same end.
func FuzzExtent(f *testing.F) {
	for _, s := range extentCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		want, err := NewReader(doc).Raw()
		if err != nil {
			return
		}
		got, err := NewReader(doc).Extent()
		require.NoError(t, err, "%q", doc)
		require.Equal(t, string(want), string(got), "%q", doc)
	})
}

// HexBytes returns a string's content up to the next quote, aliasing the
// input, null as nil; what is not a string, or has no end, is an error; an
// escaped quote ends the content at its backslash (which no hex decoder
// accepts), and the reader goes on after the string it read.
func TestHexBytes(t *testing.T) {
	r := NewReader([]byte(`["0xdeadbeef", "", null, "0x12\"34", 5, "0xab`))
	var got []string
	err := r.Array(func() error {
		b, err := r.HexBytes()
		if err != nil {
			return err
		}
		if b == nil {
			got = append(got, "<nil>")
		} else {
			got = append(got, string(b))
		}
		if string(b) == `0x12\` {
			// The rest of the escaped string: skip it as the converter's
			// failing block would.
			r.pos += len(`34"`)
		}
		return nil
	})
	require.Error(t, err, "a number is not a string")
	require.Equal(t, []string{"0xdeadbeef", "", "<nil>", `0x12\`}, got)

	in := []byte(`"0xabc"`)
	b, err := NewReader(in).HexBytes()
	require.NoError(t, err)
	require.Same(t, &in[1], &b[0], "aliases the input")
	_, err = NewReader([]byte(`"0xab`)).HexBytes()
	require.Error(t, err, "unterminated")
}
