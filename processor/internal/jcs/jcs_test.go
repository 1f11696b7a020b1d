package jcs

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRFC8785Examples runs the examples of RFC 8785 section 3.2 (the
// "literals" array without its null, which this encoder refuses by design).
func TestRFC8785Examples(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{
			name: "3.2.2 sample",
			in: `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [true, false]
}`,
			want: `{"literals":[true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		{
			name: "3.2.3 sorting by UTF-16 code units",
			in: `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`,
			want: "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
		{
			name: "nested objects, arrays, and the characters encoding/json would escape",
			in:   `{"b":{"z":1,"a":[{"y":"<>&","x":"\u2028\u2029"}]},"a":""}`,
			want: "{\"a\":\"\",\"b\":{\"a\":[{\"x\":\"\u2028\u2029\",\"y\":\"<>&\"}],\"z\":1}}",
		},
		{
			name: "all control characters",
			in:   `"\u0000\u0001\b\t\n\u000b\f\r\u001f\u007f"`,
			want: `"\u0000\u0001\b\t\n\u000b\f\r\u001f` + "\u007f" + `"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Marshal(decode(t, tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestRFC8785Numbers runs the IEEE 754 vectors of RFC 8785 appendix B (the
// same values were checked against Node's JSON.stringify).
func TestRFC8785Numbers(t *testing.T) {
	for _, tc := range []struct{ bits, want string }{
		{"0000000000000000", "0"},
		{"8000000000000000", "0"},
		{"0000000000000001", "5e-324"},
		{"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"},
		{"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"},
		{"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"44b52d02c7e14af5", "9.999999999999997e+22"},
		{"44b52d02c7e14af6", "1e+23"},
		{"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"},
		{"444b1ae4d6e2ef4f", "999999999999999900000"},
		{"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
		{"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"},
		{"41b3de4355555554", "333333333.33333325"},
		{"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"},
		{"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"},
		{"43143ff3c1cb0959", "1424953923781206.2"},
	} {
		b, _ := hex.DecodeString(tc.bits)
		f := math.Float64frombits(binary.BigEndian.Uint64(b))
		got, err := AppendNumber(nil, f)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: got %s (%v), want %s", tc.bits, got, err, tc.want)
		}
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := AppendNumber(nil, bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestRefusesNullAndUnknown(t *testing.T) {
	for name, v := range map[string]any{
		"nil":            nil,
		"nested nil":     map[string]any{"a": []any{1, nil}},
		"nil map":        map[string]any(nil),
		"nil in objects": []map[string]any{nil},
		"pointer":        new(int),
		"bad utf-8":      "\xff",
		"big uint":       uint64(1<<53 + 1),
		"big int":        int64(-(1<<53 + 1)),
	} {
		if b, err := Marshal(v); err == nil {
			t.Errorf("%s: got %s, want an error", name, b)
		}
	}
	_, err := Marshal(map[string]any{"x": map[string]any{"y": nil}})
	if !errors.Is(err, ErrNull) {
		t.Fatalf("err = %v, want ErrNull", err)
	}
}

func TestTypedValues(t *testing.T) {
	got, err := Marshal(map[string]any{
		"i": 1, "i64": int64(-2), "u32": uint32(3), "u64": uint64(1 << 53), "b": false,
		"objs": []map[string]any{{"k": "v"}}, "strs": []string{"a", "b"}, "empty": []any{},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"b":false,"empty":[],"i":1,"i64":-2,"objs":[{"k":"v"}],"strs":["a","b"],"u32":3,"u64":9007199254740992}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func BenchmarkMarshal(b *testing.B) {
	v := map[string]any{"webhookId": "3718a368-f4d7-4bab-a790-6eda1b0e6d07", "event": map[string]any{
		"transaction": map[string]any{"blockNumber": "47689400", "transactionIndex": 0, "erc20Transfers": []any{}},
	}}
	for b.Loop() {
		if _, err := Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}
