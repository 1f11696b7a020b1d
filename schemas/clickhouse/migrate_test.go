package clickhouse

import (
	"strings"
	"testing"
)

// TestMigrationsAreOrderedAndPortable checks the embedded files: versions
// run 1..n without gaps, and no statement uses what ClickHouse 18.16 lacks.
func TestMigrationsAreOrderedAndPortable(t *testing.T) {
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 2 {
		t.Fatalf("want at least 2 migrations, got %d", len(ms))
	}
	banned := []string{"Map(", "JSON", "Bool", "DateTime64", "UInt256", "Int256", "INDEX ", "LowCardinality"}
	for _, m := range ms {
		if len(m.Statements) == 0 {
			t.Errorf("migration %d has no statements", m.Version)
		}
		for _, s := range m.Statements {
			if _, column := ColumnChange(s); !column && DroppedObject(s) == "" && !strings.Contains(s, "IF NOT EXISTS") && !strings.HasPrefix(strings.ToUpper(s), "INSERT") {
				t.Errorf("migration %d: statement is not idempotent (no IF NOT EXISTS): %.80s", m.Version, s)
			}
			for _, b := range banned {
				if strings.Contains(s, b) {
					t.Errorf("migration %d uses %q, which ClickHouse 18.16 lacks", m.Version, b)
				}
			}
		}
	}
}

func TestSplitStatements(t *testing.T) {
	got := splitStatements("-- comment\nCREATE TABLE a (x UInt8) ENGINE = Memory;\n\n-- two\nCREATE TABLE b (y UInt8) ENGINE = Memory\n")
	if len(got) != 2 || !strings.HasPrefix(got[0], "CREATE TABLE a") || !strings.HasPrefix(got[1], "CREATE TABLE b") {
		t.Fatalf("got %q", got)
	}
}

// TestMigrationsRewriteForCluster checks that every migration statement has
// a cluster form: ON CLUSTER, Replicated engines keyed by database and
// table, views unchanged but for ON CLUSTER, and ALTERs only of replicated
// tables, which replication carries (not ON CLUSTER).
func TestMigrationsRewriteForCluster(t *testing.T) {
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	replicated := map[string]bool{}
	for _, m := range ms {
		for _, s := range m.Statements {
			out, err := OnCluster(s, "moraine", "db1")
			if err != nil {
				t.Errorf("migration %d: %v", m.Version, err)
				continue
			}
			name := ObjectName(s)
			if name == "" {
				name = DroppedObject(s)
			}
			if strings.Contains(out, "ENGINE = Replicated") {
				replicated[name] = true
			}
			if alterTable.MatchString(s) {
				if !replicated[name] || !strings.HasPrefix(out, "ALTER TABLE db1."+name+" ") || strings.Contains(out, "ON CLUSTER") {
					t.Errorf("migration %d: ALTER of %q, not a replicated table altered on one server: %.120s", m.Version, name, out)
				}
				continue
			}
			if name == "" || !strings.Contains(out, "db1."+name+" ON CLUSTER moraine") {
				t.Errorf("migration %d: no ON CLUSTER after %q in %.120s", m.Version, name, out)
			}
			if strings.Contains(s, "MergeTree") && !strings.Contains(out, "ENGINE = Replicated") {
				t.Errorf("migration %d: engine of %s not replicated: %.200s", m.Version, name, out)
			}
			if strings.Contains(out, "ENGINE = Replicated") && !strings.Contains(out, "'/clickhouse/tables/{shard}/db1/"+name+"', '{replica}'") {
				t.Errorf("migration %d: %s: ZooKeeper path not per database and table: %.300s", m.Version, name, out)
			}
		}
	}
}

func TestOnCluster(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, err string
	}{
		{
			name: "versioned engine keeps its argument and settings",
			in:   "CREATE TABLE IF NOT EXISTS blocks (\n n UInt64, version UInt64\n) ENGINE = ReplacingMergeTree(version)\nORDER BY n\nSETTINGS index_granularity = 1024",
			want: "CREATE TABLE IF NOT EXISTS d.blocks ON CLUSTER c (\n n UInt64, version UInt64\n) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/d/blocks', '{replica}', version)\nORDER BY n\nSETTINGS index_granularity = 1024",
		},
		{
			name: "engine without parentheses",
			in:   "CREATE TABLE IF NOT EXISTS deliveries (a String) ENGINE = MergeTree\nPARTITION BY a\nORDER BY a",
			want: "CREATE TABLE IF NOT EXISTS d.deliveries ON CLUSTER c (a String) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/d/deliveries', '{replica}')\nPARTITION BY a\nORDER BY a",
		},
		{
			name: "empty parentheses",
			in:   "CREATE TABLE IF NOT EXISTS t (a String) ENGINE = MergeTree() ORDER BY a",
			want: "CREATE TABLE IF NOT EXISTS d.t ON CLUSTER c (a String) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/d/t', '{replica}') ORDER BY a",
		},
		{
			name: "materialized view: target and sources qualified, table functions and qualified names kept",
			in:   "CREATE MATERIALIZED VIEW IF NOT EXISTS v TO t AS\nSELECT a FROM s JOIN u USING a JOIN other.w USING a WHERE a IN (SELECT a FROM numbers(3))",
			want: "CREATE MATERIALIZED VIEW IF NOT EXISTS d.v ON CLUSTER c TO d.t AS\nSELECT a FROM d.s JOIN d.u USING a JOIN other.w USING a WHERE a IN (SELECT a FROM numbers(3))",
		},
		{
			name: "alter: replication carries it, not the DDL queue",
			in:   "ALTER TABLE t ADD COLUMN IF NOT EXISTS b String",
			want: "ALTER TABLE d.t ADD COLUMN IF NOT EXISTS b String",
		},
		{
			name: "drop",
			in:   "DROP TABLE IF EXISTS v_mv",
			want: "DROP TABLE IF EXISTS d.v_mv ON CLUSTER c",
		},
		{name: "drop without IF EXISTS", in: "DROP TABLE v_mv", err: "cannot run on a cluster"},
		{name: "engine that cannot replicate", in: "CREATE TABLE IF NOT EXISTS t (a String) ENGINE = Memory", err: "MergeTree-family"},
		{name: "already replicated", in: "CREATE TABLE IF NOT EXISTS t (a String) ENGINE = ReplicatedMergeTree('/x', 'r') ORDER BY a", err: "plain engine"},
		{name: "other statement", in: "INSERT INTO t (a) VALUES ('x')", err: "cannot run on a cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := OnCluster(tc.in, "c", "d")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestDroppedObjects: a view a later migration drops is known as dropped
// by that migration, so Apply neither misses nor recreates it.
func TestDroppedObjects(t *testing.T) {
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	dropped := DroppedBy(ms)
	for _, v := range []string{"api_usage_key_hours_mv", "api_usage_key_days_mv"} {
		if dropped[v] != 15 {
			t.Errorf("%s dropped by migration %d, want 15", v, dropped[v])
		}
	}
	if DroppedObject("DROP TABLE IF EXISTS x") != "x" || DroppedObject("DROP TABLE x") != "" || DroppedObject("CREATE TABLE IF NOT EXISTS x (a UInt8) ENGINE = Memory") != "" {
		t.Error("DroppedObject recognises only DROP TABLE IF EXISTS")
	}
}

// TestColumnChanges: ADD and DROP COLUMN statements are recognised with
// their table and column, whatever their case and spacing; nothing else is,
// nor a statement of several changes (Apply could skip only all of them).
func TestColumnChanges(t *testing.T) {
	for stmt, want := range map[string]Column{
		"ALTER TABLE api_usage_key_days ADD COLUMN duration_counts AggregateFunction(sumForEach, Array(UInt64))": {Table: "api_usage_key_days", Column: "duration_counts", Add: true},
		"alter table logs drop column tx_hash":       {Table: "logs", Column: "tx_hash"},
		"ALTER TABLE  logs\n  DROP COLUMN tx_hash\n": {Table: "logs", Column: "tx_hash"},
	} {
		if got, ok := ColumnChange(stmt); !ok || got != want {
			t.Errorf("ColumnChange(%q) = %+v, %v; want %+v", stmt, got, ok, want)
		}
	}
	for _, stmt := range []string{"ALTER TABLE logs DROP COLUMN tx_hash, DROP COLUMN x", "ALTER TABLE logs DROP PARTITION 1", "DROP TABLE IF EXISTS logs", "ALTER TABLE logs MODIFY COLUMN tx_hash String"} {
		if got, ok := ColumnChange(stmt); ok {
			t.Errorf("ColumnChange(%q) = %+v, want none", stmt, got)
		}
	}
}
