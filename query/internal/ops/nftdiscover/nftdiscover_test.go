package nftdiscover_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/ops/nftdiscover"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

func word(n int64) string { return string(new(big.Int).SetInt64(n).FillBytes(make([]byte, 32))) }

func contract(b byte) string { a := make([]byte, 20); a[0] = b; return string(a) }

// TestDiscoverFromLogsIntegration writes transfer logs as the processor's
// sink does and checks that Run asks for each NFT once per window: ERC-721
// transfers and ERC-1155 single and batch ids, not ERC-20 transfers, not
// other events, within the block range.
func TestDiscoverFromLogsIntegration(t *testing.T) {
	k := testenv.Kafka(t)
	_, conn := testenv.ClickHouse(t)
	ctx := t.Context()
	transfer, single, batch := string(evm.TopicTransfer[:]), string(evm.TopicTransferSingle[:]), string(evm.TopicTransferBatch[:])
	approval := string(make([]byte, 32))
	batchData := word(64) + word(160) + word(2) + word(5) + word(6) + word(2) + word(1) + word(1)
	type log struct {
		block                         uint64
		address, t0, t1, t2, t3, data string
	}
	logs := []log{
		{10, contract(1), transfer, word(0), word(2), word(7), ""},               // ERC-721 7
		{11, contract(1), transfer, word(2), word(3), word(7), ""},               // 7 again
		{12, contract(2), transfer, word(2), word(3), "", word(100)},             // ERC-20
		{13, contract(3), single, word(9), word(0), word(2), word(4) + word(10)}, // ERC-1155 4
		{14, contract(3), batch, word(9), word(2), word(3), batchData},           // ERC-1155 5, 6
		{15, contract(4), approval, word(1), word(2), word(3), ""},               // another event
		{90, contract(1), transfer, word(0), word(2), word(8), ""},               // outside the range
	}
	b, err := conn.PrepareBatch(ctx, "INSERT INTO logs (chain_id, block_number, block_hash, block_timestamp, tx_index, log_index, address, topic0, topic1, topic2, topic3, data, version)")
	require.NoError(t, err)
	for i, l := range logs {
		require.NoError(t, b.Append(uint64(43112), l.block, string(make([]byte, 32)), uint64(1), uint32(0),
			uint32(i), l.address, l.t0, l.t1, l.t2, l.t3, l.data, uint64(1)))
	}
	require.NoError(t, b.Send())

	cl, err := kgo.NewClient(append(k.ProducerOpts(testenv.Logger(t), "test"), kgo.DefaultProduceTopic(k.Topic(topics.NftMetadata)))...)
	require.NoError(t, err)
	defer cl.Close()
	var progress []nftdiscover.Result
	res, err := nftdiscover.Run(ctx, conn, cl, nftdiscover.Options{ChainID: 43112, From: 0, To: 50, Window: 12,
		Progress: func(r nftdiscover.Result) { progress = append(progress, r) }})
	require.NoError(t, err)
	// Windows 0..11 (7 twice: one request), 12..23 (4, 5, 6), 24..35, 36..47, 48..50.
	require.Equal(t, nftdiscover.Result{Through: 50, Logs: 4, Requests: 4}, res, "the ERC-20 and the other event are not read")
	require.Len(t, progress, 5)

	rd, err := kgo.NewClient(append(k.BaseOpts(testenv.Logger(t), "test-reader"), kgo.ConsumeTopics(k.Topic(topics.NftMetadata)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	require.NoError(t, err)
	defer rd.Close()
	got := map[string]uint32{}
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for len(got) < 4 && pctx.Err() == nil {
		rd.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			req, err := codec.DecodeNftMetadataRequest(r.Value)
			require.NoError(t, err)
			require.Equal(t, record.NftMetadataRequest_REASON_DISCOVERED, req.Reason)
			got[string(req.Contract[:1])+"/"+req.TokenId] = req.Standard
		})
	}
	require.Equal(t, map[string]uint32{"\x01/7": 721, "\x03/4": 1155, "\x03/5": 1155, "\x03/6": 1155}, got)
}
