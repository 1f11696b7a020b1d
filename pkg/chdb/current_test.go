package chdb_test

import (
	"testing"

	schema "github.com/moraine-data/moraine/schemas/clickhouse"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// TestMigrationsRunOnCurrentClickHouse applies every migration statement,
// twice (idempotence), on current ClickHouse; the 18.16 run is
// TestMigrationsApplyOnRealClickHouse.
func TestMigrationsRunOnCurrentClickHouse(t *testing.T) {
	ms, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for _, m := range ms {
		stmts = append(stmts, m.Statements...)
	}
	testenv.OnCurrentClickHouse(t, append(stmts, stmts...))
}
