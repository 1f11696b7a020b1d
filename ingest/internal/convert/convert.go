// Package convert turns a node's JSON-RPC answers for one block into a
// record.Block: eth_getBlockByNumber(n, true), eth_getBlockReceipts(n) and,
// when the chain has traces, debug_traceBlockByNumber(n, callTracer).
//
// It is pure: no I/O, no clock, no state. The caller sets what depends on
// other blocks (cumulative_transactions) and on time (fetched_at_unix_ms).
//
// Field rules (CONTRACT.md section 6 and the golden warehouse tables):
//   - wei amounts are decimal strings; an absent header field ("baseFeePerGas"
//     before EIP-1559, "blockGasCost" off Avalanche) stays "" so consumers can
//     tell absent from zero;
//   - fees_spent = Σ receipt.gasUsed × receipt.effectiveGasPrice, falling
//     back to the transaction gasPrice when a receipt has no effectiveGasPrice
//     (pre-London nodes);
//   - max fee and max priority fee of type 0 and 1 transactions are their
//     gasPrice (go-ethereum GasFeeCap/GasTipCap semantics);
//   - a contract creation has an empty "to" (the node sends null, or "" on
//     2020 C-Chain) and the receipt's contractAddress;
//   - the callTracer tree of each transaction is flattened depth-first,
//     pre-order: the root is call_0 at trace_position 0 and depth 0, its
//     children call_0_0, call_0_1, ... (numbered from 0).
package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/moraine-data/moraine/pkg/jsonx"
	"github.com/moraine-data/moraine/schemas/record"
)

// Raw is what the node answered for one block: the raw JSON results.
type Raw struct {
	// Block is eth_getBlockByNumber(n, true).
	Block json.RawMessage
	// Receipts is eth_getBlockReceipts(n).
	Receipts json.RawMessage
	// Traces is debug_traceBlockByNumber(n, {"tracer":"callTracer"}): a list
	// of {txHash, result}. Nil when the chain is ingested without traces.
	Traces json.RawMessage
	// RequireTraces makes a transaction without a trace entry an error
	// (ErrMissingTrace) instead of a transaction without internal
	// transactions: one trace per transaction (chains.CheckTraces).
	RequireTraces bool
}

var (
	// ErrNotFound means the node answered null for the block: it does not
	// have it (yet). A lagging node behind a load balancer does this for
	// blocks another node already announced, so it means "retry", never
	// "there is no such block".
	ErrNotFound = errors.New("block not available")
	// ErrIncomplete means the answers do not fit together: receipts or traces
	// missing (null) or belonging to another block (a reorg between the
	// calls). Fetching again resolves it.
	ErrIncomplete = errors.New("block answers incomplete")
	// ErrMissingTrace means a transaction has no entry in the traces
	// (Raw.RequireTraces): a truncated trace list. It wraps ErrIncomplete.
	ErrMissingTrace = fmt.Errorf("transaction without a trace: %w", ErrIncomplete)
)

// IsNull reports whether a raw result is absent or JSON null.
func IsNull(m json.RawMessage) bool {
	m = bytes.TrimSpace(m)
	return len(m) == 0 || string(m) == "null"
}

// Header is the part of a block that chain following needs.
type Header struct {
	Number     uint64
	Hash       []byte
	ParentHash []byte
	TxCount    int
}

// ParseHeader reads number, hash, parent hash and the transaction count
// from an eth_getBlockByNumber result (with or without full transactions).
func ParseHeader(m json.RawMessage) (Header, error) {
	if IsNull(m) {
		return Header{}, ErrNotFound
	}
	var rb rpcBlock
	d := &decoder{}
	if err := d.readBlock(jsonx.NewReader(m), &rb, false); err != nil {
		return Header{}, fmt.Errorf("decode header: %w", err)
	}
	return d.header(&rb)
}

// rpcBlock and the types below hold the JSON fields as byte slices that
// alias the input: only the parts kept in the record are copied.
type rpcBlock struct {
	Number, Hash, ParentHash, Timestamp          []byte
	TimestampMilliseconds, MinDelayExcess        []byte
	BaseFeePerGas, GasUsed, GasLimit             []byte
	BlockGasCost, ExtDataGasUsed                 []byte
	Miner, StateRoot, ReceiptsRoot, TxRoot, Size []byte
	ExtraData                                    []byte
	TxCount                                      int
	Transactions                                 []rpcTx
}

type rpcTx struct {
	Hash, TransactionIndex, Type, From, To, Value []byte
	Gas, GasPrice, MaxFeePerGas, MaxPriority      []byte
	Nonce, Input                                  []byte
	AccessList                                    []*record.AccessTuple
}

type rpcReceipt struct {
	TransactionHash, BlockHash, Status, GasUsed []byte
	CumulativeGasUsed, EffectiveGasPrice        []byte
	ContractAddress                             []byte
	Logs                                        []*record.Log
	// logIndexed tells which logs carried a logIndex.
	logIndexed []bool
}

type rpcTrace struct {
	TxHash []byte
	Frames []*record.InternalTransaction
}

// decoder converts one block; it keeps the first error so that field
// conversions read as a flat list instead of an if-chain per field.
type decoder struct {
	a             arena
	err           error
	requireTraces bool
}

func (d *decoder) set(err error) {
	if err != nil && d.err == nil {
		d.err = err
	}
}

func (d *decoder) q(field string, s []byte) uint64 {
	v, err := quantity(field, s)
	d.set(err)
	return v
}

func (d *decoder) oq(field string, s []byte) *uint64 {
	v, err := optQuantity(field, s)
	d.set(err)
	return v
}

func (d *decoder) dec(field string, s []byte) string {
	v, err := decimal(field, s)
	d.set(err)
	return v
}

func (d *decoder) b(field string, s []byte) []byte {
	v, err := d.a.data(field, s)
	d.set(err)
	return v
}

func (d *decoder) big(field string, s []byte) *big.Int {
	v, err := bigInt(field, s)
	d.set(err)
	return v
}

func (d *decoder) header(rb *rpcBlock) (Header, error) {
	h := Header{
		Number:     d.q("number", rb.Number),
		Hash:       d.b("hash", rb.Hash),
		ParentHash: d.b("parentHash", rb.ParentHash),
		TxCount:    rb.TxCount,
	}
	if d.err != nil {
		return h, d.err
	}
	if rb.Number == nil || len(h.Hash) != 32 {
		return h, fmt.Errorf("block %d: number or 32-byte hash missing", h.Number)
	}
	return h, nil
}

// Block converts the answers for one block. withTraces says whether traces
// were requested: then a block with transactions needs them.
//
// The result has cumulative_transactions 0 and no fetch time: the caller
// sets both.
func Block(chainID uint64, raw Raw, withTraces bool) (*record.Block, error) {
	if IsNull(raw.Block) {
		return nil, ErrNotFound
	}
	d := &decoder{requireTraces: raw.RequireTraces}
	var rb rpcBlock
	if err := d.readBlock(jsonx.NewReader(raw.Block), &rb, true); err != nil {
		return nil, fmt.Errorf("decode block: %w", err)
	}
	hdr, err := d.header(&rb)
	if err != nil {
		return nil, err
	}
	b := &record.Block{
		ChainId:               chainID,
		Number:                hdr.Number,
		Hash:                  hdr.Hash,
		ParentHash:            hdr.ParentHash,
		Timestamp:             d.q("timestamp", rb.Timestamp),
		TimestampMilliseconds: d.oq("timestampMilliseconds", rb.TimestampMilliseconds),
		MinDelayExcess:        d.oq("minDelayExcess", rb.MinDelayExcess),
		BaseFee:               d.dec("baseFeePerGas", rb.BaseFeePerGas),
		GasUsed:               d.q("gasUsed", rb.GasUsed),
		GasLimit:              d.q("gasLimit", rb.GasLimit),
		BlockGasCost:          d.dec("blockGasCost", rb.BlockGasCost),
		ExtDataGasUsed:        d.dec("extDataGasUsed", rb.ExtDataGasUsed),
		Miner:                 d.b("miner", rb.Miner),
		StateRoot:             d.b("stateRoot", rb.StateRoot),
		ReceiptsRoot:          d.b("receiptsRoot", rb.ReceiptsRoot),
		TransactionsRoot:      d.b("transactionsRoot", rb.TxRoot),
		Size:                  d.q("size", rb.Size),
		ExtraData:             d.b("extraData", rb.ExtraData),
		TracesIncluded:        withTraces,
		FeesSpent:             "0",
	}
	if d.err != nil {
		return nil, fmt.Errorf("block %d: %w", b.Number, d.err)
	}
	if len(rb.Transactions) == 0 {
		// Nothing else to read: receipts and traces of an empty block carry
		// nothing, and some nodes refuse to trace genesis.
		return b, nil
	}

	receipts, err := d.matchReceipts(&rb, raw.Receipts)
	if err != nil {
		return nil, fmt.Errorf("block %d: %w", b.Number, err)
	}
	var traces [][]*record.InternalTransaction
	if withTraces {
		if traces, err = d.matchTraces(&rb, raw.Traces); err != nil {
			return nil, fmt.Errorf("block %d: %w", b.Number, err)
		}
	}

	fees := new(big.Int)
	var tmp big.Int
	b.Transactions = make([]*record.Transaction, len(rb.Transactions))
	var nextLogIndex uint32
	for i := range rb.Transactions {
		t := &rb.Transactions[i]
		r := receipts[i]
		tx := d.transaction(t, r, &nextLogIndex)
		// fees_spent: receipt gasUsed × the price actually paid.
		if p := d.big("effectiveGasPrice", firstNonNil(r.EffectiveGasPrice, t.GasPrice)); p != nil {
			fees.Add(fees, tmp.Mul(tmp.SetUint64(tx.GasUsed), p))
		}
		if traces != nil {
			tx.InternalTransactions = traces[i]
		}
		if d.err != nil {
			return nil, fmt.Errorf("block %d tx %s: %w", b.Number, t.Hash, d.err)
		}
		b.Transactions[i] = tx
	}
	b.FeesSpent = fees.String()
	return b, nil
}

func firstNonNil(a, b []byte) []byte {
	if a != nil {
		return a
	}
	return b
}

// matchReceipts pairs receipts with transactions by hash and checks that
// they belong to this block.
func (d *decoder) matchReceipts(rb *rpcBlock, m json.RawMessage) ([]*rpcReceipt, error) {
	if IsNull(m) {
		return nil, fmt.Errorf("receipts: null: %w", ErrIncomplete)
	}
	var rs []rpcReceipt
	r := jsonx.NewReader(m)
	err := r.Array(func() error {
		rs = append(rs, rpcReceipt{})
		return d.readReceipt(r, &rs[len(rs)-1])
	})
	if err != nil {
		return nil, fmt.Errorf("decode receipts: %w", err)
	}
	out := make([]*rpcReceipt, len(rb.Transactions))
	inOrder := len(rs) == len(rb.Transactions)
	for i := range rs {
		if rs[i].BlockHash != nil && !hexEqual(rs[i].BlockHash, rb.Hash) {
			return nil, fmt.Errorf("receipt of %s is from block %s: %w", rs[i].TransactionHash, rs[i].BlockHash, ErrIncomplete)
		}
		if inOrder && !hexEqual(rs[i].TransactionHash, rb.Transactions[i].Hash) {
			inOrder = false
		}
	}
	if inOrder {
		for i := range rs {
			out[i] = &rs[i]
		}
		return out, nil
	}
	byHash := make(map[string]*rpcReceipt, len(rs))
	for i := range rs {
		byHash[string(bytes.ToLower(rs[i].TransactionHash))] = &rs[i]
	}
	for i, t := range rb.Transactions {
		r, ok := byHash[string(bytes.ToLower(t.Hash))]
		if !ok {
			return nil, fmt.Errorf("no receipt for tx %s (%d receipts for %d txs): %w", t.Hash, len(rs), len(rb.Transactions), ErrIncomplete)
		}
		out[i] = r
	}
	return out, nil
}

// matchTraces pairs the call trees with transactions, by txHash when the
// node gives it (geth, coreth) and by position otherwise. A transaction
// whose trace failed (an entry with an error) or is absent from the list
// gets no internal transactions: the block is worth more than nothing, and
// the empty list is visible downstream.
func (d *decoder) matchTraces(rb *rpcBlock, m json.RawMessage) ([][]*record.InternalTransaction, error) {
	if IsNull(m) {
		return nil, fmt.Errorf("traces: null: %w", ErrIncomplete)
	}
	var ts []rpcTrace
	r := jsonx.NewReader(m)
	err := r.Array(func() error {
		ts = append(ts, rpcTrace{})
		return d.readTrace(r, &ts[len(ts)-1])
	})
	if err != nil {
		return nil, fmt.Errorf("decode traces: %w", err)
	}
	out := make([][]*record.InternalTransaction, len(rb.Transactions))
	if d.requireTraces && len(ts) < len(rb.Transactions) {
		return nil, fmt.Errorf("%d traces for %d txs: %w", len(ts), len(rb.Transactions), ErrMissingTrace)
	}
	if len(ts) > 0 && ts[0].TxHash == nil {
		if len(ts) != len(rb.Transactions) {
			return nil, fmt.Errorf("%d traces without txHash for %d txs: %w", len(ts), len(rb.Transactions), ErrIncomplete)
		}
		for i := range ts {
			out[i] = ts[i].Frames
		}
		return out, nil
	}
	index := make(map[string]int, len(rb.Transactions))
	for i, t := range rb.Transactions {
		index[string(bytes.ToLower(t.Hash))] = i
	}
	for i := range ts {
		j, ok := index[string(bytes.ToLower(ts[i].TxHash))]
		if !ok {
			// A trace of a transaction that is not in this block: the
			// trace came from another branch.
			return nil, fmt.Errorf("trace of tx %s not in block: %w", ts[i].TxHash, ErrIncomplete)
		}
		out[j] = ts[i].Frames
	}
	return out, nil
}

func hexEqual(a, b []byte) bool { return bytes.EqualFold(strip(a), strip(b)) }

func (d *decoder) transaction(t *rpcTx, r *rpcReceipt, nextLogIndex *uint32) *record.Transaction {
	tx := &record.Transaction{
		Hash:              d.b("hash", t.Hash),
		Index:             uint32(d.q("transactionIndex", t.TransactionIndex)),
		Type:              uint32(d.q("type", t.Type)),
		From:              d.b("from", t.From),
		To:                d.b("to", t.To),
		Value:             d.dec("value", t.Value),
		Gas:               d.q("gas", t.Gas),
		GasPrice:          d.dec("gasPrice", t.GasPrice),
		Nonce:             d.q("nonce", t.Nonce),
		Input:             d.b("input", t.Input),
		Status:            uint32(d.q("status", r.Status)),
		GasUsed:           d.q("gasUsed", r.GasUsed),
		CumulativeGasUsed: d.q("cumulativeGasUsed", r.CumulativeGasUsed),
		EffectiveGasPrice: d.dec("effectiveGasPrice", r.EffectiveGasPrice),
		ContractAddress:   d.b("contractAddress", r.ContractAddress),
		AccessList:        t.AccessList,
		Logs:              r.Logs,
	}
	if tx.Value == "" {
		tx.Value = "0"
	}
	if tx.EffectiveGasPrice == "" {
		// Pre-London receipts have no effectiveGasPrice: what was paid is
		// the gas price.
		tx.EffectiveGasPrice = tx.GasPrice
	}
	if tx.GasPrice == "" {
		tx.GasPrice = tx.EffectiveGasPrice
	}
	if tx.Type >= 2 {
		tx.MaxFeePerGas = d.dec("maxFeePerGas", t.MaxFeePerGas)
		tx.MaxPriorityFeePerGas = d.dec("maxPriorityFeePerGas", t.MaxPriority)
	}
	// Legacy and access-list transactions pay gasPrice whatever the base
	// fee: both caps are the gas price (go-ethereum GasFeeCap/GasTipCap).
	if tx.MaxFeePerGas == "" {
		tx.MaxFeePerGas = tx.GasPrice
	}
	if tx.MaxPriorityFeePerGas == "" {
		tx.MaxPriorityFeePerGas = tx.GasPrice
	}
	for i, lg := range r.Logs {
		if !r.logIndexed[i] {
			lg.LogIndex = *nextLogIndex
		}
		*nextLogIndex = lg.LogIndex + 1
	}
	return tx
}

// readBlock reads an eth_getBlockByNumber result. With fullTxs the
// transactions must be objects; without, they are only counted.
func (d *decoder) readBlock(r *jsonx.Reader, rb *rpcBlock, fullTxs bool) error {
	var err error
	return r.Object(func(k []byte) error {
		switch string(k) {
		case "number":
			rb.Number, err = r.Bytes()
		case "hash":
			rb.Hash, err = r.Bytes()
		case "parentHash":
			rb.ParentHash, err = r.Bytes()
		case "timestamp":
			rb.Timestamp, err = r.Bytes()
		case "timestampMilliseconds":
			rb.TimestampMilliseconds, err = r.Bytes()
		case "minDelayExcess":
			rb.MinDelayExcess, err = r.Bytes()
		case "baseFeePerGas":
			rb.BaseFeePerGas, err = r.Bytes()
		case "gasUsed":
			rb.GasUsed, err = r.Bytes()
		case "gasLimit":
			rb.GasLimit, err = r.Bytes()
		case "blockGasCost":
			rb.BlockGasCost, err = r.Bytes()
		case "extDataGasUsed":
			rb.ExtDataGasUsed, err = r.Bytes()
		case "miner":
			rb.Miner, err = r.Bytes()
		case "stateRoot":
			rb.StateRoot, err = r.Bytes()
		case "receiptsRoot":
			rb.ReceiptsRoot, err = r.Bytes()
		case "transactionsRoot":
			rb.TxRoot, err = r.Bytes()
		case "size":
			rb.Size, err = r.Bytes()
		case "extraData":
			rb.ExtraData, err = r.Bytes()
		case "transactions":
			err = r.Array(func() error {
				rb.TxCount++
				if !fullTxs {
					return r.Skip()
				}
				if r.Peek() != '{' {
					return fmt.Errorf("transactions: want objects (full transactions), got %q", r.Peek())
				}
				rb.Transactions = append(rb.Transactions, rpcTx{})
				return d.readTx(r, &rb.Transactions[len(rb.Transactions)-1])
			})
		default:
			err = r.Skip()
		}
		return err
	})
}

func (d *decoder) readTx(r *jsonx.Reader, t *rpcTx) error {
	var err error
	return r.Object(func(k []byte) error {
		switch string(k) {
		case "hash":
			t.Hash, err = r.Bytes()
		case "transactionIndex":
			t.TransactionIndex, err = r.Bytes()
		case "type":
			t.Type, err = r.Bytes()
		case "from":
			t.From, err = r.Bytes()
		case "to":
			t.To, err = r.Bytes()
		case "value":
			t.Value, err = r.Bytes()
		case "gas":
			t.Gas, err = r.Bytes()
		case "gasPrice":
			t.GasPrice, err = r.Bytes()
		case "maxFeePerGas":
			t.MaxFeePerGas, err = r.Bytes()
		case "maxPriorityFeePerGas":
			t.MaxPriority, err = r.Bytes()
		case "nonce":
			t.Nonce, err = r.Bytes()
		case "input":
			t.Input, err = r.HexBytes() // decoded as hex (d.b), which checks every byte
		case "accessList":
			err = r.Array(func() error {
				at := &record.AccessTuple{}
				t.AccessList = append(t.AccessList, at)
				return r.Object(func(k []byte) error {
					switch string(k) {
					case "address":
						b, err := r.Bytes()
						at.Address = d.b("accessList.address", b)
						return err
					case "storageKeys":
						return r.Array(func() error {
							b, err := r.Bytes()
							at.StorageKeys = append(at.StorageKeys, d.b("accessList.storageKeys", b))
							return err
						})
					}
					return r.Skip()
				})
			})
		default:
			err = r.Skip()
		}
		return err
	})
}

func (d *decoder) readReceipt(r *jsonx.Reader, rc *rpcReceipt) error {
	var err error
	return r.Object(func(k []byte) error {
		switch string(k) {
		case "transactionHash":
			rc.TransactionHash, err = r.Bytes()
		case "blockHash":
			rc.BlockHash, err = r.Bytes()
		case "status":
			rc.Status, err = r.Bytes()
		case "gasUsed":
			rc.GasUsed, err = r.Bytes()
		case "cumulativeGasUsed":
			rc.CumulativeGasUsed, err = r.Bytes()
		case "effectiveGasPrice":
			rc.EffectiveGasPrice, err = r.Bytes()
		case "contractAddress":
			rc.ContractAddress, err = r.Bytes()
		case "logs":
			err = r.Array(func() error { return d.readLog(r, rc) })
		default:
			err = r.Skip()
		}
		return err
	})
}

func (d *decoder) readLog(r *jsonx.Reader, rc *rpcReceipt) error {
	lg := &record.Log{}
	indexed := false
	err := r.Object(func(k []byte) error {
		switch string(k) {
		// The hex fields go straight to d.b, which checks every byte.
		case "address":
			b, err := r.HexBytes()
			lg.Address = d.b("log.address", b)
			return err
		case "topics":
			return r.Array(func() error {
				b, err := r.HexBytes()
				lg.Topics = append(lg.Topics, d.b("log.topics", b))
				return err
			})
		case "data":
			b, err := r.HexBytes()
			lg.Data = d.b("log.data", b)
			return err
		case "logIndex":
			b, err := r.Bytes()
			if b != nil {
				lg.LogIndex = uint32(d.q("logIndex", b))
				indexed = true
			}
			return err
		}
		return r.Skip()
	})
	rc.Logs = append(rc.Logs, lg)
	rc.logIndexed = append(rc.logIndexed, indexed)
	return err
}

func (d *decoder) readTrace(r *jsonx.Reader, t *rpcTrace) error {
	return r.Object(func(k []byte) error {
		switch string(k) {
		case "txHash":
			var err error
			t.TxHash, err = r.Bytes()
			return err
		case "result":
			if r.Null() {
				return nil
			}
			return d.readFrame(r, &t.Frames, []byte("call_0"), 0)
		}
		// "error": the tracer failed for this transaction; no frames.
		return r.Skip()
	})
}

// readFrame reads one callTracer frame and its subcalls depth-first,
// pre-order: the frame takes its position before its children, whatever the
// order of the keys (Erigon sends "calls" first).
func (d *decoder) readFrame(r *jsonx.Reader, out *[]*record.InternalTransaction, path []byte, depth uint32) error {
	it := &record.InternalTransaction{
		CallIndex:     string(path),
		TracePosition: uint32(len(*out)),
		Depth:         depth,
	}
	*out = append(*out, it)
	child := 0
	err := r.Object(func(k []byte) error {
		if string(k) == "calls" {
			return r.Array(func() error {
				p := strconv.AppendInt(append(path, '_'), int64(child), 10)
				child++
				return d.readFrame(r, out, p, depth+1)
			})
		}
		if r.Peek() != '"' {
			return r.Skip()
		}
		var b []byte
		var err error
		switch string(k) {
		case "from", "to", "input", "output":
			// Decoded as hex right below, which checks every byte.
			b, err = r.HexBytes()
		default:
			b, err = r.Bytes()
		}
		if err != nil {
			return err
		}
		switch string(k) {
		case "type":
			it.Type = frameType(b)
		case "from":
			it.From = d.b("trace.from", b)
		case "to":
			it.To = d.b("trace.to", b)
		case "value":
			it.Value = d.dec("trace.value", b)
		case "gas":
			it.Gas = d.q("trace.gas", b)
		case "gasUsed":
			it.GasUsed = d.q("trace.gasUsed", b)
		case "input":
			it.Input = d.b("trace.input", b)
		case "output":
			it.Output = d.b("trace.output", b)
		case "error":
			it.Error = text(b)
		case "revertReason":
			it.RevertReason = text(b)
		}
		return nil
	})
	if it.Value == "" {
		// STATICCALL and DELEGATECALL frames carry no value.
		it.Value = "0"
	}
	return err
}

// text converts a node-supplied message to a string that is valid UTF-8, as
// protobuf string fields must be: a revert reason is whatever bytes the
// contract reverted with. Invalid sequences become U+FFFD, as encoding/json
// does.
func text(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// frameType upper-cases the frame type, without allocating for the usual ones.
func frameType(b []byte) string {
	switch string(b) {
	case "CALL":
		return "CALL"
	case "STATICCALL":
		return "STATICCALL"
	case "DELEGATECALL":
		return "DELEGATECALL"
	case "CALLCODE":
		return "CALLCODE"
	case "CREATE":
		return "CREATE"
	case "CREATE2":
		return "CREATE2"
	case "SELFDESTRUCT":
		return "SELFDESTRUCT"
	}
	return text(bytes.ToUpper(b))
}
