package evm

import "testing"

func TestListedInternal(t *testing.T) {
	for _, tc := range []struct {
		depth      uint32
		typ, value string
		want       bool
	}{
		{0, "CALL", "5", false}, // the transaction itself
		{1, "CALL", "5", true},
		{1, "CALL", "0", false},
		{1, "CALLCODE", "7", true},
		{2, "DELEGATECALL", "5", false},
		{2, "STATICCALL", "0", false},
		{1, "CREATE", "0", true},
		{3, "CREATE2", "0", true},
		{1, "SELFDESTRUCT", "9", false},
		{1, "CALL", "", false},
	} {
		if got := ListedInternal(tc.depth, tc.typ, tc.value); got != tc.want {
			t.Errorf("ListedInternal(%d, %s, %q) = %v", tc.depth, tc.typ, tc.value, got)
		}
	}
}

func TestReverts(t *testing.T) {
	// call_0 ok; call_0_0 fails with its child call_0_0_0 (ok by itself);
	// call_0_1 ok with child call_0_1_0 ok; then a failing root in a new
	// transaction reverts all.
	frames := []struct {
		depth uint32
		err   string
		want  bool
	}{
		{0, "", false},
		{1, "execution reverted", true},
		{2, "", true},
		{3, "", true},
		{1, "", false},
		{2, "", false},
		{2, "out of gas", true},
		{1, "", false},
	}
	var r Reverts
	for i, f := range frames {
		if got := r.Next(f.depth, f.err); got != f.want {
			t.Errorf("frame %d: reverted %v, want %v", i, got, f.want)
		}
	}
	var failed Reverts
	if !failed.Next(0, "execution reverted") || !failed.Next(1, "") || !failed.Next(2, "") || !failed.Next(1, "") {
		t.Error("frames under a failed root must all be reverted")
	}
}
