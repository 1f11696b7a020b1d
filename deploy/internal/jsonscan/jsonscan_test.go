package jsonscan

import (
	"errors"
	"testing"
)

func TestEachFieldAndElement(t *testing.T) {
	obj := []byte(` { "a" : "x\"}]" , "b":[1, {"c":null}, "]"] ,"d":-1.5e3}`)
	var keys, vals []string
	if err := EachField(obj, func(k, raw, v []byte) error {
		keys = append(keys, string(k)+"|"+string(raw))
		vals = append(vals, string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{`"x\"}]"`, `[1, {"c":null}, "]"]`, `-1.5e3`}
	if len(vals) != 3 || vals[0] != want[0] || vals[1] != want[1] || vals[2] != want[2] || keys[0] != `a|"a"` {
		t.Fatalf("keys %q vals %q", keys, vals)
	}
	var elems []string
	if err := EachElement([]byte(vals[1]), func(v []byte) error { elems = append(elems, string(v)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(elems) != 3 || elems[1] != `{"c":null}` || elems[2] != `"]"` {
		t.Fatalf("elements %q", elems)
	}
	for _, bad := range []string{`{"a":1`, `{"a" 1}`, `[1 2]`, `"x`, `{"a":"\\"}`[:8]} {
		err := EachField([]byte(bad), func(_, _, _ []byte) error { return nil })
		if bad[0] == '[' {
			err = EachElement([]byte(bad), func([]byte) error { return nil })
		}
		if err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if err := EachField([]byte(`{"a":1}`), func(_, _, _ []byte) error { return errStop }); !errors.Is(err, errStop) {
		t.Errorf("callback error not returned: %v", err)
	}
}

var errStop = errors.New("stop")
