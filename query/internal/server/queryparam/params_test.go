package queryparam

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNumber(t *testing.T) {
	for in, want := range map[string]float64{
		"10": 10, " 7 ": 7, "": 0, "1e2": 100, "1.5": 1.5, "-3": -3, "0x10": 16, "0b11": 3, "Infinity": math.Inf(1),
	} {
		require.Equal(t, want, Number(in), in)
	}
	for _, in := range []string{"abc", "inf", "NaN", "1_0", "0x", "0xg", "1e", "--1", "10px"} {
		require.True(t, math.IsNaN(Number(in)), in)
	}
}

func TestInt(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want []string
	}{
		{"5", nil},
		{"1e1", nil},
		{"0", []string{"pageSize must not be less than 1"}},
		{"101", []string{"pageSize must not be greater than 100"}},
		{"1.5", []string{"pageSize must be an integer number"}},
		{"x", []string{"pageSize must not be greater than 100", "pageSize must not be less than 1", "pageSize must be an integer number"}},
	} {
		_, got, ok := Int("pageSize", tc.raw, 1, 100)
		require.Equal(t, tc.want, got, tc.raw)
		require.Equal(t, tc.want == nil, ok, tc.raw)
	}
}
