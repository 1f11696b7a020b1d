package nftworker

import (
	"math/big"
	"time"

	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/pkg/tokenmeta"
	"github.com/moraine-data/moraine/processor/internal/nftfetch"
	"github.com/moraine-data/moraine/schemas/record"
)

// request is one decoded request with what the worker derives from it.
type request struct {
	*record.NftMetadataRequest
	ref nftmeta.Ref
	id  *big.Int
}

func (r request) reindexedAt() time.Time {
	if r.Reason != record.NftMetadataRequest_REASON_REINDEX {
		return time.Time{}
	}
	return time.UnixMilli(r.RequestedAtUnixMs).UTC()
}

// due decides whether req is to be fetched, given the stored row of its
// NFT (nil: none). The rules keep every request idempotent, so a
// redelivered or repeated request costs a ClickHouse read, not a fetch:
//
//   - a first attempt of a discovered NFT: only when nothing is stored;
//   - a first attempt of a reindex: unless a reindex was fetched within
//     nftmeta.ReindexInterval before the request (the same request
//     redelivered, or two API instances racing);
//   - a retry (attempt n > 1): only while the stored row is attempt n-1 of
//     the same sequence (same reindex request, or the discovered one) and
//     still waits for it; anything newer (a reindex meanwhile) supersedes it.
func due(req request, row *nftmeta.Row) bool {
	reindex := req.Reason == record.NftMetadataRequest_REASON_REINDEX
	if req.Attempt <= 1 {
		switch {
		case row == nil:
			return true
		case !reindex:
			return false
		case row.Reindexed.IsZero():
			return true
		}
		return req.reindexedAt().Sub(row.Reindexed) >= nftmeta.ReindexInterval
	}
	return row != nil && uint32(row.Attempt) == req.Attempt-1 && !row.NextAttempt.IsZero() && row.Reindexed.Equal(req.reindexedAt())
}

// outcome is what one attempt ended with: the row to store (nil for a
// deferral, which stores nothing) and whether (and at which level) to
// retry.
type outcome struct {
	row *nftmeta.Row
	// retryLevel is the retry topic to produce the next attempt to (1..):
	// 0 means no retry.
	retryLevel int
	next       *record.NftMetadataRequest
	// result is the metric label: the stored status, or "deferred".
	result string
}

// attempt combines the node's answer and the fetch into the outcome of
// attempt req.Attempt. prev is the stored row (nil: none), head the block
// the node answered at, now the attempt's end, schedule the retry waits.
func attempt(req request, prev *nftmeta.Row, head uint64, uri tokenmeta.URIResult, fetched *nftfetch.Result, now time.Time, schedule []time.Duration) outcome {
	row := &nftmeta.Row{Ref: req.ref, Standard: uint16(req.Standard), Attempt: uint8(min(req.Attempt, 255)), Reindexed: req.reindexedAt()}
	if uri.Standard != 0 {
		row.Standard = uri.Standard
	}
	row.LastUpdated = now
	transient := false
	switch uri.Outcome {
	case tokenmeta.URIAnswered:
		row.TokenURI = uri.URI
		switch {
		case fetched == nil:
			// Not fetched (a programming error guard): treat as unavailable.
			transient = true
		case fetched.Deferred:
			// The host was busy: nothing happened, no attempt is spent.
			next := retryOf(req, req.Attempt, now.Add(schedule[0]))
			return outcome{retryLevel: 1, next: next, result: "deferred"}
		default:
			row.IndexStatus = fetched.Status
			row.Error = fetched.Detail
			d := fetched.Doc
			row.Name, row.Symbol, row.Description, row.ImageURI, row.AnimationURI, row.ExternalURL, row.Background =
				d.Name, d.Symbol, d.Description, d.ImageURI, d.AnimationURI, d.ExternalURL, d.Background
			row.Attributes, row.Properties, row.Decimals = d.Attributes, d.Properties, d.Decimals
			transient = fetched.Retry
		}
	case tokenmeta.URIReverted:
		if head < req.SeenBlock {
			// The node has not reached the block that showed the token.
			transient, row.Error = true, "the node's head is below the token's block: "+uri.Detail
			break
		}
		row.IndexStatus, row.Error = nftmeta.StatusMissingToken, uri.Detail
	case tokenmeta.URIFailed:
		row.IndexStatus, row.Error = nftmeta.StatusUnknown, uri.Detail
	case tokenmeta.URINotString:
		row.IndexStatus, row.Error = nftmeta.StatusInvalidTokenURI, "the call returned data that is not a string"
	case tokenmeta.URITooLong:
		row.IndexStatus, row.Error = nftmeta.StatusMetadataContentTooLarge, "the token URI is longer than a document may be"
	default: // URIUnavailable
		transient, row.Error = true, "node: "+uri.Detail
	}
	if row.IndexStatus == "" {
		// The node did not answer: nothing new is known of the token. Keep
		// what was stored (a reindex of an indexed token keeps its
		// document), or UNINDEXED; at the last attempt, UNKNOWN.
		if prev != nil && prev.IndexStatus != nftmeta.StatusUnindexed {
			row.Metadata = prev.Metadata
		} else {
			row.IndexStatus, row.LastUpdated = nftmeta.StatusUnindexed, time.Time{}
		}
	}
	out := outcome{row: row}
	if transient && int(req.Attempt) <= len(schedule) {
		row.NextAttempt = now.Add(schedule[req.Attempt-1])
		out.retryLevel = int(req.Attempt)
		out.next = retryOf(req, req.Attempt+1, row.NextAttempt)
	} else if transient && row.IndexStatus == nftmeta.StatusUnindexed {
		row.IndexStatus, row.LastUpdated = nftmeta.StatusUnknown, now
	}
	out.result = row.IndexStatus
	return out
}

// retryOf is req again, as attempt n due at due.
func retryOf(req request, n uint32, due time.Time) *record.NftMetadataRequest {
	return &record.NftMetadataRequest{ChainId: req.ChainId, Contract: req.Contract, TokenId: req.TokenId, Standard: req.Standard,
		SeenBlock: req.SeenBlock, Reason: req.Reason, RequestedAtUnixMs: req.RequestedAtUnixMs, Attempt: n, DueUnixMs: due.UnixMilli()}
}
