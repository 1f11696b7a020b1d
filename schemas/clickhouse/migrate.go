// Package clickhouse holds moraine's ClickHouse schema: numbered migrations
// embedded in every binary and applied at start-up.
//
// Each migration file is NNNNNN_name.up.sql and may hold several statements
// separated by ";" at the end of a line. Statements must be idempotent
// (CREATE ... IF NOT EXISTS, DROP TABLE IF EXISTS) and must run on
// ClickHouse 18.16 and current releases alike: no Map, JSON, Bool,
// DateTime64, UInt256, skipping indices.
// Several services may migrate at once; idempotent statements make that safe.
//
// On a cluster (Options.Cluster) each statement is rewritten to run ON
// CLUSTER with replicated engines, an ALTER TABLE on one server
// (OnCluster); migrations themselves are written for one server.
package clickhouse

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
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

// Options say where and how migrations are applied.
type Options struct {
	// Cluster, when set, runs the statements ON CLUSTER with replicated
	// engines, an ALTER TABLE on this server only (OnCluster): the servers
	// of the named cluster share the tables' contents, and their ALTERs,
	// through ZooKeeper.
	Cluster string
	// Database is moraine's database, the one conn uses (it names the
	// replicated tables' ZooKeeper paths).
	Database string
	// DDLTimeout bounds how long an ON CLUSTER statement waits for every
	// server (distributed_ddl_task_timeout). A server that is down applies
	// the statement from the DDL queue when it returns, so a timeout is
	// not an error once this server has it. Default 30 s.
	DDLTimeout time.Duration
	// Logger receives warnings (nil: none).
	Logger *slog.Logger
}

// Apply brings the server conn is connected to up to the newest migration
// and returns the versions it ran. conn must already use moraine's
// database.
//
// A migration runs when schema_migrations does not record it, when a
// table or view it creates is missing on this server (a replica added to
// the cluster after the migration ran), or when one it drops is there. An
// object that a later migration drops is neither missing nor created
// again. When nothing is pending it sends no DDL at all: on a cluster, ON
// CLUSTER statements wait for every server, and a service must start while
// a replica is down.
//
// Every statement is idempotent (IF NOT EXISTS, or an ADD or DROP COLUMN
// that Apply skips when the column is there or gone: ColumnChange), so several services
// migrating at once, or a migration interrupted halfway and run again, end
// in the same schema (TestConcurrentApply).
func Apply(ctx context.Context, conn driver.Conn, opts Options) ([]uint32, error) {
	ms, err := Migrations()
	if err != nil {
		return nil, err
	}
	if opts.Cluster != "" && opts.Database == "" {
		return nil, errors.New("migrate: Options.Database is required with a cluster")
	}
	existing, err := localObjects(ctx, conn)
	if err != nil {
		return nil, err
	}
	done := map[uint32]bool{}
	if existing["schema_migrations"] {
		if done, err = recorded(ctx, conn); err != nil {
			return nil, err
		}
	}
	droppedBy := DroppedBy(ms)
	// gone reports whether a later migration than v drops name: such an
	// object is not missing where it is absent, and not created again.
	gone := func(name string, v uint32) bool { return droppedBy[name] > v }
	var applied []uint32
	for _, m := range ms {
		pending := !done[m.Version]
		for _, s := range m.Statements {
			if name := ObjectName(s); name != "" && !existing[name] && !gone(name, m.Version) {
				pending = true
			}
			if name := DroppedObject(s); name != "" && existing[name] {
				pending = true
			}
			if c, ok := ColumnChange(s); ok {
				has, err := hasColumn(ctx, conn, c.Table, c.Column)
				if err != nil {
					return applied, err
				}
				pending = pending || has != c.Add
			}
		}
		if !pending {
			continue
		}
		for i, s := range m.Statements {
			name := ObjectName(s)
			if name != "" && gone(name, m.Version) && !existing[name] {
				continue
			}
			if err := execColumnChange(ctx, conn, opts, s); err != nil {
				return applied, fmt.Errorf("migration %d_%s statement %d: %w", m.Version, m.Name, i+1, err)
			}
			if name != "" {
				existing[name] = true
			}
			if name := DroppedObject(s); name != "" {
				delete(existing, name)
			}
		}
		if done[m.Version] {
			continue // recorded already: only this server lacked its objects
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

// EnsureDatabase creates opts.Database (on every server of opts.Cluster)
// unless this server has it already; conn may use any database. A cluster
// must be known to the server and have one shard: moraine replicates its
// tables but does not shard them (docs/operating-a-cluster.md), and on a
// cluster of several shards its writes would all land in the shard of the
// replica it connects to.
func EnsureDatabase(ctx context.Context, conn driver.Conn, opts Options) error {
	if opts.Cluster != "" {
		var shards, replicas uint64
		if err := conn.QueryRow(ctx, "SELECT uniqExact(shard_num), count() FROM system.clusters WHERE cluster = ?", opts.Cluster).Scan(&shards, &replicas); err != nil {
			return fmt.Errorf("look up cluster %s: %w", opts.Cluster, err)
		}
		switch {
		case replicas == 0:
			return fmt.Errorf("cluster %s is not in the server's remote_servers", opts.Cluster)
		case shards > 1:
			return fmt.Errorf("cluster %s has %d shards: moraine replicates its tables but does not shard them; give it a cluster of one shard", opts.Cluster, shards)
		}
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = ?", opts.Database).Scan(&n); err != nil {
		return fmt.Errorf("look up database %s: %w", opts.Database, err)
	}
	if n > 0 {
		return nil
	}
	stmt := "CREATE DATABASE IF NOT EXISTS " + opts.Database
	if opts.Cluster == "" {
		return conn.Exec(ctx, stmt)
	}
	err := conn.Exec(ddlContext(ctx, opts), stmt+" ON CLUSTER "+opts.Cluster)
	if !isDDLTimeout(err) {
		return err
	}
	if qerr := conn.QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = ?", opts.Database).Scan(&n); qerr != nil || n == 0 {
		// The timeout says why, the lookup's error (if any) why it could not tell.
		return fmt.Errorf("this server has not created it either: %w", errors.Join(err, qerr))
	}
	opts.logger().Warn("a cluster server has not created the database yet; it will when it is back", "database", opts.Database, "cluster", opts.Cluster)
	return nil
}

// DroppedObject is the table or view a DROP TABLE IF EXISTS statement
// drops ("" for other statements). A migration drops what an earlier one
// created when it replaces it (a view whose query changes: 18.16 cannot
// alter one).
func DroppedObject(stmt string) string {
	if m := dropTable.FindStringSubmatch(strings.TrimSpace(stmt)); m != nil {
		return m[2]
	}
	return ""
}

// DroppedBy maps each object a migration drops to the newest migration
// that drops it.
func DroppedBy(ms []Migration) map[string]uint32 {
	out := map[string]uint32{}
	for _, m := range ms {
		for _, s := range m.Statements {
			if name := DroppedObject(s); name != "" {
				out[name] = m.Version
			}
		}
	}
	return out
}

// clickHouseTimeoutExceeded is TIMEOUT_EXCEEDED: an ON CLUSTER statement
// that some server has not executed within distributed_ddl_task_timeout.
const clickHouseTimeoutExceeded = 159

// execDDL runs one migration statement on this server, or on the cluster.
func execDDL(ctx context.Context, conn driver.Conn, opts Options, stmt string) error {
	if opts.Cluster == "" {
		return conn.Exec(ctx, stmt)
	}
	rewritten, err := OnCluster(stmt, opts.Cluster, opts.Database)
	if err != nil {
		return err
	}
	err = conn.Exec(ddlContext(ctx, opts), rewritten)
	if !isDDLTimeout(err) {
		return err
	}
	// Some server has not run it yet (down, or slow): it will from the DDL
	// queue. What matters here is that this server has the object.
	objects, lerr := localObjects(ctx, conn)
	if lerr != nil {
		return err
	}
	name := ObjectName(stmt)
	if dropped := DroppedObject(stmt); dropped != "" {
		if objects[dropped] {
			return err
		}
		name = dropped
	} else if name == "" || !objects[name] {
		return err
	}
	opts.logger().Warn("a cluster server has not applied a migration statement yet; it will when it is back",
		"object", name, "cluster", opts.Cluster, "err", err)
	return nil
}

func ddlContext(ctx context.Context, opts Options) context.Context {
	timeout := opts.DDLTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{
		"distributed_ddl_task_timeout": int(timeout.Seconds()),
	}))
}

func isDDLTimeout(err error) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && ex.Code == clickHouseTimeoutExceeded
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// A Column is an ALTER TABLE t ADD COLUMN c ... or DROP COLUMN c.
// ClickHouse 18.16 has neither ADD COLUMN IF NOT EXISTS nor DROP COLUMN
// IF EXISTS, so Apply makes these statements idempotent itself
// (execColumnChange).
type Column struct {
	Table, Column string
	// Add is true for ADD COLUMN, false for DROP COLUMN.
	Add bool
}

// ColumnChange recognises an ADD COLUMN or DROP COLUMN statement.
func ColumnChange(stmt string) (Column, bool) {
	m := columnChange.FindStringSubmatch(strings.TrimSpace(stmt))
	if m == nil {
		return Column{}, false
	}
	return Column{Table: m[1], Column: m[3], Add: strings.EqualFold(m[2], "ADD")}, true
}

var columnChange = regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+([A-Za-z_][A-Za-z0-9_]*)\s+(ADD|DROP)\s+COLUMN\s+([A-Za-z_][A-Za-z0-9_]*)(\s|$)`)

// hasColumn reports whether this server's table has column.
func hasColumn(ctx context.Context, conn driver.Conn, table, column string) (bool, error) {
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = currentDatabase() AND table = ? AND name = ?", table, column).Scan(&n); err != nil {
		return false, fmt.Errorf("look up column %s.%s: %w", table, column, err)
	}
	return n > 0, nil
}

// execColumnChange runs stmt (execDDL), except that an ADD COLUMN of a
// column this server's table has, or a DROP COLUMN of one it lacks, is
// skipped, and one that fails because another service made the change
// meanwhile succeeds: the IF [NOT] EXISTS that 18.16 lacks.
func execColumnChange(ctx context.Context, conn driver.Conn, opts Options, stmt string) error {
	c, ok := ColumnChange(stmt)
	if !ok {
		return execDDL(ctx, conn, opts, stmt)
	}
	if has, err := hasColumn(ctx, conn, c.Table, c.Column); err != nil || has == c.Add {
		return err
	}
	err := execDDL(ctx, conn, opts, stmt)
	if err != nil {
		if has, herr := hasColumn(ctx, conn, c.Table, c.Column); herr == nil && has == c.Add {
			return nil
		}
	}
	return err
}

// localObjects lists the tables and views of conn's database on this
// server.
func localObjects(ctx context.Context, conn driver.Conn) (map[string]bool, error) {
	return readSet[string](ctx, conn, "list tables", "SELECT name FROM system.tables WHERE database = currentDatabase()")
}

// recorded reads the applied versions from schema_migrations.
func recorded(ctx context.Context, conn driver.Conn) (map[uint32]bool, error) {
	return readSet[uint32](ctx, conn, "read schema_migrations", "SELECT version FROM schema_migrations")
}

// readSet reads the one column q selects into a set; a failed query is
// named what.
func readSet[K comparable](ctx context.Context, conn driver.Conn, what, q string) (map[K]bool, error) {
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	out := map[K]bool{}
	for rows.Next() {
		var v K
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out[v] = true
	}
	return out, rows.Err()
}
