package api

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
)

var (
	decimalChainID = regexp.MustCompile(`^[0-9]{1,20}$`)
	base58ChainID  = regexp.MustCompile(`^[1-9A-HJ-NP-Za-km-z]{40,60}$`)
	decimalBlock   = regexp.MustCompile(`^[0-9]+$`)
	hashBlock      = regexp.MustCompile(`^0[xX][0-9a-fA-F]{64}$`)
)

// Enum values of the query parameters (OpenAPI Network and ApiFeature).
var (
	networks = []string{"mainnet", "fuji", "testnet"}
	features = []string{"nftIndexing", "webhooks", "teleporter"}
)

// params collects validation failures in the order NestJS's ValidationPipe
// reports them, so a request with several bad parameters gets them all.
type params struct {
	c    *gin.Context
	errs []string
}

// valid reports whether every parameter checked so far passed; if not, it
// writes the 400 that lists them all.
func (p *params) valid() bool {
	if p.errs != nil {
		apierr.Write(p.c, apierr.Validation(p.errs...))
		return false
	}
	return true
}

func (p *params) fail(format string, args ...any) {
	p.errs = append(p.errs, fmt.Sprintf(format, args...))
}

// chainID checks the form of the chainId path parameter: a decimal EVM chain
// id or a base58 blockchain id. Whether it is configured is checked later
// (404), after every parameter is validated.
func (p *params) chainID() string {
	id := p.c.Param("chainId")
	if !decimalChainID.MatchString(id) && !base58ChainID.MatchString(id) {
		p.fail("chainId must be a decimal EVM chain id or a base58 blockchain id")
	}
	return id
}

// blockID is a decimal block number or a 0x-prefixed 32-byte hash.
type blockID struct {
	byHash bool
	number uint64
	hash   store.Hash
}

func (b blockID) String() string {
	if b.byHash {
		return b.hash.Hex()
	}
	return strconv.FormatUint(b.number, 10)
}

func (p *params) blockID() blockID {
	raw := p.c.Param("blockId")
	switch {
	case hashBlock.MatchString(raw):
		h, _ := store.ParseHash(raw)
		return blockID{byHash: true, hash: h}
	case decimalBlock.MatchString(raw):
		n, err := strconv.ParseUint(raw, 10, 64)
		if err != nil {
			// Beyond 2^64-1: no chain numbers blocks that high, and the
			// number cannot be echoed in a 404 without changing it.
			p.fail("blockId must be a block number no greater than 18446744073709551615 or a 0x-prefixed 32-byte block hash")
			return blockID{}
		}
		return blockID{number: n}
	}
	p.fail("blockId must be a decimal block number or a 0x-prefixed 32-byte block hash")
	return blockID{}
}

// pageSize reads an integer query parameter the way class-validator does
// after NestJS turns the string into a Number: @Max, @Min and @IsInt each
// report their own failure.
func (p *params) pageSize(name string, minV, maxV, def int) int {
	raw, ok := p.c.GetQuery(name)
	if !ok {
		return def
	}
	v := jsNumber(raw)
	failed := false
	if !(v <= float64(maxV)) {
		p.fail("%s must not be greater than %d", name, maxV)
		failed = true
	}
	if !(v >= float64(minV)) {
		p.fail("%s must not be less than %d", name, minV)
		failed = true
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v != math.Trunc(v) {
		p.fail("%s must be an integer number", name)
		failed = true
	}
	if failed {
		return def
	}
	return int(v)
}

// enum reads an optional enum query parameter.
func (p *params) enum(name string, values []string) string {
	raw, ok := p.c.GetQuery(name)
	if !ok {
		return ""
	}
	for _, v := range values {
		if raw == v {
			return raw
		}
	}
	p.fail("%s must be one of the following values: %s", name, strings.Join(values, ", "))
	return ""
}

// pageToken returns the pageToken query parameter ("" for the first page).
func (p *params) pageToken() string { return p.c.Query("pageToken") }

// jsNumber converts like JavaScript's Number(string): surrounding white
// space is ignored, "" is 0, decimal and exponent forms, 0x/0o/0b integers
// and Infinity parse, anything else is NaN.
func jsNumber(s string) float64 {
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
