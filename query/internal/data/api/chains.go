package api

import (
	"context"
	"fmt"
	"slices"

	"github.com/gin-gonic/gin"

	"github.com/moraine-data/moraine/pkg/chains"
	"github.com/moraine-data/moraine/query/internal/data/store"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
	"github.com/moraine-data/moraine/query/internal/server/pagetoken"
)

// chainIndex finds configured chains by EVM chain id or blockchain id.
type chainIndex struct {
	list []chains.Chain
	byID map[string]int
}

func newChainIndex(cfg *chains.Config) *chainIndex {
	x := &chainIndex{list: cfg.Chains, byID: map[string]int{}}
	for i, c := range cfg.Chains {
		x.byID[c.EVMChainID] = i
		if c.BlockchainID != "" {
			x.byID[c.BlockchainID] = i
		}
	}
	return x
}

func (x *chainIndex) find(id string) (chains.Chain, bool) {
	i, ok := x.byID[id]
	if !ok {
		return chains.Chain{}, false
	}
	return x.list[i], true
}

// resolve returns the configured chain for a validated chainId parameter.
func (x *chainIndex) resolve(id string) (chains.Chain, error) {
	c, ok := x.find(id)
	if !ok {
		return chains.Chain{}, apierr.NotFound(fmt.Sprintf("Chain %s not found", id))
	}
	return c, nil
}

// resolveChain finds the configured chain id names, or writes the 404 and
// reports false.
func (h *handlers) resolveChain(c *gin.Context, id string) (chains.Chain, bool) {
	ch, err := h.chains.resolve(id)
	if err != nil {
		apierr.Write(c, err)
		return chains.Chain{}, false
	}
	return ch, true
}

// networkCode normalises the network filter: fuji and testnet are one
// value ("Either mainnet or testnet/fuji"); testnet means every chain that
// is not a mainnet chain (isTestnet true), local devnets included.
func networkCode(network string) uint8 {
	switch network {
	case "mainnet":
		return pagetoken.NetworkMainnet
	case "fuji", "testnet":
		return pagetoken.NetworkTestnet
	}
	return pagetoken.NetworkAll
}

func matchesNetwork(c chains.Chain, code uint8) bool {
	switch code {
	case pagetoken.NetworkMainnet:
		return !c.IsTestnet()
	case pagetoken.NetworkTestnet:
		return c.IsTestnet()
	}
	return true
}

// chainStatus is OK unless the heads cannot be read (ClickHouse down) or
// this process has not seen the chain's head advance for ChainStaleAfter.
func (h *handlers) chainStatus(c chains.Chain, heads map[uint64]store.Head, err error) string {
	if err != nil {
		return statusUnavailable
	}
	head, ok := heads[c.ID()]
	if !ok {
		return statusUnavailable
	}
	if h.cfg.ChainStaleAfter > 0 && h.now().Sub(head.AdvancedAt) > h.cfg.ChainStaleAfter {
		return statusUnavailable
	}
	return statusOK
}

// validChain opens a per-chain handler: it answers a request whose
// parameters are invalid (all of them parsed before) or whose chain is not
// configured, and returns false; else it returns the chain.
func (h *handlers) validChain(p *params, id string) (chains.Chain, bool) {
	if !p.valid() {
		return chains.Chain{}, false
	}
	return h.resolveChain(p.c, id)
}

// indexedHeads returns every chain's indexed head, or answers the store's
// error and returns false.
func (h *handlers) indexedHeads(c *gin.Context) (map[uint64]store.Head, bool) {
	heads, err := h.store.Heads(c.Request.Context())
	if err != nil {
		apierr.Write(c, storeError(err, ""))
		return nil, false
	}
	return heads, true
}

// heads reads the heads for the chains' status, within StatusTimeout.
func (h *handlers) heads(ctx context.Context) (map[uint64]store.Head, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.StatusTimeout)
	defer cancel()
	return h.store.Heads(ctx)
}

// listChains: GET /v1/chains?network=&feature=. The list is configuration,
// so it is served even when ClickHouse is down (every status UNAVAILABLE).
func (h *handlers) listChains(c *gin.Context) {
	p := &params{c: c}
	network := p.enum("network", networks)
	feature := p.enum("feature", features)
	if !p.valid() {
		return
	}
	heads, err := h.heads(c.Request.Context())
	out := listChainsResponse{Chains: []chainInfo{}}
	code := networkCode(network)
	for _, ch := range h.chains.list {
		if !matchesNetwork(ch, code) || feature != "" && !slices.Contains(ch.EnabledFeatures(), feature) {
			continue
		}
		out.Chains = append(out.Chains, renderChain(ch, h.chainStatus(ch, heads, err)))
	}
	ok(c, out)
}

// getChain: GET /v1/chains/:chainId.
func (h *handlers) getChain(c *gin.Context) {
	p := &params{c: c}
	id := p.chainID()
	ch, found := h.validChain(p, id)
	if !found {
		return
	}
	heads, herr := h.heads(c.Request.Context())
	ok(c, renderChain(ch, h.chainStatus(ch, heads, herr)))
}
