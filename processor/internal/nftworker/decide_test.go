package nftworker

import (
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/processor/internal/nftfetch"
	"github.com/moraine-data/moraine/schemas/record"
)

var t0 = time.UnixMilli(1_700_000_000_000).UTC()

func req(reason record.NftMetadataRequest_Reason, attempt uint32, requestedAt time.Time) request {
	r := &record.NftMetadataRequest{ChainId: 1, Contract: make([]byte, 20), TokenId: "7", Standard: 721, SeenBlock: 100,
		Reason: reason, RequestedAtUnixMs: requestedAt.UnixMilli(), Attempt: attempt}
	return request{NftMetadataRequest: r, ref: nftmeta.Ref{ChainID: 1, TokenID: "7"}, id: big.NewInt(7)}
}

func TestDue(t *testing.T) {
	disc, reindex := record.NftMetadataRequest_REASON_DISCOVERED, record.NftMetadataRequest_REASON_REINDEX
	stored := func(attempt uint8, next time.Time, reindexed time.Time) *nftmeta.Row {
		return &nftmeta.Row{Attempt: attempt, NextAttempt: next, Reindexed: reindexed, Metadata: nftmeta.Metadata{IndexStatus: nftmeta.StatusIndexed}}
	}
	for _, tc := range []struct {
		name string
		req  request
		row  *nftmeta.Row
		want bool
	}{
		{"discovered, nothing stored", req(disc, 1, t0), nil, true},
		{"discovered, stored (a repeat or a redelivery)", req(disc, 1, t0), stored(1, time.Time{}, time.Time{}), false},
		{"reindex, never reindexed", req(reindex, 1, t0), stored(1, time.Time{}, time.Time{}), true},
		{"reindex, nothing stored", req(reindex, 1, t0), nil, true},
		{"reindex redelivered", req(reindex, 1, t0), stored(1, time.Time{}, t0), false},
		{"reindex within the hour of the last", req(reindex, 1, t0.Add(59*time.Minute)), stored(1, time.Time{}, t0), false},
		{"reindex an hour after the last", req(reindex, 1, t0.Add(time.Hour)), stored(1, time.Time{}, t0), true},
		{"retry awaited", req(disc, 3, t0), stored(2, t0.Add(time.Minute), time.Time{}), true},
		{"retry of an older attempt", req(disc, 2, t0), stored(2, t0.Add(time.Minute), time.Time{}), false},
		{"retry after the final attempt", req(disc, 3, t0), stored(2, time.Time{}, time.Time{}), false},
		{"retry of a discovery superseded by a reindex", req(disc, 3, t0), stored(2, t0.Add(time.Minute), t0), false},
		{"retry of the reindex that is stored", req(reindex, 2, t0), stored(1, t0.Add(time.Minute), t0), true},
		{"retry of an older reindex", req(reindex, 2, t0), stored(1, t0.Add(time.Minute), t0.Add(2*time.Hour)), false},
		{"retry without a row", req(disc, 2, t0), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, due(tc.req, tc.row)) })
	}
}

func TestAttempt(t *testing.T) {
	schedule := []time.Duration{time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour}
	disc := record.NftMetadataRequest_REASON_DISCOVERED
	answered := tokenmeta.URIResult{Outcome: tokenmeta.URIAnswered, URI: "https://x.example/7.json", Standard: 721}
	indexed := &nftfetch.Result{Status: nftmeta.StatusIndexed, Doc: nftfetch.Document{Name: "seven"}}
	throttled := &nftfetch.Result{Status: nftmeta.StatusThrottledTokenURI, Retry: true, Detail: "HTTP 429"}
	unavailable := tokenmeta.URIResult{Outcome: tokenmeta.URIUnavailable, Detail: "missing trie node"}
	prevIndexed := &nftmeta.Row{Metadata: nftmeta.Metadata{IndexStatus: nftmeta.StatusIndexed, Name: "old", TokenURI: "u", LastUpdated: t0.Add(-time.Hour)}}

	o := attempt(req(disc, 1, t0), nil, 200, answered, indexed, t0, schedule)
	require.Equal(t, nftmeta.StatusIndexed, o.row.IndexStatus)
	require.Equal(t, "seven", o.row.Name)
	require.Equal(t, answered.URI, o.row.TokenURI)
	require.Nil(t, o.next)
	require.True(t, o.row.NextAttempt.IsZero())
	require.Equal(t, t0, o.row.LastUpdated)

	// A transient failure: the next attempt on level n, due after the n-th wait.
	o = attempt(req(disc, 2, t0), nil, 200, answered, throttled, t0, schedule)
	require.Equal(t, nftmeta.StatusThrottledTokenURI, o.row.IndexStatus)
	require.Equal(t, 2, o.retryLevel)
	require.Equal(t, uint32(3), o.next.Attempt)
	require.Equal(t, t0.Add(10*time.Minute).UnixMilli(), o.next.DueUnixMs)
	require.Equal(t, t0.Add(10*time.Minute), o.row.NextAttempt)
	// The last attempt: the status stays, no retry.
	o = attempt(req(disc, 5, t0), nil, 200, answered, throttled, t0, schedule)
	require.Equal(t, nftmeta.StatusThrottledTokenURI, o.row.IndexStatus)
	require.Nil(t, o.next)
	require.True(t, o.row.NextAttempt.IsZero())

	// A busy host: nothing stored, the same attempt parked on level 1.
	o = attempt(req(disc, 2, t0), nil, 200, answered, &nftfetch.Result{Deferred: true}, t0, schedule)
	require.Nil(t, o.row)
	require.Equal(t, 1, o.retryLevel)
	require.Equal(t, uint32(2), o.next.Attempt)
	require.Equal(t, "deferred", o.result)

	// The node failed: nothing new is known. UNINDEXED while retried,
	// UNKNOWN after the last attempt; a stored document is kept.
	o = attempt(req(disc, 1, t0), nil, 0, unavailable, nil, t0, schedule)
	require.Equal(t, nftmeta.StatusUnindexed, o.row.IndexStatus)
	require.True(t, o.row.LastUpdated.IsZero())
	require.NotNil(t, o.next)
	o = attempt(req(disc, 5, t0), nil, 0, unavailable, nil, t0, schedule)
	require.Equal(t, nftmeta.StatusUnknown, o.row.IndexStatus)
	require.Nil(t, o.next)
	o = attempt(req(record.NftMetadataRequest_REASON_REINDEX, 1, t0), prevIndexed, 0, unavailable, nil, t0, schedule)
	require.Equal(t, nftmeta.StatusIndexed, o.row.IndexStatus)
	require.Equal(t, "old", o.row.Name)
	require.Equal(t, prevIndexed.LastUpdated, o.row.LastUpdated)
	require.Equal(t, t0, o.row.Reindexed)
	require.NotNil(t, o.next)

	// A revert from a node that has not reached the token's block is not believed.
	reverted := tokenmeta.URIResult{Outcome: tokenmeta.URIReverted, Standard: 721}
	o = attempt(req(disc, 1, t0), nil, 99, reverted, nil, t0, schedule)
	require.Equal(t, nftmeta.StatusUnindexed, o.row.IndexStatus)
	require.NotNil(t, o.next)
	o = attempt(req(disc, 1, t0), nil, 100, reverted, nil, t0, schedule)
	require.Equal(t, nftmeta.StatusMissingToken, o.row.IndexStatus)
	require.Nil(t, o.next)

	for outcome, status := range map[tokenmeta.URIOutcome]string{
		tokenmeta.URIFailed: nftmeta.StatusUnknown, tokenmeta.URINotString: nftmeta.StatusInvalidTokenURI,
		tokenmeta.URITooLong: nftmeta.StatusMetadataContentTooLarge,
	} {
		o = attempt(req(disc, 1, t0), nil, 200, tokenmeta.URIResult{Outcome: outcome, Standard: 1155}, nil, t0, schedule)
		require.Equal(t, status, o.row.IndexStatus)
		require.Equal(t, uint16(1155), o.row.Standard)
		require.Nil(t, o.next)
	}
}
