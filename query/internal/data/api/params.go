package api

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
	"github.com/moraine-data/moraine/query/internal/server/queryparam"
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

// names reports whether b is the block id names: a block at a hash's
// number no longer carries the hash once a reorg replaced it (block_hashes
// keeps the orphaned hash, and its number, for the chain's history).
func (id blockID) names(b store.Block) bool {
	return !id.byHash || b.Hash == id.hash
}

func (id blockID) String() string {
	if id.byHash {
		return id.hash.Hex()
	}
	return strconv.FormatUint(id.number, 10)
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
	v, failures, valid := queryparam.Int(name, raw, float64(minV), float64(maxV))
	if !valid {
		p.errs = append(p.errs, failures...)
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
