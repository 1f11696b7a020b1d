// Package nftreindex accepts the Data API's reindexNft requests (POST
// /v1/chains/{chainId}/nfts/collections/{address}/tokens/{tokenId}:reindex)
// for the query service: at most one per NFT per nftmeta.ReindexInterval
// (an hour, "once per hour for each NFT token"), on every query instance
// and across their restarts, and each accepted one as a REINDEX request on
// the moraine.nft-metadata topic, which the processor's metadata worker
// fetches (processor/internal/nftworker).
//
// The hour is kept in ClickHouse (nft_reindex_requests, migration 11): a
// request is refused (TooSoonError) while the last accepted one is less
// than an hour old. An accepted request is produced first (acks=all), then
// recorded; if recording fails the client gets an error and may ask again,
// and the worker, which skips a reindex that reaches it within the hour of
// the last one it fetched, still fetches once. Two instances accepting the
// same NFT in the same instant both produce; the worker fetches once.
//
// What stays with the caller: validating the route's parameters, and the
// HTTP answer (201; 429 with Retry-After for TooSoonError; 503 for
// ErrUnavailable).
//
// Metrics:
//
//	moraine_query_nft_reindex_requests_total{result}   accepted, too_soon, unavailable
package nftreindex

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/moraine-data/moraine/pkg/kafkautil"
	"github.com/moraine-data/moraine/pkg/nftmeta"
	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/schemas/codec"
	"github.com/moraine-data/moraine/schemas/record"
	"github.com/moraine-data/moraine/schemas/topics"
)

// ErrUnavailable means ClickHouse or Kafka cannot take the request right now.
var ErrUnavailable = errors.New("nftreindex: unavailable")

// TooSoonError refuses a request within the hour of the last accepted one.
type TooSoonError struct {
	// Last is when the last request was accepted; Next when one may be.
	Last, Next time.Time
}

func (e *TooSoonError) Error() string {
	return fmt.Sprintf("nftreindex: reindexed at %s, again from %s", e.Last.Format(time.RFC3339), e.Next.Format(time.RFC3339))
}

// Deps are the service's collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Kafka      kafkautil.Config
	// Timeout bounds each request's reads and writes (5 s when 0).
	Timeout time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Service accepts reindex requests.
type Service struct {
	d      Deps
	logger *slog.Logger
	store  *nftmeta.Store
	cl     atomic.Pointer[kgo.Client]
	result *prometheus.CounterVec
	// mu serialises this instance's requests, so that two of its own for
	// one NFT cannot both pass the check.
	mu sync.Mutex
}

// New allocates the service; it does no I/O. Run connects to Kafka, SetConn
// gives it ClickHouse; until both, requests fail with ErrUnavailable.
func New(d Deps) (*Service, error) {
	if d.Logger == nil || d.Registerer == nil {
		return nil, errors.New("nftreindex: Deps.Logger and Deps.Registerer are required")
	}
	if d.Timeout <= 0 {
		d.Timeout = 5 * time.Second
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	s := &Service{d: d, logger: d.Logger.With("component", "nftreindex"), store: nftmeta.NewStore(d.Timeout),
		result: obs.NewMetrics(d.Registerer, "query").CounterVec("nft_reindex_requests_total",
			"reindexNft requests by result: accepted, too_soon (within the hour of the last), unavailable.", "result")}
	for _, r := range []string{"accepted", "too_soon", "unavailable"} {
		s.result.WithLabelValues(r)
	}
	return s, nil
}

// SetConn hands the service its ClickHouse connection.
func (s *Service) SetConn(conn driver.Conn) { s.store.SetConn(conn) }

// Run keeps a producer of the metadata topic until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	k := s.d.Kafka
	cl, err := kafkautil.NewClient(ctx, s.logger, append(k.ProducerOpts(s.logger, "moraine-query-nft-reindex"),
		kgo.DefaultProduceTopic(k.Topic(topics.NftMetadata)),
		// A request waits at most its own deadline for the broker.
		kgo.RecordDeliveryTimeout(s.d.Timeout))...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	s.cl.Store(cl)
	<-ctx.Done()
	s.cl.Store(nil)
	cl.Close()
	return nil
}

// Ready reports whether the service has its Kafka producer (readiness: an
// instance that cannot accept reindexNft requests is not ready).
func (s *Service) Ready(context.Context) error {
	if s.cl.Load() == nil {
		return errors.New("nftreindex: kafka producer not connected yet")
	}
	return nil
}

// Reindex accepts a reindex of ref, or refuses it (*TooSoonError), or fails
// with ErrUnavailable.
func (s *Service) Reindex(ctx context.Context, ref nftmeta.Ref) error {
	err := s.reindex(ctx, ref)
	var tooSoon *TooSoonError
	switch {
	case err == nil:
		s.result.WithLabelValues("accepted").Inc()
	case errors.As(err, &tooSoon):
		s.result.WithLabelValues("too_soon").Inc()
	default:
		s.result.WithLabelValues("unavailable").Inc()
		s.logger.Warn("reindexNft request failed", "chain_id", ref.ChainID, "contract", ref.Contract.Hex(), "token_id", ref.TokenID, "err", err)
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

func (s *Service) reindex(ctx context.Context, ref nftmeta.Ref) error {
	ctx, cancel := context.WithTimeout(ctx, s.d.Timeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.d.Now()
	last, err := s.store.LastReindex(ctx, ref)
	if err != nil {
		return err
	}
	if !last.IsZero() && now.Sub(last) < nftmeta.ReindexInterval {
		return &TooSoonError{Last: last, Next: last.Add(nftmeta.ReindexInterval)}
	}
	cl := s.cl.Load()
	if cl == nil {
		return errors.New("kafka not connected yet")
	}
	req := &record.NftMetadataRequest{ChainId: ref.ChainID, Contract: ref.Contract[:], TokenId: ref.TokenID,
		Reason: record.NftMetadataRequest_REASON_REINDEX, RequestedAtUnixMs: now.UnixMilli(), Attempt: 1}
	val, err := codec.EncodeNftMetadataRequest(req)
	if err != nil {
		return err
	}
	rec := &kgo.Record{Key: codec.NftMetadataKey(ref.ChainID, ref.Contract[:], ref.TokenID), Value: val,
		Headers: []kgo.RecordHeader{{Key: codec.SchemaHeader, Value: []byte(codec.NftMetadataRequestSchema)}}}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("produce the request: %w", err)
	}
	return s.store.RecordReindex(ctx, ref, time.UnixMilli(now.UnixMilli()))
}
