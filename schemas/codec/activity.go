package codec

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/moraine-data/moraine/schemas/record"
)

// ActivitySchema is the SchemaHeader value of activity-topic records.
const ActivitySchema = "moraine.v1.Activity"

// EncodeActivity encodes an activity message deterministically.
func EncodeActivity(a *record.Activity) ([]byte, error) {
	b, err := marshal.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("encode activity: %w", err)
	}
	return b, nil
}

// DecodeActivity decodes an activity-topic value.
func DecodeActivity(b []byte) (*record.Activity, error) {
	a := new(record.Activity)
	if err := proto.Unmarshal(b, a); err != nil {
		return nil, fmt.Errorf("decode activity: %w", err)
	}
	if a.WebhookId == "" || a.MessageId == "" {
		return nil, fmt.Errorf("decode activity: webhook id and message id are required")
	}
	return a, nil
}
