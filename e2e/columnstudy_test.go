package e2e

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

//go:embed columnstudy.py
var columnStudyScript string

// studyTables are the tables the column study looks at (those that hold
// nearly all the bytes) with their sort keys (migrations 2 and 16).
var studyTables = []struct{ name, orderBy string }{
	{"internal_transactions", "chain_id, block_number, block_hash, tx_index, trace_position"},
	{"logs", "chain_id, block_number, block_hash, log_index"},
	{"transactions_by_block", "chain_id, block_number, block_hash, tx_index"},
}

// studyColumn is one column of a table and what it stores.
type studyColumn struct {
	Name, Type               string
	Compressed, Uncompressed uint64
}

// Column choices of the study. Addresses are 20 raw bytes or empty;
// FixedString(20) stores 20 bytes for each (zeros when empty) instead of a
// length and the bytes. Low-cardinality strings: call types, errors and
// revert reasons of call frames, event signatures (topic0) of logs.
var (
	studyAddresses = map[string]bool{"from_address": true, "to_address": true, "contract_address": true, "address": true}
	studyLowCard   = map[string]map[string]bool{
		"internal_transactions": {"type": true, "error": true, "revert_reason": true},
		"logs":                  {"topic0": true},
	}
	// Columns that grow along the sort key: delta coding leaves small numbers.
	studyDelta = map[string]bool{"block_number": true, "block_timestamp": true, "tx_index": true, "log_index": true, "trace_position": true}
)

// columnStudy prints what each column of the large tables stores (ClickHouse
// 18.16, the whole table), then what other column types store on 18.16 and
// what other types and codecs store on current ClickHouse (chDB), each on the
// same sample of MORAINE_BENCH_STUDY_ROWS rows (1,000,000) per table, copied
// in sort-key order and merged into one part. 18.16 has no per-column
// codecs (they came in 19.x; its compression method is a server-wide
// setting): there the levers are the types. Current ClickHouse needs
// MORAINE_CHDB_PYTHON (deploy/stack/chdb.sh install); without it that part
// is skipped, said so.
func columnStudy(tb testing.TB, conn driver.Conn, db string, txs uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	rows := uint64(envFloat(tb, "MORAINE_BENCH_STUDY_ROWS", 1_000_000))
	fmt.Printf("\ncolumn study (ClickHouse 18.16, whole tables): compressed bytes per column, per transaction\n")
	cols := map[string][]studyColumn{}
	for _, t := range studyTables {
		cols[t.name] = tableColumns(tb, conn, db, t.name)
		var total uint64
		for _, c := range cols[t.name] {
			total += c.Compressed
		}
		for _, c := range cols[t.name] {
			fmt.Printf("column %-21s %-20s %-24s %9.1f MB %7.1f bytes/tx %5.1fx  %4.1f%% of the table\n", t.name, c.Name, c.Type,
				float64(c.Compressed)/1e6, float64(c.Compressed)/float64(max(txs, 1)), float64(c.Uncompressed)/float64(max(c.Compressed, 1)),
				100*float64(c.Compressed)/float64(max(total, 1)))
		}
	}

	native := map[string]string{}
	dir := tb.TempDir()
	type result struct {
		table, variant string
		rows, bytes    uint64
		cols           []studyColumn
		err            string
	}
	var results []result
	for _, t := range studyTables {
		base := "study_" + t.name
		ddl := func(name string, typeOf, codecOf func(studyColumn) string) string {
			return studyDDL(name, t.orderBy, cols[t.name], typeOf, codecOf)
		}
		asIs := func(c studyColumn) string { return c.Type }
		typed := func(c studyColumn) string { return studyType(t.name, c) }
		// 18.16: the sample as is, and with other types.
		exec := func(q string) error {
			qctx := clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"allow_experimental_low_cardinality_type": 1}))
			return conn.Exec(qctx, q)
		}
		var names []string
		for _, c := range cols[t.name] {
			names = append(names, c.Name)
		}
		var convert []string
		for _, c := range cols[t.name] {
			if typed(c) == "FixedString(20)" {
				convert = append(convert, "toFixedString("+c.Name+", 20)")
			} else {
				convert = append(convert, c.Name)
			}
		}
		for _, v := range []struct {
			name, ddl, sel string
		}{
			{"as is", ddl(base, asIs, nil), fmt.Sprintf("SELECT %s FROM %s LIMIT %d", strings.Join(names, ", "), t.name, rows)},
			{"FixedString(20) addresses, LowCardinality strings", ddl(base+"_typed", typed, nil), fmt.Sprintf("SELECT %s FROM %s", strings.Join(convert, ", "), base)},
		} {
			table := strings.Fields(v.ddl)[2]
			err := exec("DROP TABLE IF EXISTS " + table)
			if err == nil {
				err = exec(v.ddl)
			}
			if err == nil {
				err = exec(fmt.Sprintf("INSERT INTO %s (%s) %s", table, strings.Join(names, ", "), v.sel))
			}
			if err == nil {
				err = exec("OPTIMIZE TABLE " + table + " FINAL")
			}
			r := result{table: t.name, variant: "18.16 " + v.name}
			if err != nil {
				r.err = err.Error()
			} else {
				for _, ts := range tableSizes(tb, conn, db) {
					if ts.name == table {
						r.rows, r.bytes = ts.rows, ts.bytes
					}
				}
				r.cols = tableColumns(tb, conn, db, table)
			}
			results = append(results, r)
		}
		// The sample, for chDB.
		path := filepath.Join(dir, t.name+".native")
		if err := exportNative(ctx, db, fmt.Sprintf("SELECT * FROM %s", base), path); err != nil {
			results = append(results, result{table: t.name, variant: "current (export)", err: err.Error()})
		} else {
			native[t.name] = path
		}
		for _, table := range []string{base, base + "_typed"} {
			_ = exec("DROP TABLE IF EXISTS " + table)
		}
	}

	// Current ClickHouse: the same sample as is, with ZSTD, and with the
	// types above plus delta coding of the columns that grow along the key.
	py := os.Getenv("MORAINE_CHDB_PYTHON")
	if py == "" || len(native) == 0 {
		fmt.Printf("column study: current ClickHouse skipped (MORAINE_CHDB_PYTHON not set: export MORAINE_CHDB_PYTHON=$(deploy/stack/chdb.sh install))\n")
	} else {
		type variant struct {
			Table string `json:"table"`
			Name  string `json:"name"`
			DDL   string `json:"ddl"`
		}
		var vs []variant
		for _, t := range studyTables {
			if native[t.name] == "" {
				continue
			}
			n := "s_" + t.name
			asIs := func(c studyColumn) string { return c.Type }
			typed := func(c studyColumn) string { return studyType(t.name, c) }
			mk := func(typeOf, codecOf func(studyColumn) string) string {
				return studyDDL(n, t.orderBy, cols[t.name], typeOf, codecOf)
			}
			zstd := func(studyColumn) string { return "ZSTD(3)" }
			tuned := func(c studyColumn) string {
				if studyDelta[c.Name] {
					return "Delta, ZSTD(3)"
				}
				return "ZSTD(3)"
			}
			// The Native files hold the 18.16 types: the tables that change
			// types read them through the casts of INSERT ... SELECT.
			vs = append(vs,
				variant{t.name, "current as is (LZ4)", mk(asIs, nil)},
				variant{t.name, "current ZSTD(3)", mk(asIs, zstd)},
				variant{t.name, "current types above + Delta on key columns + ZSTD(3)", mk(typed, tuned)},
			)
		}
		in, _ := json.Marshal(map[string]any{"native": native, "variants": vs})
		cmd := exec.CommandContext(ctx, py, "-c", columnStudyScript)
		cmd.Stdin = bytes.NewReader(in)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var got []struct {
			Table, Name, Error string
			Rows               uint64 `json:"rows"`
			Bytes              uint64 `json:"bytes_on_disk"`
			Columns            []studyColumn
		}
		if err == nil {
			err = json.Unmarshal(out, &got)
		}
		if err != nil {
			fmt.Printf("column study: chDB runner: %v\n%s\n", err, stderr.String())
		}
		for _, g := range got {
			results = append(results, result{table: g.Table, variant: g.Name, rows: g.Rows, bytes: g.Bytes, cols: g.Columns, err: g.Error})
		}
	}

	fmt.Printf("\ncolumn study: the same sample of each table (up to %d rows, sort-key order, one part) stored several ways\n", rows)
	baseline := map[string]uint64{}
	for _, r := range results {
		if r.err != "" {
			fmt.Printf("codecs %-21s %-55s error: %s\n", r.table, r.variant, r.err)
			continue
		}
		if baseline[r.table] == 0 {
			baseline[r.table] = r.bytes
		}
		fmt.Printf("codecs %-21s %-55s %9d rows %8.1f MB %6.1f bytes/row %5.0f%% of 18.16 as is\n", r.table, r.variant, r.rows,
			float64(r.bytes)/1e6, float64(r.bytes)/float64(max(r.rows, 1)), 100*float64(r.bytes)/float64(baseline[r.table]))
		// The five largest columns, to see where a variant wins.
		sort.Slice(r.cols, func(i, j int) bool { return r.cols[i].Compressed > r.cols[j].Compressed })
		var top []string
		for _, c := range r.cols[:min(5, len(r.cols))] {
			top = append(top, fmt.Sprintf("%s %.1f", c.Name, float64(c.Compressed)/float64(max(r.rows, 1))))
		}
		fmt.Printf("codecs %-21s %-55s largest columns, bytes/row: %s\n", "", "", strings.Join(top, ", "))
	}
}

// tableColumns reads a table's columns and their sizes from system.columns.
func tableColumns(tb testing.TB, conn driver.Conn, db, table string) []studyColumn {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, `SELECT name, type, data_compressed_bytes, data_uncompressed_bytes FROM system.columns
WHERE database = ? AND table = ?`, db, table)
	if err != nil {
		tb.Fatalf("system.columns: %v", err)
	}
	defer rows.Close()
	var out []studyColumn
	for rows.Next() {
		var c studyColumn
		if err := rows.Scan(&c.Name, &c.Type, &c.Compressed, &c.Uncompressed); err != nil {
			tb.Fatalf("system.columns: %v", err)
		}
		out = append(out, c)
	}
	return out
}

// exportNative writes the result of q on database db to path in ClickHouse's
// Native format, over the HTTP interface of the server the tests use.
func exportNative(ctx context.Context, db, q, path string) error {
	host, _, err := net.SplitHostPort(os.Getenv("MORAINE_CLICKHOUSE_ADDR"))
	if err != nil {
		return err
	}
	port := os.Getenv("MORAINE_CLICKHOUSE_HTTP_PORT")
	if port == "" {
		port = "8123"
	}
	u := "http://" + net.JoinHostPort(host, port) + "/?database=" + url.QueryEscape(db)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(q+" FORMAT Native"))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("export: %s: %s", resp.Status, msg)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// studyType is the study's type for a column: FixedString(20) for
// addresses, LowCardinality(String) for the low-cardinality strings, else
// the column's own.
func studyType(table string, c studyColumn) string {
	switch {
	case studyAddresses[c.Name] && c.Type == "String":
		return "FixedString(20)"
	case studyLowCard[table][c.Name] && c.Type == "String":
		return "LowCardinality(String)"
	}
	return c.Type
}

// studyDDL creates a MergeTree table of cols, typed and (with codecOf)
// compressed per column.
func studyDDL(name, orderBy string, cols []studyColumn, typeOf, codecOf func(studyColumn) string) string {
	var defs []string
	for _, c := range cols {
		def := c.Name + " " + typeOf(c)
		if codecOf != nil {
			def += " CODEC(" + codecOf(c) + ")"
		}
		defs = append(defs, def)
	}
	return fmt.Sprintf("CREATE TABLE %s (%s) ENGINE = MergeTree ORDER BY (%s)", name, strings.Join(defs, ", "), orderBy)
}
