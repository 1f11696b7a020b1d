package e2e

import (
	"fmt"
	"math/big"
	"strings"
)

func upper(s string) string        { return strings.ToUpper(s) }
func trimAll(s, cut string) string { return strings.ReplaceAll(s, cut, "") }
func lower(s string) string        { return strings.ToLower(s) }
func str(v any) string             { s, _ := v.(string); return s }

// hexToDec turns a 0x quantity into a decimal string ("" stays "").
func hexToDec(s string) string {
	if s == "" {
		return ""
	}
	n, ok := new(big.Int).SetString(strings.TrimPrefix(s, "0x"), 16)
	if !ok {
		panic(fmt.Sprintf("bad hex quantity %q", s))
	}
	return n.String()
}

func hexToBig(s string) *big.Int {
	n, ok := new(big.Int).SetString(strings.TrimPrefix(s, "0x"), 16)
	if !ok {
		return new(big.Int)
	}
	return n
}
