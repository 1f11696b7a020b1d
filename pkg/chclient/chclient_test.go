package chclient_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	schema "github.com/moraine-data/moraine/schemas/clickhouse"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/testenv"
)

// TestMigrationsApplyOnRealClickHouse applies every migration on the real
// server (testenv gives a fresh database), then applies again and checks
// nothing is re-run: start-up migration must be idempotent.
func TestMigrationsApplyOnRealClickHouse(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	ms, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var recorded uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM schema_migrations FINAL").Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if int(recorded) != len(ms) {
		t.Fatalf("schema_migrations has %d rows, want %d", recorded, len(ms))
	}
	again, err := schema.Apply(ctx, conn, schema.Options{})
	if err != nil {
		t.Fatalf("second apply: %v", err)
	}
	if len(again) != 0 {
		t.Fatalf("second apply re-ran %v", again)
	}
	for _, table := range []string{"blocks", "block_hashes", "chain_heads", "transactions_by_block", "logs", "internal_transactions"} {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = ?", table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("table %s missing", table)
		}
	}
}

// TestCompressionSettings inserts and reads back a block of strings with
// each wire compression on the real server, and rejects unknown ones.
func TestCompressionSettings(t *testing.T) {
	cfg, _ := testenv.ClickHouse(t) // a fresh, migrated database
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, compression := range []string{"lz4", "none"} {
		c := cfg
		c.Compression = compression
		conn, err := chclient.Open(ctx, c, testenv.Logger(t))
		if err != nil {
			t.Fatalf("%s: %v", compression, err)
		}
		table := "compression_" + compression
		if err := conn.Exec(ctx, "CREATE TABLE "+table+" (s String) ENGINE = Memory"); err != nil {
			t.Fatal(err)
		}
		batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+table+" (s)")
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Repeat("0xabcdef", 1000)
		for range 100 {
			if err := batch.Append(want); err != nil {
				t.Fatal(err)
			}
		}
		if err := batch.Send(); err != nil {
			t.Fatalf("%s: insert: %v", compression, err)
		}
		var n, same uint64
		if err := conn.QueryRow(ctx, "SELECT count(), countIf(s = ?) FROM "+table, want).Scan(&n, &same); err != nil {
			t.Fatalf("%s: read: %v", compression, err)
		}
		if n != 100 || same != 100 {
			t.Errorf("%s: read back %d rows, %d intact, want 100", compression, n, same)
		}
		conn.Close()
	}
	bad := cfg
	bad.Compression = "zstd9"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "--clickhouse.compression") {
		t.Errorf("compression %q: err %v, want one naming the flag", bad.Compression, err)
	}
}

// TestConcurrentApply starts several services' migrations on a database
// that does not exist yet, all at once, as instances starting together do:
// each succeeds and the schema is whole, each migration recorded.
func TestConcurrentApply(t *testing.T) {
	cfg := testenv.ClickHouseConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const instances = 4
	errs := make([]error, instances)
	var wg sync.WaitGroup
	for i := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := chclient.Open(ctx, cfg, testenv.Logger(t))
			if err == nil {
				conn.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("instance %d: %v", i, err)
		}
	}
	conn, err := chclient.Open(ctx, cfg, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	checkSchemaWhole(ctx, t, conn)
}

// TestApplyRecreatesMissingTables drops a table of a migrated database, as a
// replica added to a cluster lacks them, and checks that Apply creates it
// again without recording the migration twice, with the columns of every
// later migration (logs: migration 2 creates tx_hash, 17 drops it).
func TestApplyRecreatesMissingTables(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := conn.Exec(ctx, "DROP TABLE logs"); err != nil {
		t.Fatal(err)
	}
	applied, err := schema.Apply(ctx, conn, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 0 {
		t.Errorf("Apply recorded %v again; only the table was missing", applied)
	}
	checkSchemaWhole(ctx, t, conn)
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = currentDatabase() AND table = 'logs' AND name = 'tx_hash'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Error("logs recreated with tx_hash, which migration 17 drops")
	}
}

// TestApplyDropsReplacedViews: views that a migration replaced (15
// replaces migration 13's per-key rollup views) and that are there again
// (an instance of an older version, started during a rolling upgrade,
// creates what it misses) are dropped by Apply; a server migrated before
// the migration gets the new ones.
func TestApplyDropsReplacedViews(t *testing.T) {
	_, conn := testenv.ClickHouse(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ms, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	// The views as migration 13 left them.
	for _, s := range ms[12].Statements {
		switch schema.ObjectName(s) {
		case "api_usage_key_hours_mv", "api_usage_key_days_mv":
			if err := conn.Exec(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply := func() {
		t.Helper()
		applied, err := schema.Apply(ctx, conn, schema.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(applied) != 0 {
			t.Errorf("Apply recorded %v again", applied)
		}
		checkSchemaWhole(ctx, t, conn)
	}
	apply()
	for _, v := range []string{"api_usage_key_hours_dense_mv", "api_usage_key_days_dense_mv"} {
		if err := conn.Exec(ctx, "DROP TABLE "+v); err != nil {
			t.Fatal(err)
		}
	}
	apply()
}

// checkSchemaWhole checks that every table and view of the migrations
// exists once (none that a later migration drops) and every migration is
// recorded once.
func checkSchemaWhole(ctx context.Context, t *testing.T, conn driver.Conn) {
	t.Helper()
	ms, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	droppedBy := schema.DroppedBy(ms)
	for _, m := range ms {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM schema_migrations FINAL WHERE version = ?", m.Version).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("migration %d recorded %d times", m.Version, n)
		}
		for _, s := range m.Statements {
			name := schema.ObjectName(s)
			if name == "" {
				name = schema.DroppedObject(s)
			}
			if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = ?", name).Scan(&n); err != nil {
				t.Fatal(err)
			}
			dropped := droppedBy[name] >= m.Version // by this migration or a later one
			switch {
			case dropped && n != 0:
				t.Errorf("%s (migration %d) is there; a later migration drops it", name, m.Version)
			case !dropped && n != 1:
				t.Errorf("%s (migration %d) missing", name, m.Version)
			}
		}
	}
}

// TestUnknownClusterIsRefused: a --clickhouse.cluster the server does not
// know is an error at start-up, not tables that silently stay on one
// server.
func TestUnknownClusterIsRefused(t *testing.T) {
	cfg := testenv.ClickHouseConfig(t)
	cfg.Cluster = "no_such_cluster"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := chclient.Open(ctx, cfg, testenv.Logger(t))
	if err == nil || !strings.Contains(err.Error(), "not in the server's remote_servers") {
		t.Fatalf("err = %v, want one saying the cluster is unknown", err)
	}
}
