package codec

import (
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
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, 0, false, blockLogsErr(n)
		}
		b = b[n:]
		if num == fieldEventBlock && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, 0, false, blockLogsErr(n)
			}
			block, ok = v, true
			b = b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0, 0, false, blockLogsErr(n)
		}
		b = b[n:]
	}
	if !ok {
		return 0, 0, false, nil
	}
	var logs []LogView // one transaction's, reused: its status may come after them
	for len(block) > 0 {
		num, typ, n := protowire.ConsumeTag(block)
		if n < 0 {
			return 0, 0, false, blockLogsErr(n)
		}
		block = block[n:]
		switch {
		case (num == fieldBlockChainID || num == fieldBlockNumber) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(block)
			if n < 0 {
				return 0, 0, false, blockLogsErr(n)
			}
			if num == fieldBlockChainID {
				chainID = v
			} else {
				number = v
			}
			block = block[n:]
		case num == fieldBlockTxs && typ == protowire.BytesType:
			tx, n := protowire.ConsumeBytes(block)
			if n < 0 {
				return 0, 0, false, blockLogsErr(n)
			}
			block = block[n:]
			var status uint32
			if logs, status, err = txLogs(tx, logs[:0]); err != nil {
				return 0, 0, false, err
			}
			for i := range logs {
				fn(status, &logs[i])
			}
		default:
			if n = protowire.ConsumeFieldValue(num, typ, block); n < 0 {
				return 0, 0, false, blockLogsErr(n)
			}
			block = block[n:]
		}
	}
	return chainID, number, true, nil
}

// txLogs reads a Transaction's status and logs (appended to logs).
func txLogs(tx []byte, logs []LogView) ([]LogView, uint32, error) {
	var status uint32
	for len(tx) > 0 {
		num, typ, n := protowire.ConsumeTag(tx)
		if n < 0 {
			return nil, 0, blockLogsErr(n)
		}
		tx = tx[n:]
		switch {
		case num == fieldTxStatus && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(tx)
			if n < 0 {
				return nil, 0, blockLogsErr(n)
			}
			status = uint32(v)
			tx = tx[n:]
		case num == fieldTxLogs && typ == protowire.BytesType:
			l, n := protowire.ConsumeBytes(tx)
			if n < 0 {
				return nil, 0, blockLogsErr(n)
			}
			tx = tx[n:]
			logs = append(logs, LogView{})
			if err := readLog(l, &logs[len(logs)-1]); err != nil {
				return nil, 0, err
			}
		default:
			if n = protowire.ConsumeFieldValue(num, typ, tx); n < 0 {
				return nil, 0, blockLogsErr(n)
			}
			tx = tx[n:]
		}
	}
	return logs, status, nil
}

func readLog(b []byte, l *LogView) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return blockLogsErr(n)
		}
		b = b[n:]
		switch {
		case (num == fieldLogAddress || num == fieldLogTopics || num == fieldLogData) && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return blockLogsErr(n)
			}
			b = b[n:]
			switch num {
			case fieldLogAddress:
				l.Address = v
			case fieldLogTopics:
				l.Topics = append(l.Topics, v)
			default:
				l.Data = v
			}
		case num == fieldLogIndex && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return blockLogsErr(n)
			}
			l.Index = uint32(v)
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
