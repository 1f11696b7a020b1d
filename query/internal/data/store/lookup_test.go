package store

import (
	"strings"
	"testing"
)

func TestParseHeader(t *testing.T) {
	h := strings.Repeat("ab", 32)
	p := strings.Repeat("cd", 32)
	for _, tc := range []struct {
		name    string
		header  string
		wantErr bool
		check   func(Block) bool
	}{
		{name: "pre-Granite", header: h + "\t" + p + "\t1600000000\t\t\t\t21000\t8000000\t0\t0\t1\t42",
			check: func(b Block) bool {
				return b.TimestampMs == nil && b.MinDelayExcess == nil && b.BaseFee == "" && b.GasUsed == 21000 &&
					b.TxCount == 1 && b.CumulativeTransactions == 42 && b.Hash[0] == 0xab && b.ParentHash[31] == 0xcd
			}},
		{name: "Granite", header: h + "\t" + p + "\t1760000000\t1760000000123\t7970124\t25000000000\t1\t2\t0\t99\t3\t4",
			check: func(b Block) bool {
				return *b.TimestampMs == 1760000000123 && *b.MinDelayExcess == 7970124 && b.BaseFee == "25000000000" && b.FeesSpent == "99"
			}},
		{name: "too few fields", header: h + "\t" + p, wantErr: true},
		{name: "bad number", header: h + "\t" + p + "\tx\t\t\t\t1\t2\t0\t0\t1\t42", wantErr: true},
		{name: "short hash", header: "ab\t" + p + "\t1\t\t\t\t1\t2\t0\t0\t1\t42", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := parseHeader(43114, 7, tc.header)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && (b.ChainID != 43114 || b.Number != 7 || !tc.check(b)) {
				t.Fatalf("parsed %+v", b)
			}
		})
	}
}
