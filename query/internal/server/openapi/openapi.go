// Package openapi builds the OpenAPI document the query service serves at
// /api-json from its route table: the hosted Data API's operations that
// moraine serves, copied from the hosted spec with the schemas they
// reference and nothing else, and moraine's own extensions (marked
// x-moraine-extension), so the document never advertises an operation that
// is not served and lists every one that is.
//
// The hosted spec is the as-served copy of 2026-01
// (glacier_openapi_2026-01.json.zst, embedded; the same bytes as
// shared/spec's copy, which a test checks). Where moraine serves less than a
// hosted operation the document says so: the webhook operations take and
// return EVM address_activity webhooks only (the hosted oneOf of three kinds
// is narrowed to that one), and routes that need an API key have no
// anonymous alternative in their security; transaction exports take EVM
// requests only. Every operation carries
// x-execution-weight: what moraine charges for it.
package openapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/klauspost/compress/zstd"
)

//go:embed glacier_openapi_2026-01.json.zst
var hostedSpec []byte

// Operation is what the document needs to know of one route.
type Operation struct {
	// Method is the HTTP method, upper case.
	Method string
	// Path is the OpenAPI path ("/v1/chains/{chainId}").
	Path string
	// ID is the operationId.
	ID string
	// Weight is the spec's name of its compute-unit weight ("medium").
	Weight string
	// KeyRequired: the route answers 401 without an API key.
	KeyRequired bool
	// Extension describes an operation the hosted spec does not have.
	Extension *Extension
	// ExtraParameters are query parameters moraine adds to the operation,
	// a JSON array of OpenAPI parameter objects ("" for none); each is
	// marked x-moraine-extension.
	ExtraParameters string
	// Properties are moraine's extension properties of hosted schemas that
	// a hosted operation takes or returns, as a JSON object: schema name ->
	// {property name: property schema}. Each is added to the schema marked
	// x-moraine-extension; a name the hosted schema has is an error.
	Properties string
}

// Extension documents one of moraine's own operations.
type Extension struct {
	// Like is a hosted operationId whose parameters, request body, tags and
	// responses the operation starts from ("" for none).
	Like string
	// Operation is the OpenAPI operation object as JSON (summary,
	// description, parameters, requestBody, responses, ...); its keys
	// replace Like's, except responses, which are merged status by status
	// (a status set to null is removed).
	Operation string
	// Schemas are moraine's own component schemas, a JSON object, that the
	// operation refers to; their names must not clash with hosted ones.
	Schemas string
}

// EVM address_activity, the one webhook kind moraine serves, and EVM
// transaction exports, the one export kind.
const (
	evmRequest  = "#/components/schemas/EVMAddressActivityRequest"
	evmResponse = "#/components/schemas/EVMAddressActivityResponse"
	evmExport   = "#/components/schemas/CreateEvmTransactionExportRequest"
)

// Build returns the document of ops.
func Build(ops []Operation) ([]byte, error) {
	doc, err := hosted()
	if err != nil {
		return nil, err
	}
	paths, _ := doc["paths"].(map[string]any)
	comps, _ := doc["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	byID := map[string]map[string]any{}
	for _, item := range paths {
		for _, op := range item.(map[string]any) {
			if o, ok := op.(map[string]any); ok {
				if id, ok := o["operationId"].(string); ok {
					byID[id] = o
				}
			}
		}
	}

	outPaths := map[string]any{}
	tags := map[string]bool{}
	webhooks := false
	for _, o := range ops {
		op, err := operation(o, paths, byID, schemas)
		if err != nil {
			return nil, fmt.Errorf("openapi: %s %s: %w", o.Method, o.Path, err)
		}
		if err := addParameters(op, o.ExtraParameters); err != nil {
			return nil, fmt.Errorf("openapi: %s %s: %w", o.Method, o.Path, err)
		}
		narrowToEVM(op)
		op["x-execution-weight"] = o.Weight
		if o.KeyRequired {
			op["security"] = []any{map[string]any{"apiKey": []any{}}}
		}
		item, _ := outPaths[o.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			outPaths[o.Path] = item
		}
		m := strings.ToLower(o.Method)
		if _, dup := item[m]; dup {
			return nil, fmt.Errorf("openapi: %s %s is declared twice", o.Method, o.Path)
		}
		item[m] = op
		for _, t := range asSlice(op["tags"]) {
			tags[fmt.Sprint(t)] = true
		}
		webhooks = webhooks || o.ID == "createWebhook"
	}
	// ListWebhooksResponse's items too: one kind.
	narrowToEVM(schemas)
	for _, o := range ops {
		if err := addProperties(o, schemas); err != nil {
			return nil, fmt.Errorf("openapi: %s %s: %w", o.Method, o.Path, err)
		}
	}

	result := map[string]any{
		"openapi": doc["openapi"],
		"servers": []any{map[string]any{"url": "/"}},
		"paths":   outPaths,
	}
	// The payload moraine POSTs to webhook URLs, as the hosted spec
	// describes it (OpenAPI 3.1 webhooks), when the webhook routes are served.
	if hooks, ok := doc["webhooks"].(map[string]any); ok && webhooks {
		result["webhooks"] = map[string]any{"address_activity": hooks["address_activity"]}
	}
	keep := reachable(result, schemas)
	outSchemas := map[string]any{}
	for n := range keep {
		s, ok := schemas[n]
		if !ok {
			return nil, fmt.Errorf("openapi: schema %s is referenced but missing", n)
		}
		outSchemas[n] = s
	}
	outComps := map[string]any{"schemas": outSchemas}
	if sec, ok := comps["securitySchemes"]; ok {
		outComps["securitySchemes"] = sec
	}
	result["components"] = outComps
	var outTags []any
	for _, t := range asSlice(doc["tags"]) {
		if m, ok := t.(map[string]any); ok && tags[fmt.Sprint(m["name"])] {
			outTags = append(outTags, t)
		}
	}
	result["tags"] = outTags
	info, _ := doc["info"].(map[string]any)
	info["description"] = "The subset of the Avalanche Data API (Glacier) that this moraine deployment serves, " +
		"and the Webhooks API for EVM address_activity webhooks, plus moraine's extensions (marked x-moraine-extension). " +
		"Wire-compatible with the hosted API, so its SDKs work unchanged (point them at this server)."
	result["info"] = info
	result["security"] = doc["security"]

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(result); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return buf.Bytes(), nil
}

// hosted decodes the embedded hosted spec (a fresh copy on every call:
// Build edits it).
func hosted() (map[string]any, error) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	raw, err := dec.DecodeAll(hostedSpec, nil)
	if err != nil {
		return nil, fmt.Errorf("openapi: hosted spec: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("openapi: hosted spec: %w", err)
	}
	// The as-served copy wraps the document in swaggerDoc.
	if inner, ok := doc["swaggerDoc"].(map[string]any); ok {
		doc = inner
	}
	return doc, nil
}

// HostedWeights returns the x-execution-weight of every hosted operation
// that has one, by operationId.
func HostedWeights() (map[string]string, error) {
	doc, err := hosted()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, item := range doc["paths"].(map[string]any) {
		for _, op := range item.(map[string]any) {
			o, ok := op.(map[string]any)
			if !ok {
				continue
			}
			if w, ok := o["x-execution-weight"].(string); ok {
				out[fmt.Sprint(o["operationId"])] = w
			}
		}
	}
	return out, nil
}

// operation returns the document's operation object for o.
func operation(o Operation, paths map[string]any, byID map[string]map[string]any, schemas map[string]any) (map[string]any, error) {
	if o.Extension == nil {
		item, _ := paths[o.Path].(map[string]any)
		op, _ := item[strings.ToLower(o.Method)].(map[string]any)
		if op == nil || op["operationId"] != o.ID {
			return nil, fmt.Errorf("operation %s is not in the hosted spec at this path and method (an extension needs an Extension)", o.ID)
		}
		return op, nil
	}
	if _, hosted := byID[o.ID]; hosted {
		return nil, fmt.Errorf("extension %s has a hosted operation's id", o.ID)
	}
	x := o.Extension
	op := map[string]any{}
	if x.Like != "" {
		like, ok := byID[x.Like]
		if !ok {
			return nil, fmt.Errorf("extension %s is like %s, which the hosted spec does not have", o.ID, x.Like)
		}
		op = deepCopy(like)
		for k := range op {
			// The SDK generator's annotations belong to the hosted operation.
			if strings.HasPrefix(k, "x-speakeasy-") && k != "x-speakeasy-pagination" {
				delete(op, k)
			}
		}
	}
	var own map[string]any
	if err := json.Unmarshal([]byte(x.Operation), &own); err != nil {
		return nil, fmt.Errorf("extension %s: operation: %w", o.ID, err)
	}
	for k, v := range own {
		if k == "responses" {
			resp, _ := op["responses"].(map[string]any)
			if resp == nil {
				resp = map[string]any{}
			}
			maps.Copy(resp, v.(map[string]any))
			// A status set to null is one the extension does not answer
			// with (a 202 where the like operation answers 200).
			maps.DeleteFunc(resp, func(_ string, r any) bool { return r == nil })
			op["responses"] = resp
			continue
		}
		op[k] = v
	}
	if x.Schemas != "" {
		var add map[string]any
		if err := json.Unmarshal([]byte(x.Schemas), &add); err != nil {
			return nil, fmt.Errorf("extension %s: schemas: %w", o.ID, err)
		}
		for n, s := range add {
			if old, clash := schemas[n]; clash && !equalJSON(old, s) {
				return nil, fmt.Errorf("extension %s: schema %s clashes with another of that name", o.ID, n)
			}
			schemas[n] = s
		}
	}
	op["operationId"] = o.ID
	op["x-moraine-extension"] = true
	return op, nil
}

// addParameters appends the extra parameters (a JSON array) to op's,
// marked as moraine's; a name the operation has already is an error.
func addParameters(op map[string]any, extra string) error {
	if extra == "" {
		return nil
	}
	var add []map[string]any
	if err := json.Unmarshal([]byte(extra), &add); err != nil {
		return fmt.Errorf("extra parameters: %w", err)
	}
	params := asSlice(op["parameters"])
	for _, p := range add {
		for _, old := range params {
			if m, ok := old.(map[string]any); ok && m["name"] == p["name"] && m["in"] == p["in"] {
				return fmt.Errorf("extra parameter %v is the operation's already", p["name"])
			}
		}
		p["x-moraine-extension"] = true
		params = append(params, p)
	}
	op["parameters"] = params
	return nil
}

// addProperties adds o's extension properties to the hosted schemas they
// name. Two operations may add the same property to a schema they share
// (a request and a response schema of several routes) only identically.
func addProperties(o Operation, schemas map[string]any) error {
	if o.Properties == "" {
		return nil
	}
	var add map[string]map[string]map[string]any
	if err := json.Unmarshal([]byte(o.Properties), &add); err != nil {
		return fmt.Errorf("extension properties: %w", err)
	}
	for name, props := range add {
		schema, ok := schemas[name].(map[string]any)
		if !ok {
			return fmt.Errorf("extension properties: no schema %s", name)
		}
		have, _ := schema["properties"].(map[string]any)
		if have == nil {
			have = map[string]any{}
			schema["properties"] = have
		}
		for p, ps := range props {
			ps["x-moraine-extension"] = true
			if old, clash := have[p]; clash && !equalJSON(old, ps) {
				return fmt.Errorf("extension property %s.%s: the schema has it already", name, p)
			}
			have[p] = ps
		}
	}
	return nil
}

// reachable names every schema that v refers to, directly or through other
// schemas.
func reachable(v any, schemas map[string]any) map[string]bool {
	keep := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok {
				name := strings.TrimPrefix(ref, "#/components/schemas/")
				if !keep[name] {
					keep[name] = true
					walk(schemas[name])
				}
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return keep
}

// narrowToEVM replaces, anywhere in v, a oneOf of webhook kinds that
// includes the EVM address_activity request or response (or of export
// requests that includes the EVM one) by that one schema: moraine neither
// accepts nor returns the other kinds (a create of another eventType, an
// export of another type, is a 400), so the document says so.
func narrowToEVM(v any) {
	switch x := v.(type) {
	case map[string]any:
		if alts, ok := x["oneOf"].([]any); ok {
			for _, a := range alts {
				if m, ok := a.(map[string]any); ok && (m["$ref"] == evmRequest || m["$ref"] == evmResponse || m["$ref"] == evmExport) {
					delete(x, "oneOf")
					x["$ref"] = m["$ref"]
					return
				}
			}
		}
		for _, e := range x {
			narrowToEVM(e)
		}
	case []any:
		for _, e := range x {
			narrowToEVM(e)
		}
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func deepCopy(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
