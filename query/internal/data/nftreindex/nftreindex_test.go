package nftreindex_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/pkg/testenv"
	"github.com/moraine-data/moraine/query/internal/data/nftreindex"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// instance starts one query instance's service on the shared Kafka and
// ClickHouse, with the clock now.
func instance(t *testing.T, k kafkautil.Config, now *time.Time) *nftreindex.Service {
	t.Helper()
	s, err := nftreindex.New(nftreindex.Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(), Kafka: k,
		Now: func() time.Time { return *now }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// TestReindexOncePerHourIntegration: on the real ClickHouse and Kafka, a
// token's reindex is accepted once an hour across query instances and
// their restarts (a new instance sees the last one's request), other
// tokens are not held back, and each accepted request is a REINDEX request
// on the metadata topic.
func TestReindexOncePerHourIntegration(t *testing.T) {
	k := testenv.Kafka(t)
	_, conn := testenv.ClickHouse(t)
	now := time.Now().Truncate(time.Millisecond).UTC()
	a := instance(t, k, &now)
	b := instance(t, k, &now)
	a.SetConn(conn)
	b.SetConn(conn)
	var contract evm.Address
	contract[19] = 7
	ref := nftmeta.Ref{ChainID: 43112, Contract: contract, TokenID: "145"}
	other := nftmeta.Ref{ChainID: 43112, Contract: contract, TokenID: "146"}

	require.Eventually(t, func() bool { return a.Reindex(t.Context(), ref) == nil }, 30*time.Second, 100*time.Millisecond,
		"the first request (once Kafka is connected)")
	accepted := now
	var tooSoon *nftreindex.TooSoonError
	require.ErrorAs(t, b.Reindex(t.Context(), ref), &tooSoon, "another instance, at once")
	require.Equal(t, accepted, tooSoon.Last)
	require.Equal(t, accepted.Add(time.Hour), tooSoon.Next)
	require.Eventually(t, func() bool { return b.Reindex(t.Context(), other) == nil }, 30*time.Second, 100*time.Millisecond, "another token")

	now = accepted.Add(59 * time.Minute)
	c := instance(t, k, &now) // a restarted instance
	c.SetConn(conn)
	require.ErrorAs(t, c.Reindex(t.Context(), ref), &tooSoon, "a restarted instance within the hour")
	now = accepted.Add(time.Hour)
	require.Eventually(t, func() bool { return c.Reindex(t.Context(), ref) == nil }, 30*time.Second, 100*time.Millisecond,
		"an hour later (once the restarted instance has its Kafka client)")

	// The accepted requests on the topic: ref at accepted and an hour
	// later, other once.
	cl, err := kgo.NewClient(append(k.BaseOpts(testenv.Logger(t), "test-reader"), kgo.ConsumeTopics(k.Topic(topics.NftMetadata)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	require.NoError(t, err)
	defer cl.Close()
	var got []*record.NftMetadataRequest
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for len(got) < 3 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			req, err := codec.DecodeNftMetadataRequest(r.Value)
			require.NoError(t, err)
			require.Equal(t, string(codec.NftMetadataKey(req.ChainId, req.Contract, req.TokenId)), string(r.Key))
			got = append(got, req)
		})
	}
	require.Len(t, got, 3)
	var times []int64
	for _, r := range got {
		require.Equal(t, record.NftMetadataRequest_REASON_REINDEX, r.Reason)
		require.Equal(t, uint32(1), r.Attempt)
		if r.TokenId == "145" {
			times = append(times, r.RequestedAtUnixMs)
		}
	}
	require.ElementsMatch(t, []int64{accepted.UnixMilli(), accepted.Add(time.Hour).UnixMilli()}, times)
}

func TestUnavailableWithoutConnections(t *testing.T) {
	now := time.Now()
	s, err := nftreindex.New(nftreindex.Deps{Logger: testenv.Logger(t), Registerer: prometheus.NewRegistry(), Now: func() time.Time { return now }})
	require.NoError(t, err)
	require.ErrorIs(t, s.Reindex(t.Context(), nftmeta.Ref{ChainID: 1, TokenID: "1"}), nftreindex.ErrUnavailable)
}
