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
			if !strings.Contains(s, "IF NOT EXISTS") && !strings.HasPrefix(strings.ToUpper(s), "INSERT") {
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
