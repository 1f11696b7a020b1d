// Package clickhouse holds moraine's ClickHouse schema: numbered migrations
// embedded in every binary and applied at start-up.
//
// Each migration file is NNNNNN_name.up.sql and may hold several statements
// separated by ";" at the end of a line. Statements must be idempotent
// (CREATE ... IF NOT EXISTS) and must run on ClickHouse 18.16 and current
// releases alike: no Map, JSON, Bool, DateTime64, UInt256, skipping indices.
// Several services may migrate at once; idempotent statements make that safe.
package clickhouse

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// Migration is one numbered schema step.
type Migration struct {
	Version    uint32
	Name       string
	Statements []string
}

var fileName = regexp.MustCompile(`^(\d{6})_([a-z0-9_]+)\.up\.sql$`)

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q: name must be NNNNNN_name.up.sql", e.Name())
		}
		v, _ := strconv.ParseUint(m[1], 10, 32)
		body, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: uint32(v), Name: m[2], Statements: splitStatements(string(body))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != uint32(i+1) {
			return nil, fmt.Errorf("migration %d (%s): versions must run 1, 2, 3... without gaps", m.Version, m.Name)
		}
	}
	return out, nil
}

// splitStatements cuts a file at ";" that ends a line and drops comment-only
// chunks.
func splitStatements(body string) []string {
	var out []string
	for _, chunk := range strings.Split(body, ";\n") {
		var lines []string
		for _, l := range strings.Split(chunk, "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "--") {
				lines = append(lines, l)
			}
		}
		if s := strings.TrimSuffix(strings.TrimSpace(strings.Join(lines, "\n")), ";"); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Apply runs every migration newer than the newest one recorded in
// schema_migrations, in order, and records each. conn must already use
// moraine's database. It returns the versions it applied.
func Apply(ctx context.Context, conn driver.Conn) ([]uint32, error) {
	ms, err := Migrations()
	if err != nil {
		return nil, err
	}
	// Migration 1 creates schema_migrations itself; it is idempotent, so run
	// it unconditionally before reading the table.
	for _, s := range ms[0].Statements {
		if err := conn.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("migration %d: %w", ms[0].Version, err)
		}
	}
	done := map[uint32]bool{}
	rows, err := conn.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		done[v] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var applied []uint32
	for _, m := range ms {
		if done[m.Version] {
			continue
		}
		for i, s := range m.Statements {
			if err := conn.Exec(ctx, s); err != nil {
				return applied, fmt.Errorf("migration %d_%s statement %d: %w", m.Version, m.Name, i+1, err)
			}
		}
		batch, err := conn.PrepareBatch(ctx, "INSERT INTO schema_migrations (version, name, applied_at)")
		if err != nil {
			return applied, fmt.Errorf("record migration %d: %w", m.Version, err)
		}
		if err := batch.Append(m.Version, m.Name, time.Now().UTC().Truncate(time.Second)); err != nil {
			return applied, err
		}
		if err := batch.Send(); err != nil {
			return applied, fmt.Errorf("record migration %d: %w", m.Version, err)
		}
		applied = append(applied, m.Version)
	}
	return applied, nil
}
