package codec

import (
	"fmt"

	"github.com/moraine-data/moraine/schemas/record"
)

// EncodeTxDetail encodes the detail of a transaction for
// transaction_lookup.detail (ClickHouse, migration 6).
func EncodeTxDetail(d *record.TxDetail) ([]byte, error) {
	b, err := d.MarshalVT()
	if err != nil {
		return nil, fmt.Errorf("encode tx detail: %w", err)
	}
	return b, nil
}

// DecodeTxDetail decodes a transaction_lookup.detail value.
func DecodeTxDetail(b []byte) (*record.TxDetail, error) {
	d := new(record.TxDetail)
	if err := d.UnmarshalVT(b); err != nil {
		return nil, fmt.Errorf("decode tx detail: %w", err)
	}
	return d, nil
}
