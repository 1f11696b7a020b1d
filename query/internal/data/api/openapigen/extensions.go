package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The webhook kinds moraine serves: EVM address_activity only.
const (
	evmRequest  = "#/components/schemas/EVMAddressActivityRequest"
	evmResponse = "#/components/schemas/EVMAddressActivityResponse"
)

// narrowToEVM replaces, anywhere in v, a oneOf of webhook kinds that
// includes the EVM address_activity request or response by that one
// schema: moraine neither accepts nor returns the other kinds (a create
// of another eventType is a 400), so the document says so.
func narrowToEVM(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if alts, ok := x["oneOf"].([]any); ok {
			for _, a := range alts {
				if m, ok := a.(map[string]any); ok && (m["$ref"] == evmRequest || m["$ref"] == evmResponse) {
					delete(x, "oneOf")
					x["$ref"] = m["$ref"]
					return x
				}
			}
		}
		for k, e := range x {
			x[k] = narrowToEVM(e)
		}
	case []any:
		for i, e := range x {
			x[i] = narrowToEVM(e)
		}
	}
	return v
}

// deliveriesPath is moraine's extension: the delivery log of a webhook.
const deliveriesPath = "/v1/webhooks/{id}/deliveries"

// extensionSchemas are the extension's own schemas; field meanings as in
// query/internal/webhooks/webhookapi (package doc, "Delivery log").
const extensionSchemas = `{
  "WebhookDelivery": {
    "type": "object",
    "description": "One delivery attempt of a webhook message. Attempts that got no HTTP response (network, refused_target, timeout) show the class of failure only: status 0, a fixed error text, and latencyMs 0 (network, refused_target) or the attempt timeout (timeout).",
    "properties": {
      "messageId": {"type": "string", "description": "The message's id (the payload's messageId, the same for every attempt)."},
      "attempt": {"type": "integer", "minimum": 1, "description": "1 for the first attempt."},
      "status": {"type": "integer", "minimum": 0, "description": "The endpoint's HTTP status; 0 without a response."},
      "result": {"type": "string", "enum": ["success", "http_error", "timeout", "network", "refused_target", "inactive"]},
      "latencyMs": {"type": "integer", "minimum": 0},
      "error": {"type": "string", "description": "Why the attempt failed; omitted on success."},
      "attemptedAt": {"type": "integer", "description": "Unix milliseconds."},
      "nextAttemptAt": {"type": "integer", "description": "Unix milliseconds of the next attempt, when one is scheduled."}
    },
    "required": ["messageId", "attempt", "status", "result", "latencyMs", "attemptedAt"]
  },
  "ListWebhookDeliveriesResponse": {
    "type": "object",
    "properties": {
      "deliveries": {"type": "array", "items": {"$ref": "#/components/schemas/WebhookDelivery"}},
      "nextPageToken": {"type": "string", "description": "A token to retrieve the next page; omitted on the last page."}
    },
    "required": ["deliveries"]
  }
}`

// addExtensions adds moraine's own operations and their schemas. The
// deliveries list borrows the hosted getAddressesFromWebhook operation's
// parameters and error responses (same path parameter, same paging).
func addExtensions(outPaths map[string]any, schemas map[string]any, paths map[string]any) error {
	var own map[string]any
	if err := json.Unmarshal([]byte(extensionSchemas), &own); err != nil {
		return fmt.Errorf("extension schemas: %w", err)
	}
	for n, s := range own {
		if _, clash := schemas[n]; clash {
			return fmt.Errorf("extension schema %s is also a hosted schema", n)
		}
		schemas[n] = s
	}
	tmpl, ok := paths["/v1/webhooks/{id}/addresses"].(map[string]any)["get"].(map[string]any)
	if !ok {
		return fmt.Errorf("GET /v1/webhooks/{id}/addresses is not in the spec")
	}
	var op map[string]any
	b, _ := json.Marshal(tmpl)
	_ = json.Unmarshal(b, &op)
	for k := range op {
		if strings.HasPrefix(k, "x-speakeasy-") && k != "x-speakeasy-pagination" {
			delete(op, k)
		}
	}
	op["operationId"] = "listWebhookDeliveries"
	op["summary"] = "List delivery attempts of a webhook"
	op["description"] = "moraine extension (not in the hosted API): the attempts made to deliver one of the caller's webhooks' messages, newest first."
	op["x-moraine-extension"] = true
	op["x-execution-weight"] = "small"
	op["security"] = []any{map[string]any{"apiKey": []any{}}}
	resp := op["responses"].(map[string]any)
	resp["200"] = map[string]any{
		"description": "Successful response",
		"content": map[string]any{"application/json": map[string]any{
			"schema": map[string]any{"$ref": "#/components/schemas/ListWebhookDeliveriesResponse"},
		}},
	}
	outPaths[deliveriesPath] = map[string]any{"get": op}
	return nil
}
