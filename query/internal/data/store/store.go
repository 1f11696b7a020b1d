// Package store reads blocks, transactions and chain heads from ClickHouse
// for the query API.
//
// Guarantees: only canonical rows are returned (FINAL + removed = 0, child
// rows joined through the canonical block hash); every query runs under a
// deadline (Config.QueryTimeout, also sent to the server as
// max_execution_time) and a LIMIT; list reads are bounded number ranges
// below a cursor, never a scan of the chain.
//
// Errors: ErrNotFound for a well-formed key with no canonical row;
// errors wrapping ErrUnavailable when ClickHouse cannot answer (not
// connected yet, unreachable, timed out, overloaded); anything else is a
// bug (a server exception about the query itself).
//
// What stays with the caller: resolving chain ids, page tokens, and the
// JSON shapes.
package store

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/obs"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

var (
	// ErrNotFound: no canonical row for the key.
	ErrNotFound = errors.New("store: not found")
	// ErrUnavailable: ClickHouse cannot answer right now.
	ErrUnavailable = errors.New("store: clickhouse unavailable")
)

// Config tunes the reads.
type Config struct {
	// QueryTimeout bounds every query (client deadline and server-side
	// max_execution_time).
	QueryTimeout time.Duration
	// HeadCacheTTL is how long the chain heads, and the results of Blocks,
	// are reused before they are read again; it bounds how stale the first
	// page of a list can be. 0 disables both caches.
	HeadCacheTTL time.Duration
	// MaxBlockTxs caps the transactions read for one block (pageSize=0).
	MaxBlockTxs int
	// AddressScanRows is the row budget of reading an address list's whole
	// remaining range at once; an address with more rows there is read in
	// windows of blocks (history.go).
	AddressScanRows int
	// LatestScanBlocks bounds the blocks one page of latest transactions
	// looks at (a status filter that rarely matches would otherwise read
	// the chain to its start).
	LatestScanBlocks int
	// ReorgWindow is how deep below the indexed head a block may still be
	// replaced by a reorg; rows of deeper blocks are served without reading
	// their block (settled.go). At least ingest's --ingest.reorg-window.
	ReorgWindow int
	// PointReadConcurrency is the most reads of one kind of point lookup
	// (a block by number, a block's transactions, a transaction by hash)
	// running at once; requests beyond it wait and are read together by the
	// next one (coalesce.go).
	PointReadConcurrency int
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config {
	return Config{QueryTimeout: 5 * time.Second, HeadCacheTTL: 200 * time.Millisecond, MaxBlockTxs: 50000,
		AddressScanRows: 16384, LatestScanBlocks: 10000, ReorgWindow: 1024, PointReadConcurrency: 4}
}

// RegisterFlags adds the --query.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.DurationVar(&c.QueryTimeout, "query.timeout", d.QueryTimeout, "deadline of every ClickHouse query (client side and max_execution_time)")
	fs.DurationVar(&c.HeadCacheTTL, "query.head-cache-ttl", d.HeadCacheTTL, "how long chain heads and block ranges are cached before ClickHouse is read again (0: no cache)")
	fs.IntVar(&c.MaxBlockTxs, "query.max-block-transactions", d.MaxBlockTxs, "most transactions returned for one block when pageSize is 0")
	fs.IntVar(&c.AddressScanRows, "query.address-scan-rows", d.AddressScanRows, "an address list whose remaining range holds more index rows than this is read in windows of blocks instead of at once")
	fs.IntVar(&c.ReorgWindow, "query.reorg-window", d.ReorgWindow, "blocks this many or more below a chain's indexed head are final (at least ingest's --ingest.reorg-window): their history rows are served without reading the block")
	fs.IntVar(&c.PointReadConcurrency, "query.point-read-concurrency", d.PointReadConcurrency, "most ClickHouse reads of one kind of point lookup (a block by number, a block's transactions, a transaction by hash) running at once; requests beyond it wait and are read together in the next one")
	fs.IntVar(&c.LatestScanBlocks, "query.latest-scan-blocks", d.LatestScanBlocks, "most blocks one page of latest transactions looks at (with a status filter a page may stop there, short, with a nextPageToken)")
}

// Validate checks the values.
func (c Config) Validate() error {
	switch {
	case c.QueryTimeout <= 0:
		return errors.New("store: --query.timeout must be positive")
	case c.HeadCacheTTL < 0:
		return errors.New("store: --query.head-cache-ttl must not be negative")
	case c.MaxBlockTxs <= 0:
		return errors.New("store: --query.max-block-transactions must be positive")
	case c.AddressScanRows <= 0:
		return errors.New("store: --query.address-scan-rows must be positive")
	case c.LatestScanBlocks <= 0:
		return errors.New("store: --query.latest-scan-blocks must be positive")
	case c.ReorgWindow < 1:
		return errors.New("store: --query.reorg-window must be at least 1")
	case c.PointReadConcurrency < 1:
		return errors.New("store: --query.point-read-concurrency must be at least 1")
	}
	return nil
}

// Deps are the store's collaborators.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// ChainIDs are the chains whose heads are tracked.
	ChainIDs []uint64
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// ClickHouse is the store. Its connection is set once ClickHouse answers
// (SetConn); until then every read fails with ErrUnavailable, so the API can
// listen before the database is up.
type ClickHouse struct {
	cfg     Config
	logger  *slog.Logger
	metrics *metrics
	now     func() time.Time
	chains  []any
	conn    chclient.Lazy

	migrated atomic.Bool
	heads    headCache

	ranges rangeCache

	settledBlocks settledCache

	first firstBlocks // the lowest indexed block per chain (indexed.go)

	blockReads   *coalescer[blockKey, Block]
	blockTxReads *coalescer[blockTxsKey, blockTxsPage]
	txReads      *coalescer[txKey, []txPlacement]

	spacingMu sync.Mutex
	spacings  map[uint64]float64 // per chain, see Blocks
}

// New validates and allocates; it does no I/O.
func New(cfg Config, deps Deps) (*ClickHouse, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Logger == nil {
		return nil, errors.New("store: Deps.Logger is required")
	}
	if deps.Registerer == nil {
		return nil, errors.New("store: Deps.Registerer is required")
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	s := &ClickHouse{cfg: cfg, logger: deps.Logger, metrics: newMetrics(deps.Registerer), now: now}
	for _, id := range deps.ChainIDs {
		s.chains = append(s.chains, id)
	}
	s.heads.seen = map[uint64]Head{}
	s.spacings = map[uint64]float64{}
	s.ranges.m = map[rangeKey]*rangeEntry{}
	// A read of 64 headers is still a few granules of block_lookup; a read
	// of blocks' transactions holds whole blocks (pageSize 0, the SDK's
	// default, reads every transaction), so it takes fewer; a hash's rows
	// are a granule of their own each, and reads of more than eight cost no
	// less per hash (bench/history.md, "Coalesced point reads").
	s.blockReads = newCoalescer(s, "block_by_number", 64, s.readBlocksByNumber,
		func(a, b blockKey) bool { return a.chainID == b.chainID })
	s.blockTxReads = newCoalescer(s, "block_transactions", 16, s.readBlockTxs,
		func(a, b blockTxsKey) bool { return a.chainID == b.chainID && a.from == b.from && a.limit == b.limit })
	s.txReads = newCoalescer(s, "tx_lookup", 16, s.readTxs,
		func(txKey, txKey) bool { return true }) // tx_key starts with the chain
	return s, nil
}

// SetConn hands the store its connection.
func (s *ClickHouse) SetConn(conn driver.Conn) { s.conn.Set(conn) }

// query runs q with the store's deadline and settings. done ends the query's
// context and records its duration (from sending to reading the last row)
// under name; call it after the rows are read.
func (s *ClickHouse) query(ctx context.Context, name, q string, args ...any) (rows driver.Rows, done func(), err error) {
	return s.queryWith(ctx, name, nil, q, args...)
}

// queryWith is query with settings added to the store's (e.g. a row budget).
func (s *ClickHouse) queryWith(ctx context.Context, name string, extra clickhouse.Settings, q string, args ...any) (rows driver.Rows, done func(), err error) {
	conn, err := s.conn.Get(ErrUnavailable)
	if err != nil {
		return nil, func() {}, err
	}
	// One thread per query: every read is a few granules, where ClickHouse's
	// per-query parallelism only adds thread start-up and contention, and
	// throughput under concurrent requests is what counts. The uncompressed
	// cache keeps hot granules decompressed in ClickHouse's memory (reads
	// over merge_tree_max_rows_to_use_cache rows bypass it), so random block
	// lookups do not wait on the disk when the kernel has dropped the files'
	// pages, which is what set their p99 (bench/history.md).
	settings := clickhouse.Settings{"max_threads": 1, "use_uncompressed_cache": 1}
	for k, v := range extra {
		settings[k] = v
	}
	ctx, cancel := chclient.WithTimeout(ctx, s.cfg.QueryTimeout, settings)
	start := time.Now()
	done = func() {
		s.metrics.observe(name, start)
		cancel()
	}
	// A connection that fails without an answer (a replica that died with
	// it open) is dropped by the pool, and the next one is dialed to the
	// first replica that answers: a read is retried on it at once.
	// At once: the next connection goes to another replica. Not logged:
	// the request's error is, if the retries fail too.
	calls := 0
	err = obs.Retry{Attempts: 1 + maxConnRetries}.Do(ctx, func() (err error) {
		if calls++; calls > 1 {
			s.metrics.retries.WithLabelValues(name).Inc()
		}
		if rows, err = conn.Query(ctx, q, args...); err != nil && !chclient.ConnectionFailed(err) {
			return obs.Permanent(err)
		}
		return err
	})
	if err != nil {
		done()
		return nil, func() {}, classify(name, err)
	}
	return rows, done, nil
}

// maxConnRetries bounds the immediate retries of a read whose connection
// failed: the pool may hold a few connections to a replica that died.
const maxConnRetries = 3

// eachRow reads rows to the end, calling row for each, and closes them. An
// error from row ends the read and is returned as it is (errStopRows ends it
// early without one); a failure of the read itself is classified as name's.
func eachRow(name string, rows driver.Rows, row func() error) error {
	defer rows.Close()
	for rows.Next() {
		if err := row(); err == errStopRows {
			break
		} else if err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return classify(name, err)
	}
	return nil
}

// errStopRows, from eachRow's row function, ends the read early.
var errStopRows = errors.New("store: stop reading rows")

// scanError names a failed Scan of name's rows (nil stays nil).
func scanError(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("store: %s: scan: %w", name, err)
}

// classify wraps err with ErrUnavailable when it is an outage, else names
// the query (chclient.Classify).
func classify(name string, err error) error {
	return chclient.Classify(err, ErrUnavailable, "store", name)
}

// Ready reports whether ClickHouse answers and every embedded migration has
// been applied.
func (s *ClickHouse) Ready(ctx context.Context) error {
	conn, err := s.conn.Get(ErrUnavailable)
	if err != nil {
		return err
	}
	if err := conn.Ping(ctx); err != nil {
		return fmt.Errorf("clickhouse ping: %w", err)
	}
	if s.migrated.Load() {
		return nil
	}
	ms, err := schema.Migrations()
	if err != nil {
		return err
	}
	want := ms[len(ms)-1].Version
	rows, cancel, err := s.query(ctx, "migrations", qMigrations)
	if err != nil {
		return err
	}
	defer cancel()
	defer rows.Close()
	var got uint32
	if rows.Next() {
		if err := rows.Scan(&got); err != nil {
			return fmt.Errorf("store: migrations: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return classify("migrations", err)
	}
	if got < want {
		return fmt.Errorf("store: migrations applied up to %d, want %d", got, want)
	}
	s.migrated.Store(true)
	return nil
}

// headCache holds the heads of every tracked chain for HeadCacheTTL; one
// refresh runs at a time and callers wait for it (or their own context).
type headCache struct {
	mu       sync.Mutex
	heads    map[uint64]Head
	err      error
	at       time.Time
	inflight chan struct{}
	seen     map[uint64]Head // last head seen per chain, for AdvancedAt
}

// Heads returns the head of every tracked chain (Exists false for a chain
// with no indexed block), read at most HeadCacheTTL ago. The map is shared:
// callers must not modify it.
func (s *ClickHouse) Heads(ctx context.Context) (map[uint64]Head, error) {
	c := &s.heads
	c.mu.Lock()
	if c.heads != nil && s.now().Sub(c.at) < s.cfg.HeadCacheTTL {
		h := c.heads
		c.mu.Unlock()
		return h, nil
	}
	if c.inflight == nil {
		c.inflight = make(chan struct{})
		go s.refreshHeads(c.inflight)
	}
	ch := c.inflight
	c.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: heads: %w", ErrUnavailable, ctx.Err())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.heads, c.err
}

// refreshHeads reads chain_heads on its own deadline, detached from the
// request that triggered it, so one cancelled request does not fail the
// others waiting on the same refresh.
func (s *ClickHouse) refreshHeads(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.QueryTimeout)
	defer cancel()
	heads, err := s.readHeads(ctx)
	c := &s.heads
	c.mu.Lock()
	defer c.mu.Unlock()
	now := s.now()
	if err == nil {
		for id, h := range heads {
			prev, ok := c.seen[id]
			switch {
			case !ok:
				h.AdvancedAt = now
			case prev.Exists != h.Exists || prev.Number != h.Number || prev.Hash != h.Hash:
				h.AdvancedAt = now
			default:
				h.AdvancedAt = prev.AdvancedAt
			}
			heads[id] = h
			c.seen[id] = h
		}
		c.heads, c.err = heads, nil
	} else {
		// Keep serving nothing stale: callers see the error until a read
		// succeeds again.
		c.heads, c.err = nil, err
	}
	c.at = now
	close(done)
	c.inflight = nil
}

func (s *ClickHouse) readHeads(ctx context.Context) (map[uint64]Head, error) {
	out := make(map[uint64]Head, len(s.chains))
	for _, id := range s.chains {
		out[id.(uint64)] = Head{ChainID: id.(uint64)}
	}
	if len(s.chains) == 0 {
		return out, nil
	}
	rows, cancel, err := s.query(ctx, "heads", qHeads, clickhouse.GroupSet{Value: s.chains})
	if err != nil {
		return nil, err
	}
	defer cancel()
	err = eachRow("heads", rows, func() error {
		var (
			h    Head
			hash string
		)
		if err := rows.Scan(&h.ChainID, &h.Number, &hash, &h.Timestamp); err != nil {
			return scanError("heads", err)
		}
		copy(h.Hash[:], hash)
		h.Exists = true
		out[h.ChainID] = h
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
