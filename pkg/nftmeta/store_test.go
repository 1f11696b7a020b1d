package nftmeta_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/pkg/testenv"
)

func addr(b byte) evm.Address {
	var a evm.Address
	a[0], a[19] = b, 0x27 // a quote byte: contracts are raw bytes
	return a
}

// TestStoreIntegration writes rows and reindex requests to ClickHouse 18.16
// and reads them back: the newest row of each NFT wins, refs of other
// contracts, tokens or chains stay apart, and a ref without a row is absent.
func TestStoreIntegration(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	s := nftmeta.NewStore(10 * time.Second)
	s.SetConn(conn)
	ctx := t.Context()
	a, b := addr(1), addr(2)
	at := time.UnixMilli(1_700_000_000_123).UTC()
	three := 3
	rows := []nftmeta.Row{
		{Ref: nftmeta.Ref{ChainID: 43112, Contract: a, TokenID: "1"}, Standard: 721, Attempt: 1, Version: 1,
			Metadata:    nftmeta.Metadata{TokenURI: "ipfs://x/1", IndexStatus: nftmeta.StatusThrottledTokenURI, LastUpdated: at},
			NextAttempt: at.Add(time.Minute), Error: "HTTP 429"},
		{Ref: nftmeta.Ref{ChainID: 43112, Contract: a, TokenID: "1"}, Standard: 721, Attempt: 2, Version: 2,
			Metadata: nftmeta.Metadata{TokenURI: "ipfs://x/1", IndexStatus: nftmeta.StatusIndexed, LastUpdated: at.Add(time.Minute),
				Name: "One", Attributes: `[{"trait_type":"a","value":1}]`}},
		{Ref: nftmeta.Ref{ChainID: 43112, Contract: b, TokenID: "1"}, Standard: 1155, Attempt: 1, Version: 1,
			Metadata: nftmeta.Metadata{TokenURI: "data:,{}", IndexStatus: nftmeta.StatusInvalidMetadata, LastUpdated: at, Decimals: &three}},
		{Ref: nftmeta.Ref{ChainID: 1, Contract: a, TokenID: "2"}, Version: 1,
			Metadata: nftmeta.Metadata{IndexStatus: nftmeta.StatusMissingToken, LastUpdated: at}},
	}
	require.NoError(t, s.Insert(ctx, rows))
	got, err := s.Rows(ctx, []nftmeta.Ref{
		{ChainID: 43112, Contract: a, TokenID: "1"},
		{ChainID: 43112, Contract: b, TokenID: "1"},
		{ChainID: 43112, Contract: a, TokenID: "2"}, // a's token 2 is on chain 1 only
		{ChainID: 1, Contract: a, TokenID: "2"},
	})
	require.NoError(t, err)
	require.Len(t, got, 3)
	one := got[nftmeta.Ref{ChainID: 43112, Contract: a, TokenID: "1"}]
	require.Equal(t, nftmeta.StatusIndexed, one.IndexStatus)
	require.Equal(t, "One", one.Name)
	require.Equal(t, at.Add(time.Minute), one.LastUpdated)
	require.True(t, one.NextAttempt.IsZero())
	require.Nil(t, one.Decimals)
	require.Equal(t, uint8(2), one.Attempt)
	bRow := got[nftmeta.Ref{ChainID: 43112, Contract: b, TokenID: "1"}]
	require.Equal(t, 3, *bRow.Decimals)
	require.Equal(t, uint16(1155), bRow.Standard)

	r := nftmeta.NewReader(10 * time.Second)
	r.SetConn(conn)
	md, err := r.Lookup(ctx, []nftmeta.Ref{{ChainID: 43112, Contract: a, TokenID: "1"}, {ChainID: 43112, Contract: a, TokenID: "9"}})
	require.NoError(t, err)
	require.Len(t, md, 1)
	require.Equal(t, `[{"trait_type":"a","value":1}]`, md[nftmeta.Ref{ChainID: 43112, Contract: a, TokenID: "1"}].Attributes)

	ref := nftmeta.Ref{ChainID: 43112, Contract: a, TokenID: "1"}
	last, err := s.LastReindex(ctx, ref)
	require.NoError(t, err)
	require.True(t, last.IsZero())
	require.NoError(t, s.RecordReindex(ctx, ref, at))
	require.NoError(t, s.RecordReindex(ctx, ref, at.Add(time.Hour)))
	last, err = s.LastReindex(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, at.Add(time.Hour), last)
}

func TestStoreUnavailableBeforeConn(t *testing.T) {
	_, err := nftmeta.NewReader(0).Lookup(context.Background(), []nftmeta.Ref{{ChainID: 1, TokenID: "1"}})
	require.ErrorIs(t, err, nftmeta.ErrUnavailable)
}

func TestParseTokenID(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "007": "7", "145": "145",
		"115792089237316195423570985008687907853269984665640564039457584007913129639935": "115792089237316195423570985008687907853269984665640564039457584007913129639935"} {
		got, ok := nftmeta.ParseTokenID(in)
		require.True(t, ok, in)
		require.Equal(t, want, got)
	}
	for _, bad := range []string{"", "-1", "0x1", "1.0", " 1", "115792089237316195423570985008687907853269984665640564039457584007913129639936"} {
		_, ok := nftmeta.ParseTokenID(bad)
		require.False(t, ok, bad)
	}
	require.Equal(t, "256", nftmeta.TokenIDFromWord([]byte{1, 0}))
}
