// Package accountdbtest opens an accountdb.DB on a fresh database of the
// real ClickHouse server (pkg/testenv: a missing server fails the test).
package accountdbtest

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/accountdb"
	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/testenv"
)

// Open returns a DB on a fresh, migrated database (dropped when the test
// ends), its config and its connection.
func Open(t testing.TB) (*accountdb.DB, chclient.Config, driver.Conn) {
	t.Helper()
	cfg, conn := testenv.ClickHouse(t)
	db, err := accountdb.Open(conn, accountdb.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return db, cfg, conn
}

// Connect opens a connection to an existing test database (a restarted
// process in a crash test) and returns a DB on it.
func Connect(t testing.TB, cfg chclient.Config) (*accountdb.DB, driver.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := chclient.Open(ctx, cfg, testenv.Logger(t))
	if err != nil {
		t.Fatalf("clickhouse: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	db, err := accountdb.Open(conn, accountdb.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return db, conn
}
