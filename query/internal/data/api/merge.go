package api

import (
	"github.com/gin-gonic/gin"
)

// The merged lists (GET /v1/blocks, GET /v1/transactions) serve the newest
// rows of every configured chain of a network in one order. Their page
// token holds one position per chain; each page reads pageSize+1 rows from
// every position and serves a prefix of each chain's rows, so a chain's
// next position is exact and no chain skips or repeats a row.

// firstPositions returns a merged list's positions for its first page: one
// per configured chain of network that has an indexed head, made by at from
// the chain's id and head block. When the heads cannot be read it answers
// the error and returns false.
func firstPositions[P any](h *handlers, c *gin.Context, network uint8, at func(chainID, head uint64) P) ([]P, bool) {
	heads, found := h.indexedHeads(c)
	if !found {
		return nil, false
	}
	var positions []P
	for _, ch := range h.chains.list {
		if head := heads[ch.ID()]; matchesNetwork(ch, network) && head.Exists {
			positions = append(positions, at(ch.ID(), head.Number))
		}
	}
	return positions, true
}

// tokenChainsValid reports whether every chain a merged list's token holds
// a position for is configured and in network: a token serves only the
// list it came from.
func tokenChainsValid[P any](h *handlers, network uint8, positions []P, chainID func(P) uint64) bool {
	for _, pos := range positions {
		ch, found := h.chains.find(u64(chainID(pos)))
		if !found || !matchesNetwork(ch, network) {
			return false
		}
	}
	return true
}

// mergeNewest serves up to size rows of perChain (each chain's rows in
// merge order) in merge order: it repeatedly takes the chain whose next row
// comes first by before. used[i] is how many rows chain i served. stalled
// (nil for never) reports whether chain i, all of its rows served, ends the
// page: its next row is not known yet, and serving later rows of other
// chains first would break the order.
func mergeNewest[T any](perChain [][]T, size int, before func(a, b T) bool, stalled func(i int) bool) (served []T, used []int) {
	served = make([]T, 0, size)
	used = make([]int, len(perChain))
	for len(served) < size {
		best := -1
		for i, rows := range perChain {
			if used[i] == len(rows) {
				if stalled != nil && stalled(i) {
					return served, used
				}
				continue
			}
			if best < 0 || before(rows[used[i]], perChain[best][used[best]]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		served = append(served, perChain[best][used[best]])
		used[best]++
	}
	return served, used
}
