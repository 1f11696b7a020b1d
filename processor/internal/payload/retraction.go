package payload

import (
	"fmt"
	"strconv"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/processor/internal/jcs"
	"github.com/moraine-data/moraine/schemas/codec"
)

// RetractionEventType is the eventType of a retraction (a moraine
// extension; docs/webhook-stream.md).
const RetractionEventType = "address_activity_retraction"

// Retracted names a delivered message whose block was orphaned.
type Retracted struct {
	WebhookID   string
	MessageID   string
	ChainID     uint64
	BlockNumber uint64
	BlockHash   []byte
	TxHash      []byte
}

// Retraction returns the body of the retraction of r, as RFC 8785 canonical
// JSON, and its messageId (codec.RetractionMessageID):
//
//	{"webhookId", "eventType": "address_activity_retraction", "messageId",
//	 "event": {"retractedMessageId", "reason": "reorg", "chainId",
//	           "blockNumber", "blockHash", "txHash"}}
//
// Numbers are decimal strings as in the activity body (chainId,
// blockNumber); hashes lowercase hex.
func Retraction(r Retracted) (body []byte, messageID string, err error) {
	messageID = codec.RetractionMessageID(r.MessageID, r.BlockHash)
	body, err = jcs.Marshal(map[string]any{
		"webhookId": r.WebhookID,
		"eventType": RetractionEventType,
		"messageId": messageID,
		"event": map[string]any{
			"retractedMessageId": r.MessageID,
			"reason":             "reorg",
			"chainId":            strconv.FormatUint(r.ChainID, 10),
			"blockNumber":        strconv.FormatUint(r.BlockNumber, 10),
			"blockHash":          hash32(r.BlockHash),
			"txHash":             evm.HexBytes(r.TxHash),
		},
	})
	if err != nil {
		return nil, "", fmt.Errorf("payload: retraction of %s: %w", r.MessageID, err)
	}
	return body, messageID, nil
}
