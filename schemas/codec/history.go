package codec

import "github.com/moraine-data/moraine/schemas/record"

// EncodeTxDetail encodes the detail of a transaction: the entries of
// transactions_by_hash and address_lists (ClickHouse, migrations 8 and 9).
func EncodeTxDetail(d *record.TxDetail) ([]byte, error) { return encode("tx detail", d) }

// DecodeTxDetail decodes a TxDetail of those entries.
func DecodeTxDetail(b []byte) (*record.TxDetail, error) {
	return decode[record.TxDetail]("tx detail", b)
}
