package webhookapi

import "github.com/moraine-data/moraine/query/internal/server/openapi"

// The replay routes in /api-json (moraine extensions, docs/webhook-stream.md
// "Replay"): each starts from a hosted webhook operation for the path
// parameter, the error responses and the security, with its own body and
// answer.

const replaySchemas = `{
  "ReplayWebhookRequest": {
    "type": "object",
    "description": "A block range or a time range of the chain's indexed history to replay. Give fromBlock (and optionally toBlock) or fromTimestamp (and optionally toTimestamp); the end defaults to the newest indexed block less the webhook's confirmations. The range must lie within what is indexed and be no longer than the plan's replayBlocks; a 400 says which bound it breaks.",
    "properties": {
      "fromBlock": {"type": "integer", "minimum": 0, "description": "The first block to replay."},
      "toBlock": {"type": "integer", "minimum": 0, "description": "The last block to replay (inclusive)."},
      "fromTimestamp": {"type": "integer", "minimum": 0, "description": "Unix seconds: the replay starts at the first block at or after it."},
      "toTimestamp": {"type": "integer", "minimum": 0, "description": "Unix seconds: the replay ends at the last block at or before it."}
    }
  },
  "ReplayMessages": {
    "type": "object",
    "properties": {
      "retransmitted": {"type": "integer", "minimum": 0, "description": "Messages the webhook's stream had carried, sent again with their sequence number and messageId."},
      "renumbered": {"type": "integer", "minimum": 0, "description": "Activity the stream never carried (blocks before the webhook, or transactions only its addresses and filters of now match), sent with new sequence numbers."},
      "delivered": {"type": "integer", "minimum": 0, "description": "Replayed messages the endpoint accepted (2xx)."},
      "failed": {"type": "integer", "minimum": 0, "description": "Replayed messages that failed every attempt."}
    },
    "required": ["retransmitted", "renumbered", "delivered", "failed"]
  },
  "ReplayResponse": {
    "type": "object",
    "description": "A replay job: its range, progress and result.",
    "properties": {
      "replayId": {"type": "string", "description": "The replay's id, sent as the moraine-replay header of its messages."},
      "webhookId": {"type": "string"},
      "chainId": {"type": "string"},
      "fromBlock": {"type": "integer", "minimum": 0},
      "toBlock": {"type": "integer", "minimum": 0},
      "fromTimestamp": {"type": "integer", "minimum": 0, "description": "The time range asked for, when one was."},
      "toTimestamp": {"type": "integer", "minimum": 0},
      "status": {"type": "string", "enum": ["queued", "waiting", "running", "done", "cancelled", "failed"],
        "description": "queued: not started; waiting: for the live stream to pass the range; running; done, cancelled or failed (see error)."},
      "nextBlock": {"type": "integer", "minimum": 0, "description": "Progress: every block before it is replayed."},
      "messages": {"$ref": "#/components/schemas/ReplayMessages"},
      "messagesPerSecond": {"type": "integer", "minimum": 0, "description": "The pace of the replay (the plan's replayMessagesPerSecond)."},
      "cancelRequested": {"type": "boolean"},
      "error": {"type": "string", "description": "Why a failed replay failed."},
      "createdAt": {"type": "integer", "description": "Unix milliseconds."},
      "startedAt": {"type": "integer", "description": "Unix milliseconds."},
      "updatedAt": {"type": "integer", "description": "Unix milliseconds of the last progress report."}
    },
    "required": ["replayId", "webhookId", "chainId", "fromBlock", "toBlock", "status", "nextBlock", "messages", "messagesPerSecond", "cancelRequested", "createdAt"]
  },
  "ListWebhookReplaysResponse": {
    "type": "object",
    "properties": {"replays": {"type": "array", "items": {"$ref": "#/components/schemas/ReplayResponse"}}},
    "required": ["replays"]
  }
}`

// replayAnswer is a response of a ReplayResponse.
func replayAnswer(description string) string {
	return `{"description": "` + description + `", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ReplayResponse"}}}}`
}

const (
	idParam = `{"name": "id", "required": true, "in": "path", "description": "The webhook identifier.",
    "example": "f33de69c-d13b-4691-908f-870d6e2e6b04", "schema": {"type": "string"}}`
	replayIDParam = `{"name": "replayId", "required": true, "in": "path", "description": "The replay identifier.",
    "example": "5b0f7a6e-3c2d-4e1f-8a9b-0c1d2e3f4a5b", "schema": {"type": "string"}}`
	conflict = `{"description": "A replay of this webhook has not ended yet: one runs per webhook at a time.",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/BadRequest"}}}}`
)

var replayDoc = &openapi.Extension{
	Like: "updateWebhook",
	Operation: `{
  "summary": "Replay a webhook's activity from the indexed history",
  "description": "moraine extension (not in the hosted API): re-derives the webhook's messages of a block or time range from the indexed tables and delivers them, signed as usual and marked with the moraine-replay header. Every message the webhook's stream carried for those blocks is sent again with its sequence number, messageId and bytes (a receiver that lost messages recovers them with no gap); activity its addresses and filters of now match that the stream never carried gets new sequence numbers. The replay runs as a job (GET /v1/webhooks/{id}/replays/{replayId}), one per webhook at a time, paced at the plan's replayMessagesPerSecond, and never delays live deliveries (docs/webhook-stream.md).",
  "parameters": [` + idParam + `],
  "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ReplayWebhookRequest"}}}},
  "responses": {"200": null, "202": ` + replayAnswer("The replay job, queued") + `, "409": ` + conflict + `}
}`,
	Schemas: replaySchemas,
}

var listReplaysDoc = &openapi.Extension{
	Like: "getWebhook",
	Operation: `{
  "summary": "List a webhook's replays",
  "description": "moraine extension (not in the hosted API): the webhook's newest replays, newest first, with their progress and result.",
  "parameters": [` + idParam + `],
  "responses": {"200": {"description": "Successful response",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ListWebhookReplaysResponse"}}}}}
}`,
	Schemas: replaySchemas,
}

var getReplayDoc = &openapi.Extension{
	Like: "getWebhook",
	Operation: `{
  "summary": "Get a webhook replay",
  "description": "moraine extension (not in the hosted API): one replay's range, progress and result.",
  "parameters": [` + idParam + `, ` + replayIDParam + `],
  "responses": {"200": ` + replayAnswer("Successful response") + `}
}`,
	Schemas: replaySchemas,
}

var cancelReplayDoc = &openapi.Extension{
	Like: "getWebhook",
	Operation: `{
  "summary": "Cancel a webhook replay",
  "description": "moraine extension (not in the hosted API): stops the replay after the chunk it is on (every message of a chunk already numbered is still delivered). A replay that has ended is a 400.",
  "parameters": [` + idParam + `, ` + replayIDParam + `],
  "responses": {"200": ` + replayAnswer("The replay, its cancellation requested") + `}
}`,
	Schemas: replaySchemas,
}

// createDoc documents the create route's extension properties:
// confirmations, fromBlock and the replayId of its answer.
var createDoc = `{"EVMAddressActivityRequest": {"confirmations": ` + confirmationsProperty + `, "fromBlock": {"type": "integer", "minimum": 0, ` +
	`"description": "moraine extension: starts the webhook in the past. Its activity from this block to the newest indexed block is ` +
	`replayed (as POST /v1/webhooks/{id}:replay would), numbered from 1 in block order; the answer's replayId names the replay. ` +
	`The same bounds as a replay's apply (a 400 says which)."}}, ` +
	`"EVMAddressActivityResponse": {"confirmations": ` + confirmationsProperty + `, "replayId": {"type": "string", ` +
	`"description": "moraine extension: the replay a create with fromBlock started (only on that answer)."}}}`
