package codec

import (
	"fmt"

	"github.com/moraine-data/moraine/schemas/record"
)

// APIRequestSchema is the SchemaHeader value of API-requests records.
const APIRequestSchema = "moraine.v1.ApiRequest"

// EncodeAPIRequest encodes one answered request.
func EncodeAPIRequest(r *record.ApiRequest) ([]byte, error) { return encode("api request", r) }

// DecodeAPIRequest decodes an API-requests value.
func DecodeAPIRequest(b []byte) (*record.ApiRequest, error) {
	r, err := decode[record.ApiRequest]("api request", b)
	if err != nil {
		return nil, err
	}
	if len(r.Id) != 16 || r.At == 0 {
		return nil, fmt.Errorf("decode api request: a 16-byte id and a time are required")
	}
	return r, nil
}

// OperationTaskSchema is the SchemaHeader value of operations records.
const OperationTaskSchema = "moraine.v1.OperationTask"

// EncodeOperationTask encodes a task.
func EncodeOperationTask(t *record.OperationTask) ([]byte, error) { return encode("operation task", t) }

// DecodeOperationTask decodes an operations value.
func DecodeOperationTask(b []byte) (*record.OperationTask, error) {
	t, err := decode[record.OperationTask]("operation task", b)
	if err != nil {
		return nil, err
	}
	if t.OperationId == "" {
		return nil, fmt.Errorf("decode operation task: operation id is required")
	}
	return t, nil
}
