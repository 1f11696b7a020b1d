package nftmeta

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/evm"
)

// ErrUnavailable means ClickHouse cannot answer right now (not connected yet, or
// an outage: chclient.Unavailable).
var ErrUnavailable = errors.New("nftmeta: clickhouse unavailable")

// Row is one stored fetch of an NFT's metadata (table nft_metadata,
// migration 11): what the API renders (Metadata) and what the metadata
// worker keeps of its own work.
type Row struct {
	Ref
	Metadata
	// Standard is 721, 1155, or 0 when unknown.
	Standard uint16
	// Attempt is the attempt this row records (1 for the first).
	Attempt uint8
	// NextAttempt is when the worker retries (zero: the status is final).
	NextAttempt time.Time
	// Reindexed is when the reindexNft request whose fetches this row
	// records was accepted (zero: the fetches of a discovered token).
	Reindexed time.Time
	// Error is the failure's detail for operators; never served.
	Error string
	// Version orders the rows of one NFT (a nanosecond clock).
	Version uint64
}

// SQL of the package. Contracts are FixedString(20) raw bytes, bound as hex
// through unhex; sets of them as an array of hex strings (a Go slice binds
// as an Array literal) expanded by arrayJoin, which the primary key uses as
// an IN set.
const (
	iMetadata = `INSERT INTO nft_metadata (chain_id, contract, token_id, standard, token_uri, status, fetched_at,
 name, symbol, description, image_uri, animation_uri, external_url, background, attributes, properties, decimals,
 attempt, next_attempt_at, reindexed_at, error, version)`

	// qMetadata reads the newest row of each (contract, token_id) among the
	// pairs of the two sets; the caller keeps the pairs it asked for.
	qMetadata = `SELECT contract, token_id, standard, token_uri, status, fetched_at,
 name, symbol, description, image_uri, animation_uri, external_url, background, attributes, properties, decimals,
 attempt, next_attempt_at, reindexed_at, error, version
FROM nft_metadata FINAL
WHERE chain_id = ? AND contract IN (SELECT toFixedString(unhex(arrayJoin(?)), 20)) AND token_id IN (SELECT arrayJoin(?))`

	iReindex = `INSERT INTO nft_reindex_requests (chain_id, contract, token_id, requested_at)`

	qLastReindex = `SELECT max(requested_at) FROM nft_reindex_requests
WHERE chain_id = ? AND contract = unhex(?) AND token_id = ?`
)

// Store reads and writes the NFT metadata tables. Its connection may be set
// after construction (SetConn), so a server can listen before ClickHouse
// answers; until then every call fails with ErrUnavailable.
type Store struct {
	timeout time.Duration
	conn    chclient.Lazy
}

// NewStore returns a store whose statements each get timeout (5 s when 0).
// It does no I/O.
func NewStore(timeout time.Duration) *Store {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &Store{timeout: timeout}
}

// SetConn hands the store its connection.
func (s *Store) SetConn(conn driver.Conn) { s.conn.Set(conn) }

func classify(err error, name string) error {
	return chclient.Classify(err, ErrUnavailable, "nftmeta", name)
}

// Rows returns the newest stored row of each ref of one chain that has one.
func (s *Store) Rows(ctx context.Context, refs []Ref) (map[Ref]Row, error) {
	out := make(map[Ref]Row, len(refs))
	byChain := map[uint64][]Ref{}
	for _, r := range refs {
		byChain[r.ChainID] = append(byChain[r.ChainID], r)
	}
	for chain, refs := range byChain {
		if err := s.rowsOfChain(ctx, chain, refs, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Store) rowsOfChain(ctx context.Context, chain uint64, refs []Ref, out map[Ref]Row) error {
	conn, err := s.conn.Get(ErrUnavailable)
	if err != nil {
		return err
	}
	want := make(map[Ref]bool, len(refs))
	contracts, tokens := []string{}, []string{}
	seenC, seenT := map[evm.Address]bool{}, map[string]bool{}
	for _, r := range refs {
		want[r] = true
		if !seenC[r.Contract] {
			seenC[r.Contract] = true
			contracts = append(contracts, hex.EncodeToString(r.Contract[:]))
		}
		if !seenT[r.TokenID] {
			seenT[r.TokenID] = true
			tokens = append(tokens, r.TokenID)
		}
	}
	ctx, cancel := chclient.WithTimeout(ctx, s.timeout, clickhouse.Settings{"max_threads": 1})
	defer cancel()
	rows, err := conn.Query(ctx, qMetadata, chain, contracts, tokens)
	if err != nil {
		return classify(err, "read metadata")
	}
	defer rows.Close()
	for rows.Next() {
		var (
			row                      Row
			contract                 string
			fetched, next, reindexed uint64
			decimals                 int16
		)
		row.ChainID = chain
		if err := rows.Scan(&contract, &row.TokenID, &row.Standard, &row.TokenURI, &row.IndexStatus, &fetched,
			&row.Name, &row.Symbol, &row.Description, &row.ImageURI, &row.AnimationURI, &row.ExternalURL, &row.Background,
			&row.Attributes, &row.Properties, &decimals, &row.Attempt, &next, &reindexed, &row.Error, &row.Version); err != nil {
			return classify(err, "read metadata")
		}
		copy(row.Contract[:], contract)
		if !want[row.Ref] {
			continue
		}
		row.LastUpdated, row.NextAttempt, row.Reindexed = fromMillis(fetched), fromMillis(next), fromMillis(reindexed)
		if decimals >= 0 {
			d := int(decimals)
			row.Decimals = &d
		}
		out[row.Ref] = row
	}
	if err := rows.Err(); err != nil {
		return classify(err, "read metadata")
	}
	return nil
}

// Insert writes rows (one insert).
func (s *Store) Insert(ctx context.Context, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	conn, err := s.conn.Get(ErrUnavailable)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	batch, err := conn.PrepareBatch(ctx, iMetadata)
	if err != nil {
		return classify(err, "insert metadata")
	}
	defer batch.Abort()
	for _, r := range rows {
		decimals := int16(-1)
		if r.Decimals != nil {
			decimals = int16(*r.Decimals)
		}
		if err := batch.Append(r.ChainID, string(r.Contract[:]), r.TokenID, r.Standard, r.TokenURI, r.IndexStatus,
			millis(r.LastUpdated), r.Name, r.Symbol, r.Description, r.ImageURI, r.AnimationURI, r.ExternalURL, r.Background,
			r.Attributes, r.Properties, decimals, r.Attempt, millis(r.NextAttempt), millis(r.Reindexed), r.Error, r.Version); err != nil {
			return fmt.Errorf("nftmeta: insert metadata: %w", err)
		}
	}
	if err := batch.Send(); err != nil {
		return classify(err, "insert metadata")
	}
	return nil
}

// LastReindex returns when the newest reindexNft request of ref was
// accepted (zero: never).
func (s *Store) LastReindex(ctx context.Context, ref Ref) (time.Time, error) {
	conn, err := s.conn.Get(ErrUnavailable)
	if err != nil {
		return time.Time{}, err
	}
	ctx, cancel := chclient.WithTimeout(ctx, s.timeout, nil)
	defer cancel()
	var at uint64
	if err := conn.QueryRow(ctx, qLastReindex, ref.ChainID, hex.EncodeToString(ref.Contract[:]), ref.TokenID).Scan(&at); err != nil {
		return time.Time{}, classify(err, "read reindex request")
	}
	return fromMillis(at), nil
}

// RecordReindex stores that a reindexNft request of ref was accepted at at.
func (s *Store) RecordReindex(ctx context.Context, ref Ref, at time.Time) error {
	conn, err := s.conn.Get(ErrUnavailable)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	batch, err := conn.PrepareBatch(ctx, iReindex)
	if err != nil {
		return classify(err, "record reindex request")
	}
	defer batch.Abort()
	if err := batch.Append(ref.ChainID, string(ref.Contract[:]), ref.TokenID, millis(at)); err != nil {
		return fmt.Errorf("nftmeta: record reindex request: %w", err)
	}
	if err := batch.Send(); err != nil {
		return classify(err, "record reindex request")
	}
	return nil
}

func millis(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixMilli())
}

func fromMillis(ms uint64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(ms)).UTC()
}
