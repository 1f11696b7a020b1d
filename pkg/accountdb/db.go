package accountdb

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/obs"
)

var (
	// ErrNotFound: no row for the key (or the row belongs to another account).
	ErrNotFound = errors.New("accountdb: not found")
	// ErrUnavailable: ClickHouse cannot answer right now.
	ErrUnavailable = errors.New("accountdb: clickhouse unavailable")
)

// Config tunes the database access.
type Config struct {
	// Timeout bounds every query and insert.
	Timeout time.Duration
	// Subsystem names the host service in the metric name
	// (moraine_<subsystem>_accountdb_duration_seconds); "query" when empty.
	// Not a flag.
	Subsystem string
}

// DefaultConfig mirrors the flag defaults.
func DefaultConfig() Config { return Config{Timeout: 5 * time.Second} }

// RegisterFlags adds --accountdb.timeout.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.Timeout, "accountdb.timeout", DefaultConfig().Timeout, "deadline of every ClickHouse read and write of accounts, keys, webhooks, addresses and secrets")
}

// Validate checks the values.
func (c Config) Validate() error {
	if c.Timeout <= 0 {
		return errors.New("accountdb: --accountdb.timeout must be positive")
	}
	return nil
}

// DB reads and writes the management tables. Its connection may be set after
// construction (SetConn), so a server can listen before ClickHouse answers;
// until then every call fails with ErrUnavailable.
type DB struct {
	cfg      Config
	conn     chclient.Lazy
	duration *prometheus.HistogramVec
}

// New validates and allocates; it does no I/O. reg may be nil (no metrics,
// e.g. the command-line tool).
func New(cfg Config, reg prometheus.Registerer) (*DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	sub := cfg.Subsystem
	if sub == "" {
		sub = "query"
	}
	db := &DB{cfg: cfg, duration: obs.NewMetrics(reg, sub).HistogramVec("accountdb_duration_seconds",
		"Time of ClickHouse reads and writes of accounts, keys, webhooks, addresses and secrets, by statement.",
		[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}, "statement")}
	return db, nil
}

// Open is New plus SetConn, for callers that already hold a connection.
func Open(conn driver.Conn, cfg Config, reg prometheus.Registerer) (*DB, error) {
	db, err := New(cfg, reg)
	if err != nil {
		return nil, err
	}
	db.SetConn(conn)
	return db, nil
}

// SetConn hands the DB its connection.
func (db *DB) SetConn(conn driver.Conn) { db.conn.Set(conn) }

func (db *DB) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return chclient.WithTimeout(ctx, db.cfg.Timeout, nil)
}

// query runs q under the per-call deadline and calls scan for every row.
func (db *DB) query(ctx context.Context, name, q string, scan func(driver.Rows) error, args ...any) error {
	ctx, cancel := db.ctx(ctx)
	defer cancel()
	return db.stream(ctx, name, q, scan, args...)
}

// collect runs q through run (DB.query, or DB.stream for a full scan) and
// returns every row scan reads.
func collect[T any](ctx context.Context, run func(context.Context, string, string, func(driver.Rows) error, ...any) error,
	name, q string, scan func(driver.Rows) (T, error), args ...any) ([]T, error) {
	var out []T
	err := run(ctx, name, q, func(r driver.Rows) error {
		v, err := scan(r)
		out = append(out, v)
		return err
	}, args...)
	return out, err
}

// first is the first of rows, or ErrNotFound naming what when there is none.
func first[T any](rows []T, err error, what string) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	if len(rows) == 0 {
		return zero, fmt.Errorf("%w: %s", ErrNotFound, what)
	}
	return rows[0], nil
}

// stream is query without the per-call deadline, for the reconciler's full
// scans (bounded by ctx only).
func (db *DB) stream(ctx context.Context, name, q string, scan func(driver.Rows) error, args ...any) error {
	conn, err := db.conn.Get(ErrUnavailable)
	if err != nil {
		return err
	}
	defer db.observe(name, time.Now())
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		return classify(name, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("accountdb: %s: scan: %w", name, err)
		}
	}
	if err := rows.Err(); err != nil {
		return classify(name, err)
	}
	return nil
}

// insert appends rows (each a slice of column values) in one batch: one
// block, written atomically by ClickHouse.
func (db *DB) insert(ctx context.Context, name, q string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	conn, err := db.conn.Get(ErrUnavailable)
	if err != nil {
		return err
	}
	// Two things about the context of an insert. It is detached from the
	// caller's cancellation: a client that hangs up must not abort a write
	// halfway (the deadline still bounds it). And it is cancelled only a
	// while after Send returns: clickhouse-go (v2.50) watches an insert's
	// context in a goroutine that closes the TCP connection when the
	// context ends, and that goroutine may not have noticed that Send
	// finished yet, so cancelling at once can close a connection already
	// back in the pool, failing the next query on it ("use of closed
	// network connection"). The deadline fires at Timeout anyway, so the
	// cancel waits for it: an earlier cancel only widens that window (seen
	// under heavy CPU load, when the watching goroutine runs late).
	ctx, cancel := db.ctx(context.WithoutCancel(ctx))
	defer time.AfterFunc(db.cfg.Timeout, cancel)
	defer db.observe(name, time.Now())
	batch, err := conn.PrepareBatch(ctx, q)
	if err != nil {
		return classify(name, err)
	}
	for _, r := range rows {
		if err := batch.Append(r...); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("accountdb: %s: append: %w", name, err)
		}
	}
	if err := batch.Send(); err != nil {
		return classify(name, err)
	}
	return nil
}

func (db *DB) observe(name string, start time.Time) {
	db.duration.WithLabelValues(name).Observe(time.Since(start).Seconds())
}

// classify wraps err with ErrUnavailable when it is an outage, else names
// the statement (chclient.Classify).
func classify(name string, err error) error {
	return chclient.Classify(err, ErrUnavailable, "accountdb", name)
}

// Ping reports whether ClickHouse answers.
func (db *DB) Ping(ctx context.Context) error {
	conn, err := db.conn.Get(ErrUnavailable)
	if err != nil {
		return err
	}
	return conn.Ping(ctx)
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// chunks splits s into pieces of at most n (IN lists must stay far below
// ClickHouse's max_query_size of 256 KiB).
func chunks[T any](s []T, n int) [][]T {
	var out [][]T
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if len(s) > 0 {
		out = append(out, s)
	}
	return out
}

// inListMax is the most values in one IN list: 2,000 addresses are about
// 90 KB of query text.
const inListMax = 2000
