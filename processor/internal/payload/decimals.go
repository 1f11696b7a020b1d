package payload

import (
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/moraine-data/moraine/processor/internal/jcs"
)

// maxFixedDigits is the largest digit count JavaScript's toFixed accepts.
const maxFixedDigits = 100

// ValueWithDecimals renders a raw token amount (decimal string) the way the
// hosted service does: JavaScript's (Number(value) / 10**decimals)
// .toFixed(decimals), float rounding included (CONTRACT.md 5.2: value
// 30576074978046450 with 18 decimals gives "0.030576074978046448"). ok is
// false when value is not a decimal number or decimals is outside 0..100
// (toFixed's range).
func ValueWithDecimals(value string, decimals int) (string, bool) {
	if decimals < 0 || decimals > maxFixedDigits || value == "" || strings.TrimLeft(value, "0123456789") != "" {
		return "", false
	}
	// ParseFloat rounds to the nearest double, as Number() does.
	v, err := strconv.ParseFloat(value, 64)
	if err != nil && !isRange(err) {
		return "", false
	}
	return toFixed(v/math.Pow10(decimals), decimals), true
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// toFixed is ECMAScript Number.prototype.toFixed(f) for a finite x >= 0
// (ECMA-262 21.1.3.3): x >= 1e21 is written as by ToString; otherwise the
// integer n closest to x * 10^f, the larger on a tie (Go's FormatFloat
// rounds ties to even, so it cannot be used), with f digits after the point.
func toFixed(x float64, f int) string {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	if x >= 1e21 {
		b, _ := jcs.AppendNumber(nil, x)
		return string(b)
	}
	r := new(big.Rat).SetFloat64(x) // exact
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(f)), nil)))
	r.Add(r, big.NewRat(1, 2))
	n := new(big.Int).Quo(r.Num(), r.Denom()) // floor(x*10^f + 1/2), x >= 0
	s := n.String()
	if f == 0 {
		return s
	}
	if len(s) <= f {
		s = strings.Repeat("0", f-len(s)+1) + s
	}
	return s[:len(s)-f] + "." + s[len(s)-f:]
}
