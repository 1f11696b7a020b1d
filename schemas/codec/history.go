package codec

import "github.com/moraine-data/moraine/schemas/record"

// EncodeTxDetail encodes the detail of a transaction: the entries of
// transactions_by_hash and address_lists (ClickHouse, migrations 8 and 9).
func EncodeTxDetail(d *record.TxDetail) ([]byte, error) { return encode("tx detail", d) }

// DecodeTxDetail decodes a TxDetail of those entries.
func DecodeTxDetail(b []byte) (*record.TxDetail, error) {
	return decode[record.TxDetail]("tx detail", b)
}

// EncodeAccessList encodes a transaction's access list for the ClickHouse
// transactions.access_list column (migration 14): nil for an empty list,
// stored as ”.
func EncodeAccessList(tuples []*record.AccessTuple) ([]byte, error) {
	if len(tuples) == 0 {
		return nil, nil
	}
	return encode("access list", &record.AccessList{Tuples: tuples})
}

// DecodeAccessList decodes that column; ” is an empty list.
func DecodeAccessList(b []byte) ([]*record.AccessTuple, error) {
	if len(b) == 0 {
		return nil, nil
	}
	l, err := decode[record.AccessList]("access list", b)
	if err != nil {
		return nil, err
	}
	return l.GetTuples(), nil
}

// EncodeBlockTxList encodes the entry of a block's block_transactions row
// (ClickHouse, migration 18).
func EncodeBlockTxList(l *record.BlockTxList) ([]byte, error) { return encode("block tx list", l) }

// DecodeBlockTxList decodes that entry.
func DecodeBlockTxList(b []byte) (*record.BlockTxList, error) {
	return decode[record.BlockTxList]("block tx list", b)
}
