package chdb_test

import (
	"context"
	"testing"
	"time"

	schema "github.com/moraine-data/moraine/schemas/clickhouse"

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
	again, err := schema.Apply(ctx, conn)
	if err != nil {
		t.Fatalf("second apply: %v", err)
	}
	if len(again) != 0 {
		t.Fatalf("second apply re-ran %v", again)
	}
	for _, table := range []string{"blocks", "block_hashes", "chain_heads", "transactions", "logs", "internal_transactions"} {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = ?", table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("table %s missing", table)
		}
	}
}
