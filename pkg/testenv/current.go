package testenv

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	schema "github.com/moraine-data/moraine/schemas/clickhouse"
)

//go:embed currentch.py
var currentCHScript string

// OnCurrentClickHouse runs stmts, in order, on current ClickHouse (chDB,
// installed by deploy/stack/chdb.sh; MORAINE_CHDB_PYTHON names its python)
// and fails the test for every statement that errors. moraine's SQL must
// run there as well as on the 18.16 server of the local stack.
func OnCurrentClickHouse(t testing.TB, stmts []string) {
	t.Helper()
	py := os.Getenv("MORAINE_CHDB_PYTHON")
	if py == "" {
		t.Fatalf("MORAINE_CHDB_PYTHON is not set: this test needs current ClickHouse (chDB); `make test` installs it, or run `export MORAINE_CHDB_PYTHON=$(deploy/stack/chdb.sh install)`")
	}
	in, _ := json.Marshal(stmts)
	cmd := exec.Command(py, "-c", currentCHScript)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chDB runner: %v\n%s", err, stderr.String())
	}
	var results []struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("chDB runner output: %v: %s", err, out)
	}
	for i, r := range results {
		if !r.OK {
			t.Errorf("statement %d fails on current ClickHouse: %s\n%s", i+1, r.Error, stmts[i])
		}
	}
}

// ParsesOnCurrentClickHouse checks that current ClickHouse (chDB) parses
// every statement, without running it: for statements that need what an
// embedded engine has not (a cluster, ZooKeeper), such as the ON CLUSTER
// form of the migrations.
func ParsesOnCurrentClickHouse(t testing.TB, stmts []string) {
	t.Helper()
	explained := make([]string, len(stmts))
	for i, s := range stmts {
		explained[i] = "EXPLAIN AST " + s
	}
	OnCurrentClickHouse(t, explained)
}

// OnMigratedCurrentClickHouse runs every migration statement of the schema,
// then stmts, on current ClickHouse (OnCurrentClickHouse): a package's reads
// and writes over the tables as the migrations make them.
func OnMigratedCurrentClickHouse(t testing.TB, stmts ...string) {
	t.Helper()
	ms, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, m := range ms {
		all = append(all, m.Statements...)
	}
	OnCurrentClickHouse(t, append(all, stmts...))
}

// Bind replaces each "?" of q with the next literal, as clickhouse-go binds
// parameters on the client.
func Bind(q string, lits ...string) string {
	for _, l := range lits {
		q = strings.Replace(q, "?", l, 1)
	}
	return q
}
