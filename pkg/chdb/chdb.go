// Package chdb opens ClickHouse over the native protocol (the only one that
// works on 18.16, see FIELD-NOTES), creates moraine's database and applies
// the embedded migrations.
package chdb

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
	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

// Config locates the server.
type Config struct {
	Addr        string
	Database    string
	User        string
	Password    string
	ReadTimeout time.Duration
	MaxConns    int
	// Compression is the wire compression of data blocks: "lz4" or "none".
	Compression string
}

// RegisterFlags adds the --clickhouse.* flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "clickhouse.addr", "127.0.0.1:9000", "ClickHouse native-protocol address")
	fs.StringVar(&c.Database, "clickhouse.database", "moraine", "ClickHouse database")
	fs.StringVar(&c.User, "clickhouse.user", "default", "ClickHouse user")
	fs.StringVar(&c.Password, "clickhouse.password", "", "ClickHouse password")
	fs.DurationVar(&c.ReadTimeout, "clickhouse.read-timeout", 30*time.Second, "ClickHouse read timeout")
	fs.IntVar(&c.MaxConns, "clickhouse.max-conns", 16, "ClickHouse connection pool size")
	fs.StringVar(&c.Compression, "clickhouse.compression", "lz4", "compression of data blocks on the wire: lz4, or none (cheaper in CPU when ClickHouse is on the same host)")
}

var dbName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate checks the database name, which is spliced into DDL.
func (c Config) Validate() error {
	if c.Addr == "" {
		return errors.New("chdb: --clickhouse.addr is required")
	}
	if c.Compression != "" && c.Compression != "lz4" && c.Compression != "none" {
		return fmt.Errorf("chdb: --clickhouse.compression %q must be lz4 or none", c.Compression)
	}
	if !dbName.MatchString(c.Database) {
		return fmt.Errorf("chdb: --clickhouse.database %q must be an identifier", c.Database)
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
		Addr:         []string{c.Addr},
		Auth:         clickhouse.Auth{Database: database, Username: c.User, Password: c.Password},
		DialTimeout:  5 * time.Second,
		ReadTimeout:  c.ReadTimeout,
		MaxOpenConns: maxConns,
		MaxIdleConns: maxConns,
		Compression:  compression,
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
	for attempt := 0; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = boot.Ping(pctx)
		cancel()
		if err == nil {
			break
		}
		if attempt == 0 || attempt%10 == 0 {
			logger.Warn("clickhouse not reachable yet, retrying", "addr", c.Addr, "err", err)
		}
		if !obs.Sleep(ctx, obs.Backoff(attempt, 200*time.Millisecond, 5*time.Second)) {
			return nil, fmt.Errorf("chdb: clickhouse at %s did not answer: %w", c.Addr, err)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := boot.Exec(dctx, "CREATE DATABASE IF NOT EXISTS "+c.Database); err != nil {
		return nil, fmt.Errorf("chdb: create database %s: %w", c.Database, err)
	}
	conn, err := c.open(c.Database)
	if err != nil {
		return nil, err
	}
	applied, err := schema.Apply(dctx, conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("chdb: migrate: %w", err)
	}
	if len(applied) > 0 {
		logger.Info("clickhouse migrations applied", "versions", applied, "database", c.Database)
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
