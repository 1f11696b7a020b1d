package ratelimit

import (
	"net/http"
	"strings"
)

// Compute-unit weights of the spec's x-execution-weight values.
const (
	WeightFree   = 1
	WeightSmall  = 10
	WeightMedium = 20
	WeightLarge  = 50
	WeightXL     = 100
	WeightXXL    = 200
)

// DefaultWeight is charged for a /v1 route missing from the table.
const DefaultWeight = WeightSmall

type routeWeight struct {
	method string
	segs   []string // "*" matches one path segment
	weight int64
}

// weights is CONTRACT.md section 7.1's table. Literal routes come before the
// parameterised siblings they would otherwise match (/v1/chains/allBlocks
// before /v1/chains/{chainId}).
var weights = parseWeights([]struct {
	method, path string
	weight       int64
}{
	{http.MethodGet, "/v1/chains", WeightFree},
	{http.MethodGet, "/v1/chains/allBlocks", WeightFree},
	{http.MethodGet, "/v1/chains/allTransactions", WeightFree},
	{http.MethodGet, "/v1/chains/address/*", WeightFree},
	{http.MethodGet, "/v1/chains/*", WeightFree},
	{http.MethodGet, "/v1/chains/*/blocks", WeightSmall},
	{http.MethodGet, "/v1/chains/*/blocks/*", WeightSmall},
	{http.MethodGet, "/v1/chains/*/blocks/*/transactions", WeightMedium},
	{http.MethodGet, "/v1/blocks", WeightMedium},
	// EVM transactions, address history and contracts. /v1/transactions has
	// no weight in the spec: priced like its twin /v1/blocks;
	// /v1/address/{address}/chains like its deprecated twin (free);
	// getContractMetadata, which asks the chain's node, medium.
	{http.MethodGet, "/v1/transactions", WeightMedium},
	{http.MethodGet, "/v1/address/*/chains", WeightFree},
	{http.MethodGet, "/v1/chains/*/transactions", WeightMedium},
	{http.MethodGet, "/v1/chains/*/transactions/*", WeightMedium},
	{http.MethodGet, "/v1/chains/*/addresses/*", WeightMedium},
	{http.MethodGet, "/v1/chains/*/addresses/*/transactions", WeightMedium},
	{http.MethodGet, "/v1/chains/*/addresses/*/transactions:listNative", WeightMedium},
	{http.MethodGet, "/v1/chains/*/addresses/*/transactions:listErc20", WeightMedium},
	{http.MethodGet, "/v1/chains/*/addresses/*/transactions:listErc721", WeightMedium},
	{http.MethodGet, "/v1/chains/*/addresses/*/transactions:listErc1155", WeightMedium},
	{http.MethodGet, "/v1/chains/*/addresses/*/transactions:listInternals", WeightMedium},
	{http.MethodGet, "/v1/chains/*/tokens/*/transfers", WeightMedium},
	{http.MethodGet, "/v1/chains/*/contracts/*/transactions:getDeployment", WeightMedium},
	{http.MethodGet, "/v1/chains/*/contracts/*/deployments", WeightMedium},
	{http.MethodPost, "/v1/webhooks", WeightMedium},
	{http.MethodGet, "/v1/webhooks", WeightSmall},
	{http.MethodPost, "/v1/webhooks:generateOrRotateSharedSecret", WeightMedium},
	{http.MethodGet, "/v1/webhooks:getSharedSecret", WeightSmall},
	{http.MethodGet, "/v1/webhooks/*", WeightSmall},
	{http.MethodPatch, "/v1/webhooks/*", WeightMedium},
	{http.MethodDelete, "/v1/webhooks/*", WeightMedium},
	{http.MethodPatch, "/v1/webhooks/*/addresses", WeightMedium},
	{http.MethodDelete, "/v1/webhooks/*/addresses", WeightMedium},
	{http.MethodGet, "/v1/webhooks/*/addresses", WeightMedium},
	// moraine extension: the delivery log (priced like a list).
	{http.MethodGet, "/v1/webhooks/*/deliveries", WeightSmall},
})

func parseWeights(in []struct {
	method, path string
	weight       int64
}) []routeWeight {
	out := make([]routeWeight, len(in))
	for i, w := range in {
		out[i] = routeWeight{method: w.method, segs: strings.Split(strings.Trim(w.path, "/"), "/"), weight: w.weight}
	}
	return out
}

// Weight returns the compute-unit cost of a request by method and path
// (CONTRACT.md section 7.1); DefaultWeight for anything not in the table.
// HEAD costs what GET costs.
func Weight(method, path string) int64 {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	segs := strings.Split(strings.Trim(path, "/"), "/")
next:
	for _, w := range weights {
		if w.method != method || len(w.segs) != len(segs) {
			continue
		}
		for i, s := range w.segs {
			if s != "*" && s != segs[i] {
				continue next
			}
		}
		return w.weight
	}
	return DefaultWeight
}
