package server

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/moraine-data/moraine/query/internal/server/openapi"
)

// Route is one route of the API, declared once by the package that serves
// it: the router registers it (and HEAD for a GET), the middleware reads its
// weight and access rule (RouteOf), the OpenAPI document describes it.
type Route struct {
	// Method is GET, POST, PATCH or DELETE.
	Method string
	// Path is the OpenAPI path: "/v1/chains/{chainId}/blocks". A colon after
	// the last "/" is literal (AIP-136 custom methods such as
	// "/v1/webhooks:getSharedSecret").
	Path string
	// Operation is the operationId: the hosted spec's, or moraine's own when
	// Extension is set.
	Operation string
	// Weight is what a request costs in compute units.
	Weight Weight
	// Access says who may call it.
	Access Access
	// Extension documents a route the hosted API does not have; nil for a
	// hosted operation, which the document copies from the hosted spec.
	Extension *openapi.Extension
	// ExtraParameters documents query parameters moraine adds to a hosted
	// operation (a JSON array of OpenAPI parameter objects; "" for none),
	// such as blockNumber on listErc721Balances.
	ExtraParameters string
	// Properties are moraine's extension properties of the hosted schemas
	// a hosted operation takes or returns (openapi.Operation.Properties).
	Properties string
	Handler    gin.HandlerFunc

	// template is Template's answer, kept by the server for the routes it
	// serves: every request's metrics, access log and usage record name
	// their route by it.
	template string
}

// Weight is a route's cost in compute units (CONTRACT.md section 7.1).
type Weight int64

// The x-execution-weight values of the spec.
const (
	WeightFree   Weight = 1
	WeightSmall  Weight = 10
	WeightMedium Weight = 20
	WeightLarge  Weight = 50
	WeightXL     Weight = 100
	WeightXXL    Weight = 200
)

// weightNames are the spec's names of the weights (x-execution-weight).
var weightNames = map[Weight]string{
	WeightFree: "free", WeightSmall: "small", WeightMedium: "medium",
	WeightLarge: "large", WeightXL: "xl", WeightXXL: "xxl",
}

// String is the spec's name of the weight ("medium").
func (w Weight) String() string { return weightNames[w] }

// Access is who may call a route.
type Access uint8

const (
	// Public routes serve keyless requests at the unauthenticated tier.
	Public Access = iota
	// Account routes need a valid API key: a request without one is
	// answered 401 before it is charged.
	Account
)

// Unmatched is the route of a request no route matches: a public route of
// the lowest weight, so an unknown path is charged and answered like any
// other request (rate-limit headers included) before its 404.
var Unmatched = Route{Weight: WeightFree, Access: Public}

const routeKey = "moraine.server.route"

// RouteOf returns the route that matched the request (Unmatched when none
// did).
func RouteOf(c *gin.Context) Route {
	if v, ok := c.Get(routeKey); ok {
		return *v.(*Route)
	}
	return Unmatched
}

// ginPath is the route's path in gin's syntax: "{x}" becomes ":x" and a
// literal colon is escaped ("\:"), which gin (>= 1.10) matches as is. A
// custom method after a parameter ("/tokens/{tokenId}:reindex") cannot be
// told apart from the parameter by gin's tree, which ends a parameter at the
// next "/" only: the path then ends in the parameter and suffix is the part
// its value must end with (":reindex"), checked by the server's dispatch.
func (r Route) ginPath() (path, param, suffix string) {
	segs := strings.Split(r.Path, "/")
	for i, seg := range segs {
		name, method, custom := strings.Cut(seg, ":")
		p, isParam := strings.CutPrefix(name, "{")
		p, closed := strings.CutSuffix(p, "}")
		isParam = isParam && closed
		switch {
		case isParam && custom:
			segs[i], param, suffix = ":"+p, p, ":"+method
		case isParam:
			segs[i] = ":" + p
		case custom:
			segs[i] = name + `\:` + method
		}
	}
	return strings.Join(segs, "/"), param, suffix
}

// Template is the route as metrics and logs label it: the gin template
// without the escape of literal colons ("/v1/chains/:chainId/blocks",
// "/v1/webhooks:getSharedSecret").
func (r Route) Template() string {
	if r.template != "" {
		return r.template
	}
	path, _, suffix := r.ginPath()
	return strings.ReplaceAll(path, `\`, "") + suffix
}

// Key names the route in errors and tests: "GET /v1/chains".
func (r Route) Key() string { return r.Method + " " + r.Path }

// methods are those a route may declare; HEAD comes with GET.
var methods = map[string]bool{http.MethodGet: true, http.MethodPost: true, http.MethodPatch: true, http.MethodDelete: true, http.MethodPut: true}
