package codec

import "github.com/moraine-data/moraine/schemas/record"

// EncodeTxDetail encodes the detail of a transaction for
// transaction_lookup.detail (ClickHouse, migration 6).
func EncodeTxDetail(d *record.TxDetail) ([]byte, error) { return encode("tx detail", d) }

// DecodeTxDetail decodes a transaction_lookup.detail value.
func DecodeTxDetail(b []byte) (*record.TxDetail, error) {
	return decode[record.TxDetail]("tx detail", b)
}
