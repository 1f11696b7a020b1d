package verify

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/moraine-data/moraine/pkg/jsonx"
)

// signedTx reads one transaction of eth_getBlockByNumber(n, true) into a
// go-ethereum transaction, for its consensus encoding. The legacy,
// access-list and dynamic-fee types (nearly every transaction) are read
// here, field by field with go-ethereum's own text decoders, and checked
// for the fields Transaction.UnmarshalJSON requires; other types go through
// Transaction.UnmarshalJSON itself. The result is the same transaction:
// reading the JSON by reflection was most of verification's CPU.
func signedTx(elem []byte) (*types.Transaction, error) {
	var f txFields
	if err := f.read(elem); err != nil {
		return nil, err
	}
	switch f.typ {
	case types.LegacyTxType, types.AccessListTxType, types.DynamicFeeTxType:
		inner, err := f.txData()
		if err != nil {
			return nil, err
		}
		return types.NewTx(inner), nil
	}
	if i := bytes.Index(elem, emptyTo); i >= 0 {
		// Some exporters write a contract creation's "to" as "" where
		// nodes write null (copied: elem is the node's answer).
		elem = append(append(elem[:i:i], nullTo...), elem[i+len(emptyTo):]...)
	}
	tx := new(types.Transaction)
	if err := tx.UnmarshalJSON(elem); err != nil {
		return nil, err
	}
	return tx, nil
}

var emptyTo, nullTo = []byte(`"to":""`), []byte(`"to":null`)

// txFields are the fields of the three types read here, as Transaction's
// JSON names them; nil is absent (or null).
type txFields struct {
	typ                                            uint8
	chainID, gasPrice, tip, feeCap, value, v, r, s *big.Int
	nonce, gas, yParity                            *uint64
	to                                             *common.Address
	input                                          []byte
	hasInput                                       bool
	accessList                                     types.AccessList
}

func (f *txFields) read(elem []byte) error {
	rd := jsonx.NewReader(elem)
	return rd.Object(func(k []byte) error {
		key := string(k)
		switch key {
		case "type":
			n, err := quantity(rd, key)
			if err != nil || n == nil {
				return err
			}
			if *n > 0xff {
				return fmt.Errorf("type %d is not a transaction type", *n)
			}
			f.typ = uint8(*n)
			return nil
		case "nonce", "gas", "yParity":
			n, err := quantity(rd, key)
			switch key {
			case "nonce":
				f.nonce = n
			case "gas":
				f.gas = n
			default:
				f.yParity = n
			}
			return err
		case "chainId", "gasPrice", "maxPriorityFeePerGas", "maxFeePerGas", "value", "v", "r", "s":
			n, err := bigQuantity(rd, key)
			*f.bigField(key) = n
			return err
		case "to":
			b, err := rd.Bytes()
			if err != nil || len(b) == 0 {
				return err // null, or "" as some exporters write a creation's
			}
			var a common.Address
			if err := a.UnmarshalText(b); err != nil {
				return fmt.Errorf("to: %w", err)
			}
			f.to = &a
			return nil
		case "input":
			b, err := rd.HexBytes()
			if err != nil || b == nil {
				return err
			}
			var h hexutil.Bytes
			if err := h.UnmarshalText(b); err != nil {
				return fmt.Errorf("input: %w", err)
			}
			f.input, f.hasInput = h, true
			return nil
		case "accessList":
			f.accessList = types.AccessList{}
			return rd.Array(func() error {
				var t types.AccessTuple
				err := rd.Object(func(k []byte) error {
					switch string(k) {
					case "address":
						b, err := rd.Bytes()
						if err != nil {
							return err
						}
						return t.Address.UnmarshalText(b)
					case "storageKeys":
						t.StorageKeys = []common.Hash{}
						return rd.Array(func() error {
							b, err := rd.Bytes()
							if err != nil {
								return err
							}
							var h common.Hash
							err = h.UnmarshalText(b)
							t.StorageKeys = append(t.StorageKeys, h)
							return err
						})
					}
					return rd.Skip()
				})
				f.accessList = append(f.accessList, t)
				if err != nil {
					return fmt.Errorf("accessList: %w", err)
				}
				return nil
			})
		}
		return rd.Skip()
	})
}

// bigField is where the 256-bit field named key goes.
func (f *txFields) bigField(key string) **big.Int {
	switch key {
	case "chainId":
		return &f.chainID
	case "gasPrice":
		return &f.gasPrice
	case "maxPriorityFeePerGas":
		return &f.tip
	case "maxFeePerGas":
		return &f.feeCap
	case "value":
		return &f.value
	case "v":
		return &f.v
	case "r":
		return &f.r
	default:
		return &f.s
	}
}

// quantity reads a hex quantity of up to 64 bits (null: nil).
func quantity(rd *jsonx.Reader, field string) (*uint64, error) {
	b, err := rd.Bytes()
	if err != nil || b == nil {
		return nil, err
	}
	var n hexutil.Uint64
	if err := n.UnmarshalText(b); err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	v := uint64(n)
	return &v, nil
}

// bigQuantity reads a hex quantity of up to 256 bits (null: nil).
func bigQuantity(rd *jsonx.Reader, field string) (*big.Int, error) {
	b, err := rd.Bytes()
	if err != nil || b == nil {
		return nil, err
	}
	var n hexutil.Big
	if err := n.UnmarshalText(b); err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return (*big.Int)(&n), nil
}

// txData is the transaction of f's type, with the checks of
// Transaction.UnmarshalJSON for a missing field or a yParity that is not v.
func (f *txFields) txData() (types.TxData, error) {
	var missing []string
	need := func(ok bool, name string) {
		if !ok {
			missing = append(missing, name)
		}
	}
	need(f.nonce != nil, "nonce")
	need(f.gas != nil, "gas")
	need(f.value != nil, "value")
	need(f.hasInput, "input")
	need(f.r != nil, "r")
	need(f.s != nil, "s")
	if f.typ == types.DynamicFeeTxType {
		need(f.tip != nil, "maxPriorityFeePerGas")
		need(f.feeCap != nil, "maxFeePerGas")
	} else {
		need(f.gasPrice != nil, "gasPrice")
	}
	if f.typ == types.LegacyTxType {
		need(f.v != nil, "v")
	} else {
		need(f.chainID != nil, "chainId")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing required field %q in transaction", missing[0])
	}
	switch f.typ {
	case types.LegacyTxType:
		return &types.LegacyTx{Nonce: *f.nonce, GasPrice: f.gasPrice, Gas: *f.gas, To: f.to, Value: f.value, Data: f.input,
			V: f.v, R: f.r, S: f.s}, nil
	case types.AccessListTxType:
		v, err := f.yParityValue()
		if err != nil {
			return nil, err
		}
		return &types.AccessListTx{ChainID: f.chainID, Nonce: *f.nonce, GasPrice: f.gasPrice, Gas: *f.gas, To: f.to, Value: f.value,
			Data: f.input, AccessList: f.accessList, V: v, R: f.r, S: f.s}, nil
	default:
		v, err := f.yParityValue()
		if err != nil {
			return nil, err
		}
		return &types.DynamicFeeTx{ChainID: f.chainID, Nonce: *f.nonce, GasTipCap: f.tip, GasFeeCap: f.feeCap, Gas: *f.gas, To: f.to,
			Value: f.value, Data: f.input, AccessList: f.accessList, V: v, R: f.r, S: f.s}, nil
	}
}

// yParityValue is a typed transaction's V: yParity (0 or 1, equal to v when
// both are given), else v.
func (f *txFields) yParityValue() (*big.Int, error) {
	if f.yParity != nil {
		if *f.yParity > 1 {
			return nil, errors.New("'yParity' field must be 0 or 1")
		}
		y := new(big.Int).SetUint64(*f.yParity)
		if f.v != nil && f.v.Cmp(y) != 0 {
			return nil, errors.New("'v' and 'yParity' fields do not match")
		}
		return y, nil
	}
	if f.v == nil {
		return nil, errors.New("missing 'yParity' or 'v' field in transaction")
	}
	return f.v, nil
}
