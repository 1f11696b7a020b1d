package webhookapi

import "github.com/moraine-data/moraine/query/internal/server/openapi"

// deliveriesDoc documents moraine's extension GET /v1/webhooks/{id}/deliveries
// in /api-json: the hosted getAddressesFromWebhook operation's parameters
// and error responses (same path parameter, same paging), its own body.
// Field meanings as in the package doc ("Delivery log").
var deliveriesDoc = &openapi.Extension{
	Like: "getAddressesFromWebhook",
	Operation: `{
  "summary": "List delivery attempts of a webhook",
  "description": "moraine extension (not in the hosted API): the attempts made to deliver one of the caller's webhooks' messages, newest first.",
  "responses": {"200": {"description": "Successful response",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ListWebhookDeliveriesResponse"}}}}}
}`,
	Schemas: `{
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
}`,
}
