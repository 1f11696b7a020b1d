// Package codec is the single place where records are turned into Kafka
// record values and back. Values are protobuf (see proto/moraine/v1); every
// record carries a "schema" header naming its message type so that a consumer
// can reject what it does not understand instead of misreading it.
package codec

import (
	"fmt"

	"github.com/moraine-data/moraine/schemas/record"
)

// SchemaHeader is the Kafka header that names a record's message type.
const SchemaHeader = "schema"

// ChainEventSchema is the SchemaHeader value of blocks-topic records.
const ChainEventSchema = "moraine.v1.ChainEvent"

// EncodeChainEvent encodes e deterministically: the same event always gives
// the same bytes (golden files rely on this).
//
// Encoding and decoding use the methods protoc-gen-go-vtproto generates
// next to the record types (make generate): unrolled code per field instead
// of the protobuf runtime's table walk, about twice as fast on block records
// (BenchmarkEncode/Decode here), which ingest encodes and the processor
// decodes by the hundred per second. The records have no map fields, so the
// bytes are those of proto.Marshal with Deterministic set, field by field in
// number order; the golden files check it.
func EncodeChainEvent(e *record.ChainEvent) ([]byte, error) { return encode("chain event", e) }

// DecodeChainEvent decodes a blocks-topic value. The event aliases b: its
// bytes and strings point into b instead of being copied (every hash,
// address, input and output of a block, most of what a block allocates
// when copied). So b must not change
// while the event is in use, and keeping the event keeps b: copy what is
// kept longer than the record, as the processor's sink and matcher (which
// hold events for one batch) need not.
func DecodeChainEvent(b []byte) (*record.ChainEvent, error) {
	e := new(record.ChainEvent)
	if err := e.UnmarshalVTUnsafe(b); err != nil {
		return nil, fmt.Errorf("decode chain event: %w", err)
	}
	if e.GetEvent() == nil {
		return nil, fmt.Errorf("decode chain event: empty event")
	}
	return e, nil
}

// encode and decode are what every record's Encode and Decode share: the
// vtproto methods, and errors that name the record (what). Checks of a
// record's own required fields stay in its functions.
func encode(what string, m interface{ MarshalVT() ([]byte, error) }) ([]byte, error) {
	b, err := m.MarshalVT()
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", what, err)
	}
	return b, nil
}

func decode[T any, P interface {
	*T
	UnmarshalVT([]byte) error
}](what string, b []byte) (P, error) {
	m := P(new(T))
	if err := m.UnmarshalVT(b); err != nil {
		return nil, fmt.Errorf("decode %s: %w", what, err)
	}
	return m, nil
}
