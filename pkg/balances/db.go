package balances

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/chclient"
)

// ErrUnavailable wraps every failure that means ClickHouse cannot answer
// right now (chclient.Unavailable); callers answer 503 for it.
var ErrUnavailable = errors.New("balances: clickhouse unavailable")

// DB is the ClickHouse access of the package: reads with settings, and
// inserts. The query service hands in its store's reads (metrics per
// statement name, retries on a dead replica); Conn adapts a plain
// connection.
type DB interface {
	// Query runs a read named name (for metrics) with the settings added
	// to the caller's own; done releases the rows.
	Query(ctx context.Context, name string, settings clickhouse.Settings, query string, args ...any) (rows driver.Rows, done func(), err error)
	// Insert prepares an INSERT (columns listed).
	Insert(ctx context.Context, query string) (driver.Batch, error)
}

// Conn is a DB over one connection: every statement bounded by Timeout
// (client deadline and max_execution_time) and run on one thread, as every
// read here is a few granules, through ClickHouse's uncompressed cache, so
// that a holder's hot granules are not decompressed for every page (the
// larger part of ClickHouse's CPU per list page; bench/history.md); reads
// over merge_tree_max_rows_to_use_cache rows, the roller's, bypass it.
type Conn struct {
	Conn    driver.Conn
	Timeout time.Duration
}

// Query implements DB.
func (c Conn) Query(ctx context.Context, name string, settings clickhouse.Settings, query string, args ...any) (driver.Rows, func(), error) {
	all := clickhouse.Settings{"max_threads": 1, "use_uncompressed_cache": 1}
	for k, v := range settings {
		all[k] = v
	}
	ctx, cancel := chclient.WithTimeout(ctx, c.timeout(), all)
	rows, err := c.Conn.Query(ctx, query, args...)
	if err != nil {
		cancel()
		return nil, func() {}, classify(err, name)
	}
	return rows, func() { _ = rows.Close(); cancel() }, nil
}

// Insert implements DB; ctx, which the caller bounds, lasts until Send.
func (c Conn) Insert(ctx context.Context, query string) (driver.Batch, error) {
	b, err := c.Conn.PrepareBatch(ctx, query)
	if err != nil {
		return nil, classify(err, "prepare insert")
	}
	return b, nil
}

func (c Conn) timeout() time.Duration {
	if c.Timeout <= 0 {
		return 30 * time.Second
	}
	return c.Timeout
}

func classify(err error, name string) error {
	return chclient.Classify(err, ErrUnavailable, "balances", name)
}

// each calls fn for every row, then checks the rows' error.
func each(name string, rows driver.Rows, fn func() error) error {
	for rows.Next() {
		if err := fn(); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return classify(err, name)
	}
	return nil
}

// scanErr names a scan failure.
func scanErr(name string, err error) error {
	if err != nil {
		return fmt.Errorf("balances: %s: scan: %w", name, err)
	}
	return nil
}
