package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/moraine-data/moraine/pkg/evm"
	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/query/internal/data/nftreindex"
	"github.com/moraine-data/moraine/query/internal/server/apierr"
)

// Reindexer accepts reindexNft requests; *nftreindex.Service implements it.
// Its errors are a *nftreindex.TooSoonError (a request within the hour of
// the last one) or wrap nftreindex.ErrUnavailable.
type Reindexer interface {
	Reindex(ctx context.Context, ref nftmeta.Ref) error
}

// msgTokenID is the 400 of a token id that is not a uint256 in decimal.
const msgTokenID = "tokenId must be a decimal number from 0 to 2^256-1"

// reindexNft: POST /v1/chains/{chainId}/nfts/collections/{address}/tokens/{tokenId}:reindex.
// 201 without a body once the request is accepted (the metadata worker
// fetches the token's metadata again shortly after); 429 with Retry-After
// within the hour of the last accepted request for the token ("Reindexing
// can only be called once per hour for each NFT token"); 503 when it cannot
// be accepted now. Any token of any address is accepted: one the contract
// does not have ends as MISSING_TOKEN.
func (h *handlers) reindexNft(c *gin.Context) {
	p := &params{c: c}
	chainID := p.chainID()
	addr := p.address()
	tokenID, ok := nftmeta.ParseTokenID(c.Param("tokenId"))
	if !ok {
		p.fail(msgTokenID)
	}
	if !p.valid() {
		return
	}
	ch, ok := h.resolveChain(c, chainID)
	if !ok {
		return
	}
	err := h.reindex.Reindex(c.Request.Context(), nftmeta.Ref{ChainID: ch.ID(), Contract: evm.Address(addr), TokenID: tokenID})
	var tooSoon *nftreindex.TooSoonError
	switch {
	case err == nil:
		c.Status(http.StatusCreated)
	case errors.As(err, &tooSoon):
		wait := max(1, int64(math.Ceil(time.Until(tooSoon.Next).Seconds())))
		c.Header("Retry-After", strconv.FormatInt(wait, 10))
		apierr.Write(c, apierr.New(http.StatusTooManyRequests, fmt.Sprintf(
			"Reindexing can only be called once per hour for each NFT token: token %s of %s was reindexed at %s; try again after %s",
			tokenID, checksumAddress(addr[:]), tooSoon.Last.UTC().Format(time.RFC3339), tooSoon.Next.UTC().Format(time.RFC3339))))
	default:
		apierr.Write(c, apierr.Unavailable("NFT reindexing is temporarily unavailable", err))
	}
}
