package nftdiscover

import (
	"math/big"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
)

func word(n int64) []byte { return new(big.Int).SetInt64(n).FillBytes(make([]byte, 32)) }

func addrTopic(b byte) []byte { w := make([]byte, 32); w[31] = b; return w }

func contract(b byte) []byte { a := make([]byte, 20); a[0] = b; return a }

func blockRecord(t *testing.T, ev *record.ChainEvent) *kgo.Record {
	t.Helper()
	v, err := codec.EncodeChainEvent(ev)
	require.NoError(t, err)
	return &kgo.Record{Value: v}
}

// TestRequests decodes blocks into one request per NFT: ERC-721 transfers
// (mints and burns included) and every id of ERC-1155 single and batch
// transfers of successful transactions; not ERC-20 transfers, not the logs
// of failed transactions, not reorg markers; and an NFT requested once.
func TestRequests(t *testing.T) {
	x, err := New(Config{Group: "g", StartOffset: "start", CacheSize: 100, MaxPollRecords: 10},
		Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(), Now: func() time.Time { return time.UnixMilli(1234) }})
	require.NoError(t, err)
	transfer, single, batch := evm.TopicTransfer[:], evm.TopicTransferSingle[:], evm.TopicTransferBatch[:]
	batchData := append(append(append(word(64), word(160)...), append(word(2), append(word(5), word(6)...)...)...), append(word(2), append(word(1), word(1)...)...)...)
	blk := &record.Block{ChainId: 43112, Number: 77, Transactions: []*record.Transaction{
		{Status: 1, Logs: []*record.Log{
			{Address: contract(1), Topics: [][]byte{transfer, addrTopic(0), addrTopic(2), word(7)}},         // ERC-721 mint of 7
			{Address: contract(1), Topics: [][]byte{transfer, addrTopic(2), addrTopic(3), word(7)}},         // 7 again
			{Address: contract(2), Topics: [][]byte{transfer, addrTopic(2), addrTopic(3)}, Data: word(100)}, // ERC-20
			{Address: contract(3), Topics: [][]byte{single, addrTopic(9), addrTopic(0), addrTopic(2)}, Data: append(word(4), word(10)...)},
			{Address: contract(3), Topics: [][]byte{batch, addrTopic(9), addrTopic(2), addrTopic(3)}, Data: batchData}, // ids 5, 6
		}},
		{Status: 0, Logs: []*record.Log{
			{Address: contract(1), Topics: [][]byte{transfer, addrTopic(0), addrTopic(2), word(8)}},
		}},
	}}
	records := []*kgo.Record{
		blockRecord(t, &record.ChainEvent{Event: &record.ChainEvent_Block{Block: blk}}),
		blockRecord(t, &record.ChainEvent{Event: &record.ChainEvent_Reorg{Reorg: &record.Reorg{ChainId: 43112, ForkNumber: 70}}}),
		blockRecord(t, &record.ChainEvent{Event: &record.ChainEvent_Block{Block: blk}}), // redelivered: nothing new
	}
	out := x.requests(records)
	type want struct {
		contract byte
		id       string
		standard uint32
	}
	var got []want
	for _, r := range out {
		req, err := codec.DecodeNftMetadataRequest(r.Value)
		require.NoError(t, err)
		require.Equal(t, string(codec.NftMetadataKey(req.ChainId, req.Contract, req.TokenId)), string(r.Key))
		require.Equal(t, uint64(77), req.SeenBlock)
		require.Equal(t, record.NftMetadataRequest_REASON_DISCOVERED, req.Reason)
		require.Equal(t, int64(1234), req.RequestedAtUnixMs)
		require.Equal(t, uint32(1), req.Attempt)
		got = append(got, want{req.Contract[0], req.TokenId, req.Standard})
	}
	require.Equal(t, []want{{1, "7", 721}, {3, "4", 1155}, {3, "5", 1155}, {3, "6", 1155}}, got)
	require.Equal(t, 1.0, testutil.ToFloat64(x.produced.WithLabelValues("721")))
	require.Equal(t, 3.0, testutil.ToFloat64(x.produced.WithLabelValues("1155")))
}

func TestRecentIsBounded(t *testing.T) {
	s := newRecent(2)
	a, b, c := refOf(1), refOf(2), refOf(3)
	require.True(t, s.add(a))
	require.True(t, s.add(b))
	require.False(t, s.add(a)) // a is now the most recent
	require.True(t, s.add(c))  // b goes
	require.True(t, s.add(b))
	require.Equal(t, 2, s.lru.Len())
}

func refOf(n int64) nftmeta.Ref { return nftmeta.Ref{ChainID: 1, TokenID: big.NewInt(n).String()} }
