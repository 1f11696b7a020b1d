// Package chclient opens ClickHouse over the native protocol (the only one that
// works on 18.16, see FIELD-NOTES), creates moraine's database and applies
// the embedded migrations, on one server or on a cluster of replicas.
//
// # Several servers
//
// --clickhouse.addr takes the replicas of a cluster as a list. Connections
// are opened to the first address that answers, in the order given
// (clickhouse-go's ConnOpenInOrder): while the first replica is up every
// read and write of the process goes to it, and when it is down new
// connections go to the next. Preferring one replica is deliberate: a
// replica fetches the parts of the other's inserts asynchronously and
// table by table, so reading from the replica that received the inserts is
// what keeps two guarantees (a webhook just created is readable at once,
// readers never see a block's head before its transactions); with every
// service listing the replicas in the same order, they share that
// replica. Pooled connections live at most --clickhouse.conn-max-lifetime,
// so traffic returns to the first replica after it comes back.
//
// With --clickhouse.cluster the migrations run ON CLUSTER with Replicated
// engines (schemas/clickhouse.OnCluster; docs/operating-a-cluster.md).
//
// # What every client of the database shares
//
// The packages that read and write ClickHouse (accountdb, the query store)
// classify failures alike (Unavailable, Classify), hold a connection that is
// set once ClickHouse answers so their server can listen before (Lazy), and
// bound every statement on the client and on the server (WithTimeout).
package chclient

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/obs"
	"github.com/moraine-data/moraine/pkg/process"
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// Config locates the server or the cluster.
type Config struct {
	// Addr is one address or a comma-separated list of replicas, in the
	// order they are preferred.
	Addr        string
	Database    string
	User        string
	Password    string
	ReadTimeout time.Duration
	MaxConns    int
	// ConnMaxLifetime bounds how long a pooled connection is reused, so
	// connections move back to a preferred replica once it returns.
	ConnMaxLifetime time.Duration
	// Compression is the wire compression of data blocks: "lz4" or "none".
	Compression string
	// Cluster names the ClickHouse cluster (remote_servers) whose servers
	// replicate moraine's tables; empty for a single server.
	Cluster string
	// DDLTimeout bounds how long a migration statement waits for every
	// server of the cluster.
	DDLTimeout time.Duration
}

// RegisterFlags adds the --clickhouse.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "clickhouse.addr", "127.0.0.1:9000", "ClickHouse native-protocol address, or a comma-separated list of a cluster's replicas in order of preference")
	fs.StringVar(&c.Database, "clickhouse.database", "moraine", "ClickHouse database")
	fs.StringVar(&c.User, "clickhouse.user", "default", "ClickHouse user")
	fs.StringVar(&c.Password, "clickhouse.password", "", "ClickHouse password")
	fs.DurationVar(&c.ReadTimeout, "clickhouse.read-timeout", 30*time.Second, "ClickHouse read timeout")
	fs.IntVar(&c.MaxConns, "clickhouse.max-conns", 16, "ClickHouse connection pool size")
	fs.StringVar(&c.Compression, "clickhouse.compression", "lz4", "compression of data blocks on the wire: lz4, or none (cheaper in CPU when ClickHouse is on the same host)")
	fs.DurationVar(&c.ConnMaxLifetime, "clickhouse.conn-max-lifetime", 5*time.Minute, "reuse a pooled connection at most this long (connections return to the first replica after it comes back)")
	fs.StringVar(&c.Cluster, "clickhouse.cluster", "", "ClickHouse cluster (remote_servers) that replicates moraine's tables: migrations run ON CLUSTER with Replicated engines; empty for a single server")
	fs.DurationVar(&c.DDLTimeout, "clickhouse.ddl-timeout", 30*time.Second, "with --clickhouse.cluster, how long a migration statement waits for every server (one that is down applies it when it returns)")
}

// Addrs splits Addr.
func (c Config) Addrs() []string { return process.SplitList(c.Addr) }

var dbName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks the database name, which is spliced into DDL.
func (c Config) Validate() error {
	if len(c.Addrs()) == 0 {
		return errors.New("chclient: --clickhouse.addr is required")
	}
	if c.Cluster != "" && !dbName.MatchString(c.Cluster) {
		return fmt.Errorf("chclient: --clickhouse.cluster %q must be an identifier", c.Cluster)
	}
	if c.Compression != "" && c.Compression != "lz4" && c.Compression != "none" {
		return fmt.Errorf("chclient: --clickhouse.compression %q must be lz4 or none", c.Compression)
	}
	if !dbName.MatchString(c.Database) {
		return fmt.Errorf("chclient: --clickhouse.database %q must be an identifier", c.Database)
	}
	return nil
}

func (c Config) open(database string) (driver.Conn, error) {
	maxConns := c.MaxConns
	if maxConns <= 0 {
		maxConns = 16
	}
	var compression *clickhouse.Compression
	if c.Compression != "none" {
		// lz4 on the wire halves insert traffic for hex-heavy rows.
		compression = &clickhouse.Compression{Method: clickhouse.CompressionLZ4}
	}
	return clickhouse.Open(&clickhouse.Options{
		Addr:             c.Addrs(),
		ConnOpenStrategy: clickhouse.ConnOpenInOrder,
		Auth:             clickhouse.Auth{Database: database, Username: c.User, Password: c.Password},
		DialTimeout:      5 * time.Second,
		ReadTimeout:      c.ReadTimeout,
		MaxOpenConns:     maxConns,
		MaxIdleConns:     maxConns,
		ConnMaxLifetime:  c.ConnMaxLifetime,
		Compression:      compression,
	})
}

// Open waits (with backoff, until ctx ends) for the server, creates the
// database if needed, applies the migrations, and returns a pooled
// connection that uses the database.
func Open(ctx context.Context, c Config, logger *slog.Logger) (driver.Conn, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	boot, err := c.open("default")
	if err != nil {
		return nil, err
	}
	defer boot.Close()
	wait := obs.Retry{Initial: 200 * time.Millisecond, Max: 5 * time.Second,
		Log: logger, Msg: "clickhouse not reachable yet, retrying", Attrs: []any{"addr", c.Addr}}
	if err := wait.Do(ctx, func() error {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return boot.Ping(pctx)
	}); err != nil {
		return nil, fmt.Errorf("chclient: clickhouse at %s did not answer: %w", c.Addr, err)
	}
	// Every statement waits at most the DDL timeout, and a migration has a
	// few of them.
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second+10*max(c.DDLTimeout, 0))
	defer cancel()
	opts := schema.Options{Cluster: c.Cluster, Database: c.Database, DDLTimeout: c.DDLTimeout, Logger: logger}
	if err := schema.EnsureDatabase(dctx, boot, opts); err != nil {
		return nil, fmt.Errorf("chclient: create database %s: %w", c.Database, err)
	}
	conn, err := c.open(c.Database)
	if err != nil {
		return nil, err
	}
	applied, err := schema.Apply(dctx, conn, opts)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("chclient: migrate: %w", err)
	}
	if len(applied) > 0 {
		logger.Info("clickhouse migrations applied", "versions", applied, "database", c.Database, "cluster", c.Cluster)
	}
	return conn, nil
}

// Ping is a readiness check.
func Ping(conn driver.Conn) obs.ReadyCheck {
	return func(ctx context.Context) error {
		if err := conn.Ping(ctx); err != nil {
			return fmt.Errorf("clickhouse: %w", err)
		}
		return nil
	}
}
