// Command openapigen writes internal/api/openapi.json: the operations of the
// hosted Data API spec (shared/spec/glacier_openapi_2026-01.json.zst) that
// moraine's query service implements, with the schemas they reference and
// nothing else, so /api-json never advertises an operation moraine does not
// serve, and moraine's own extensions (extensions.go), so it advertises
// every one it does. Run through `go generate ./internal/data/api` from query/.
//
// Where moraine serves less than the hosted operation, the document says
// so: the webhook operations take and return EVM address_activity webhooks
// only (the hosted oneOf of three kinds is narrowed to that one) and need
// an API key (their security has no anonymous alternative).
//
//	go run ./internal/data/api/openapigen -spec ../../shared/spec/glacier_openapi_2026-01.json.zst -out internal/api/openapi.json
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Operations lists the implemented (path, method) pairs. TestOpenAPIMatchesRouter
// keeps it equal to the router.
var operations = map[string][]string{
	"/v1/chains":                                         {"get"},
	"/v1/chains/{chainId}":                               {"get"},
	"/v1/chains/allBlocks":                               {"get"},
	"/v1/chains/{chainId}/blocks":                        {"get"},
	"/v1/chains/{chainId}/blocks/{blockId}":              {"get"},
	"/v1/chains/{chainId}/blocks/{blockId}/transactions": {"get"},
	"/v1/blocks":                                         {"get"},
}

// webhookOperations are the Webhooks API's ten operations
// (internal/webhookapi), kept apart from the data operations above so that
// additions to either list merge cleanly.
var webhookOperations = map[string][]string{
	"/v1/webhooks":                              {"get", "post"},
	"/v1/webhooks/{id}":                         {"get", "patch", "delete"},
	"/v1/webhooks/{id}/addresses":               {"get", "patch", "delete"},
	"/v1/webhooks:generateOrRotateSharedSecret": {"post"},
	"/v1/webhooks:getSharedSecret":              {"get"},
}

func main() {
	spec := flag.String("spec", "../../shared/spec/glacier_openapi_2026-01.json.zst", "hosted spec (zstd JSON; the as-served copy wraps it in swaggerDoc)")
	out := flag.String("out", "internal/api/openapi.json", "output file")
	flag.Parse()
	if err := run(*spec, *out); err != nil {
		fmt.Fprintln(os.Stderr, "openapigen:", err)
		os.Exit(1)
	}
}

func run(specPath, outPath string) error {
	raw, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	if strings.HasSuffix(specPath, ".zst") {
		dec, err := zstd.NewReader(nil)
		if err != nil {
			return err
		}
		if raw, err = dec.DecodeAll(raw, nil); err != nil {
			return err
		}
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	if inner, ok := doc["swaggerDoc"].(map[string]any); ok {
		doc = inner
	}
	paths, _ := doc["paths"].(map[string]any)
	comps, _ := doc["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)

	outPaths := map[string]any{}
	tags := map[string]bool{}
	keepOps := func(ops map[string][]string, edit func(op map[string]any)) error {
		for p, methods := range ops {
			item, ok := paths[p].(map[string]any)
			if !ok {
				return fmt.Errorf("path %s is not in the spec", p)
			}
			o := map[string]any{}
			for _, m := range methods {
				op, ok := item[m].(map[string]any)
				if !ok {
					return fmt.Errorf("%s %s is not in the spec", m, p)
				}
				if edit != nil {
					edit(op)
				}
				o[m] = op
				for _, t := range op["tags"].([]any) {
					tags[t.(string)] = true
				}
			}
			outPaths[p] = o
		}
		return nil
	}
	if err := keepOps(operations, nil); err != nil {
		return err
	}
	// ListWebhooksResponse's items too: one kind.
	narrowToEVM(schemas)
	if err := keepOps(webhookOperations, func(op map[string]any) {
		narrowToEVM(op)
		op["security"] = []any{map[string]any{"apiKey": []any{}}}
	}); err != nil {
		return err
	}
	if err := addExtensions(outPaths, schemas, paths); err != nil {
		return err
	}

	// Keep every schema reachable from the kept operations (the extensions'
	// own schemas are already in schemas).
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
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(outPaths)
	outSchemas := map[string]any{}
	for n := range keep {
		s, ok := schemas[n]
		if !ok {
			return fmt.Errorf("schema %s is referenced but missing", n)
		}
		outSchemas[n] = s
	}
	outComps := map[string]any{"schemas": outSchemas}
	if sec, ok := comps["securitySchemes"]; ok {
		outComps["securitySchemes"] = sec
	}
	var outTags []any
	if all, ok := doc["tags"].([]any); ok {
		for _, t := range all {
			if m, ok := t.(map[string]any); ok && tags[fmt.Sprint(m["name"])] {
				outTags = append(outTags, t)
			}
		}
	}
	info, _ := doc["info"].(map[string]any)
	info["description"] = "The subset of the Avalanche Data API (Glacier) that this moraine deployment serves: EVM chains, blocks, transactions, address history and contract metadata, " +
		"and the Webhooks API for EVM address_activity webhooks, plus moraine's extensions (marked x-moraine-extension). " +
		"Wire-compatible with the hosted API, so its SDKs work unchanged (point them at this server)."
	result := map[string]any{
		"openapi":    doc["openapi"],
		"info":       info,
		"servers":    []any{map[string]any{"url": "/"}},
		"tags":       outTags,
		"paths":      outPaths,
		"components": outComps,
		"security":   doc["security"],
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(result); err != nil {
		return err
	}
	names := make([]string, 0, len(keep))
	for n := range keep {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Printf("openapigen: %d paths, %d schemas: %s\n", len(outPaths), len(names), strings.Join(names, " "))
	return os.WriteFile(outPath, buf.Bytes(), 0o644)
}
