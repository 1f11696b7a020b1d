// Package queryparam reads query parameters as the hosted service (NestJS's
// ValidationPipe on Express) does: numbers as JavaScript's Number() reads
// them, and the failures in class-validator's words, so that every route
// family answers a bad parameter with the same 400.
package queryparam

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Number converts like JavaScript's Number(string): surrounding white
// space is ignored, "" is 0, decimal and exponent forms, 0x/0o/0b integers
// and Infinity parse, anything else is NaN.
func Number(s string) float64 {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0
	}
	switch s {
	case "Infinity", "+Infinity":
		return math.Inf(1)
	case "-Infinity":
		return math.Inf(-1)
	}
	if len(s) > 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			n, err := strconv.ParseUint(s[2:], base, 64)
			if err != nil || strings.ContainsAny(s[2:], "_+-") {
				return math.NaN()
			}
			return float64(n)
		}
	}
	// Reject what Go accepts and JavaScript does not (inf, nan, hex
	// floats, underscores).
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r == '.' || r == 'e' || r == 'E' || r == '+' || r == '-') {
			return math.NaN()
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// Int reads raw as an integer parameter name with bounds [minV, maxV]:
// Number() of it, then class-validator's @Max, @Min and @IsInt, each
// reporting its own failure. ok is false when any failed.
func Int(name, raw string, minV, maxV float64) (v float64, failures []string, ok bool) {
	v = Number(raw)
	if !(v <= maxV) {
		failures = append(failures, fmt.Sprintf("%s must not be greater than %s", name, strconv.FormatFloat(maxV, 'f', -1, 64)))
	}
	if !(v >= minV) {
		failures = append(failures, fmt.Sprintf("%s must not be less than %s", name, strconv.FormatFloat(minV, 'f', -1, 64)))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v != math.Trunc(v) {
		failures = append(failures, name+" must be an integer number")
	}
	return v, failures, failures == nil
}
