package codec

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/moraine-data/moraine/schemas/record"
)

// TestBlockLogsMatchesDecode: BlockLogs reads the logs of a block as the
// full decoder does (every log, with its transaction's status), whatever
// else the block holds, and its field numbers are the schema's.
func TestBlockLogsMatchesDecode(t *testing.T) {
	for _, f := range []struct {
		msg  protoreflect.ProtoMessage
		name protoreflect.Name
		num  protowire.Number
	}{
		{&record.ChainEvent{}, "block", fieldEventBlock},
		{&record.Block{}, "chain_id", fieldBlockChainID},
		{&record.Block{}, "number", fieldBlockNumber},
		{&record.Block{}, "transactions", fieldBlockTxs},
		{&record.Transaction{}, "status", fieldTxStatus},
		{&record.Transaction{}, "logs", fieldTxLogs},
		{&record.Log{}, "address", fieldLogAddress},
		{&record.Log{}, "topics", fieldLogTopics},
		{&record.Log{}, "data", fieldLogData},
		{&record.Log{}, "log_index", fieldLogIndex},
	} {
		fd := f.msg.ProtoReflect().Descriptor().Fields().ByName(f.name)
		require.NotNil(t, fd, "%s", f.name)
		require.Equal(t, f.num, fd.Number(), "%s.%s", f.msg.ProtoReflect().Descriptor().Name(), f.name)
	}

	b := &record.Block{ChainId: 43114, Number: 1234, Hash: []byte{1}, ParentHash: []byte{2}, Timestamp: 99, BaseFee: "25",
		ReceiptsRoot: []byte{3}, ExtraData: []byte("extra"), TracesIncluded: true, FetchedAtUnixMs: 5}
	var index uint32
	for i := range 5 {
		tx := &record.Transaction{Hash: []byte{byte(i)}, Index: uint32(i), From: []byte{9}, Input: []byte("input"), Status: uint32(i % 2),
			GasUsed: 21000, AccessList: []*record.AccessTuple{{Address: []byte{7}, StorageKeys: [][]byte{{8}}}},
			InternalTransactions: []*record.InternalTransaction{{CallIndex: "0", Type: "CALL", From: []byte{1}, Input: []byte("call")}}}
		for j := range i {
			l := &record.Log{Address: []byte{byte(10 + i)}, Data: []byte(fmt.Sprintf("data %d %d", i, j)), LogIndex: index}
			for k := range j + 1 {
				l.Topics = append(l.Topics, []byte{byte(k), byte(j)})
			}
			tx.Logs = append(tx.Logs, l)
			index++
		}
		b.Transactions = append(b.Transactions, tx)
	}
	enc, err := EncodeChainEvent(&record.ChainEvent{Event: &record.ChainEvent_Block{Block: b}})
	require.NoError(t, err)

	type seen struct {
		status uint32
		l      LogView
	}
	var want, got []seen
	for _, tx := range b.Transactions {
		for _, l := range tx.Logs {
			want = append(want, seen{tx.Status, LogView{Address: l.Address, Topics: l.Topics, Data: l.Data, Index: l.LogIndex}})
		}
	}
	chain, number, ok, err := BlockLogs(enc, func(status uint32, l *LogView) {
		got = append(got, seen{status, LogView{Address: l.Address, Topics: append([][]byte(nil), l.Topics...), Data: l.Data, Index: l.Index}})
	})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uint64(43114), chain)
	require.Equal(t, uint64(1234), number)
	require.Len(t, want, 10)
	require.Equal(t, want, got)

	// A transaction whose status follows its logs on the wire.
	txNoStatus := &record.Transaction{Logs: []*record.Log{{Address: []byte{1}, Topics: [][]byte{{2}}}}}
	txb, err := txNoStatus.MarshalVT()
	require.NoError(t, err)
	txb = protowire.AppendVarint(protowire.AppendTag(txb, fieldTxStatus, protowire.VarintType), 1)
	blk := protowire.AppendBytes(protowire.AppendTag(nil, fieldBlockTxs, protowire.BytesType), txb)
	ev := protowire.AppendBytes(protowire.AppendTag(nil, fieldEventBlock, protowire.BytesType), blk)
	var statuses []uint32
	_, _, ok, err = BlockLogs(ev, func(status uint32, _ *LogView) { statuses = append(statuses, status) })
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []uint32{1}, statuses)

	// A reorg marker has no block; a cut record is an error.
	reorg, err := EncodeChainEvent(&record.ChainEvent{Event: &record.ChainEvent_Reorg{Reorg: &record.Reorg{ChainId: 1, ForkNumber: 2}}})
	require.NoError(t, err)
	_, _, ok, err = BlockLogs(reorg, func(uint32, *LogView) { t.Fatal("a log in a reorg marker") })
	require.NoError(t, err)
	require.False(t, ok)
	_, _, _, err = BlockLogs(enc[:len(enc)-3], func(uint32, *LogView) {})
	require.Error(t, err)
}
