package codec

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of schemas/proto/moraine/v1/chain.proto that BlockLogs
// reads; TestBlockLogsMatchesDecode holds them to the generated code.
const (
	fieldEventBlock   = 1  // ChainEvent.block
	fieldBlockChainID = 1  // Block.chain_id
	fieldBlockNumber  = 2  // Block.number
	fieldBlockTxs     = 30 // Block.transactions
	fieldTxStatus     = 13 // Transaction.status
	fieldTxLogs       = 18 // Transaction.logs
	fieldLogAddress   = 1  // Log.address
	fieldLogTopics    = 2  // Log.topics
	fieldLogData      = 3  // Log.data
	fieldLogIndex     = 4  // Log.log_index
)

// LogView is a log as BlockLogs reads it: its bytes alias the record.
type LogView struct {
	Address []byte
	Topics  [][]byte
	Data    []byte
	// Index is the log's index in its block.
	Index uint32
}

// BlockLogs reads the logs of a ChainEvent record's block without decoding
// the rest of it (transaction fields, internal transactions): what a
// consumer that needs only the logs (package nftdiscover) would otherwise
// spend most of its CPU on. fn gets each log, in block order, with its
// transaction's status. l is reused after the call; its fields alias b
// (each log's Topics are a slice of their own), so a copy of *l stays valid
// as long as b. ok is false for a reorg marker.
func BlockLogs(b []byte, fn func(status uint32, l *LogView)) (chainID, number uint64, ok bool, err error) {
	var block []byte
	err = eachField(b, func(num protowire.Number, v []byte, _ uint64) {
		if num == fieldEventBlock && v != nil {
			block, ok = v, true
		}
	})
	if err != nil || !ok {
		return 0, 0, false, err
	}
	var logs []LogView // one transaction's, reused
	var txErr error
	err = eachField(block, func(num protowire.Number, v []byte, x uint64) {
		switch {
		case num == fieldBlockChainID && v == nil:
			chainID = x
		case num == fieldBlockNumber && v == nil:
			number = x
		case num == fieldBlockTxs && v != nil && txErr == nil:
			var status uint32
			if logs, status, txErr = txLogs(v, logs[:0]); txErr == nil {
				for i := range logs {
					fn(status, &logs[i])
				}
			}
		}
	})
	if err = errors.Join(err, txErr); err != nil {
		return 0, 0, false, err
	}
	return chainID, number, true, nil
}

// txLogs reads a Transaction's status and logs (appended to logs): all of
// them first, as the status may come after them on the wire.
func txLogs(tx []byte, logs []LogView) ([]LogView, uint32, error) {
	var status uint32
	var logErr error
	err := eachField(tx, func(num protowire.Number, v []byte, x uint64) {
		switch {
		case num == fieldTxStatus && v == nil:
			status = uint32(x)
		case num == fieldTxLogs && v != nil && logErr == nil:
			logs = append(logs, LogView{})
			logErr = readLog(v, &logs[len(logs)-1])
		}
	})
	return logs, status, errors.Join(err, logErr)
}

func readLog(b []byte, l *LogView) error {
	return eachField(b, func(num protowire.Number, v []byte, x uint64) {
		switch {
		case num == fieldLogAddress && v != nil:
			l.Address = v
		case num == fieldLogTopics && v != nil:
			l.Topics = append(l.Topics, v)
		case num == fieldLogData && v != nil:
			l.Data = v
		case num == fieldLogIndex && v == nil:
			l.Index = uint32(x)
		}
	})
}

// eachField calls fn for every varint and length-delimited field of the
// message b, in wire order: v is a length-delimited field's value (aliasing
// b; empty but not nil for an empty one), x a varint's (v nil). Fields of
// other wire types are skipped.
func eachField(b []byte, fn func(num protowire.Number, v []byte, x uint64)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return blockLogsErr(n)
		}
		b = b[n:]
		switch typ {
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return blockLogsErr(n)
			}
			if v == nil {
				v = b[:0]
			}
			fn(num, v, 0)
			b = b[n:]
		case protowire.VarintType:
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return blockLogsErr(n)
			}
			fn(num, nil, x)
			b = b[n:]
		default:
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return blockLogsErr(n)
			}
			b = b[n:]
		}
	}
	return nil
}

func blockLogsErr(n int) error {
	return fmt.Errorf("decode chain event logs: %w", protowire.ParseError(n))
}
