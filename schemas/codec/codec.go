// Package codec is the single place where records are turned into Kafka
// record values and back. Values are protobuf (see proto/moraine/v1); every
// record carries a "schema" header naming its message type so that a consumer
// can reject what it does not understand instead of misreading it.
package codec

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/moraine-data/moraine/schemas/record"
)

// SchemaHeader is the Kafka header that names a record's message type.
const SchemaHeader = "schema"

// ChainEventSchema is the SchemaHeader value of blocks-topic records.
const ChainEventSchema = "moraine.v1.ChainEvent"

var marshal = proto.MarshalOptions{Deterministic: true}

// EncodeChainEvent encodes e deterministically: the same event always gives
// the same bytes (golden files rely on this).
func EncodeChainEvent(e *record.ChainEvent) ([]byte, error) {
	b, err := marshal.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode chain event: %w", err)
	}
	return b, nil
}

// DecodeChainEvent decodes a blocks-topic value.
func DecodeChainEvent(b []byte) (*record.ChainEvent, error) {
	e := new(record.ChainEvent)
	if err := proto.Unmarshal(b, e); err != nil {
		return nil, fmt.Errorf("decode chain event: %w", err)
	}
	if e.GetEvent() == nil {
		return nil, fmt.Errorf("decode chain event: empty event")
	}
	return e, nil
}
