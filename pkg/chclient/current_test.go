package chclient_test

import (
	"testing"

	schema "github.com/moraine-data/moraine/schemas/clickhouse"

	"github.com/moraine-data/moraine/pkg/testenv"
)

// TestMigrationsRunOnCurrentClickHouse applies every migration statement,
// twice (idempotence), on current ClickHouse; the 18.16 run is
// TestMigrationsApplyOnRealClickHouse. An ADD or DROP COLUMN runs once: it
// is idempotent through Apply, which skips it when the column is there or
// gone (schema.ColumnChange), not as a statement.
func TestMigrationsRunOnCurrentClickHouse(t *testing.T) {
	ms, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var stmts, again []string
	for _, m := range ms {
		stmts = append(stmts, m.Statements...)
		for _, s := range m.Statements {
			if _, column := schema.ColumnChange(s); !column {
				again = append(again, s)
			}
		}
	}
	testenv.OnCurrentClickHouse(t, append(stmts, again...))
}

// TestClusterMigrationsParseOnCurrentClickHouse checks that the ON CLUSTER
// form of every migration statement (Replicated engines) is valid SQL for
// current ClickHouse; the 18.16 cluster runs them in the cluster suite.
func TestClusterMigrationsParseOnCurrentClickHouse(t *testing.T) {
	ms, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var stmts []string
	for _, m := range ms {
		for _, s := range m.Statements {
			c, err := schema.OnCluster(s, "moraine", "moraine")
			if err != nil {
				t.Fatal(err)
			}
			stmts = append(stmts, c)
		}
	}
	testenv.ParsesOnCurrentClickHouse(t, stmts)
}
