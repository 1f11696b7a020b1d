package clickhouse

import (
	"fmt"
	"regexp"
	"strings"
)

// ZooKeeperPath is where a replicated table keeps its replication log in
// ZooKeeper (or ClickHouse Keeper): one path per shard, database and table.
// {shard} and {replica} are the macros of each server's configuration; the
// database name is spelled out (18.16 has no {database} macro), so several
// moraine databases on one cluster (deployments, tests) never share a log.
const ZooKeeperPath = "/clickhouse/tables/{shard}/%s/%s"

var (
	// createTable and createView capture the statement head up to and
	// including the object's name.
	createTable = regexp.MustCompile(`(?is)^(CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+([A-Za-z_][A-Za-z0-9_]*))\s*\(`)
	createView  = regexp.MustCompile(`(?is)^(CREATE\s+MATERIALIZED\s+VIEW\s+IF\s+NOT\s+EXISTS\s+([A-Za-z_][A-Za-z0-9_]*))\s+TO\s`)
	alterTable  = regexp.MustCompile(`(?is)^(ALTER\s+TABLE\s+([A-Za-z_][A-Za-z0-9_]*))\s`)
	dropTable   = regexp.MustCompile(`(?is)^(DROP\s+TABLE\s+IF\s+EXISTS\s+([A-Za-z_][A-Za-z0-9_]*))\s*$`)
	// viewTarget is the TO table of a view, after its name.
	viewTarget = regexp.MustCompile(`(?i)^(\s+TO\s+)([A-Za-z_][A-Za-z0-9_]*)\b`)
	// tableRef is a table a view's SELECT reads.
	tableRef = regexp.MustCompile(`(?i)\b(FROM|JOIN)\s+([A-Za-z_][A-Za-z0-9_]*)\b`)
	// engine matches a MergeTree-family engine with its optional arguments
	// (no nested parentheses: the family's arguments are column names).
	engine = regexp.MustCompile(`(?is)ENGINE\s*=\s*([A-Za-z]*MergeTree)(\s*\(([^()]*)\))?`)
)

// OnCluster rewrites one migration statement for a cluster: DDL runs on
// every server of the cluster (ON CLUSTER, through the distributed DDL
// queue, so a server that is down applies it when it returns; an ALTER
// TABLE runs on this server and replication carries it), and
// MergeTree-family engines become their Replicated form, keyed in
// ZooKeeper by shard, database and table. Materialized views stay on each
// server's local tables: a view fires on the inserts its server receives,
// and the target table's replication carries the rows to the other
// replicas.
//
// Migrations are written for a single server; the statement shapes this
// understands are the ones migrations may use (TestMigrationsRewriteForCluster
// keeps it so): CREATE TABLE IF NOT EXISTS t (...) ENGINE = <X>MergeTree...,
// CREATE MATERIALIZED VIEW IF NOT EXISTS v TO t AS SELECT ..., ALTER TABLE
// t ... and DROP TABLE IF EXISTS t. Anything else is an error rather than a
// statement that silently reaches one server only.
//
// Every table name is qualified with the database: each server runs the
// statement from the DDL queue in its default database, not the one the
// statement was sent in.
func OnCluster(stmt, cluster, database string) (string, error) {
	stmt = strings.TrimSpace(stmt)
	onCluster := " ON CLUSTER " + cluster
	qualified := func(m []int) string { return stmt[:m[4]] + database + "." + stmt[m[4]:m[3]] }
	if m := createTable.FindStringSubmatchIndex(stmt); m != nil {
		table := stmt[m[4]:m[5]]
		e := engine.FindStringSubmatchIndex(stmt)
		if e == nil {
			return "", fmt.Errorf("table %s: only MergeTree-family engines can be replicated", table)
		}
		family := stmt[e[2]:e[3]]
		if strings.HasPrefix(family, "Replicated") {
			return "", fmt.Errorf("table %s: migrations name the plain engine; the cluster rewrite makes it Replicated", table)
		}
		args := []string{fmt.Sprintf("'"+ZooKeeperPath+"'", database, table), "'{replica}'"}
		if e[6] >= 0 {
			if a := strings.TrimSpace(stmt[e[6]:e[7]]); a != "" {
				args = append(args, a)
			}
		}
		replicated := "ENGINE = Replicated" + family + "(" + strings.Join(args, ", ") + ")"
		out := qualified(m) + onCluster + stmt[m[3]:e[0]] + replicated + stmt[e[1]:]
		return out, nil
	}
	if m := createView.FindStringSubmatchIndex(stmt); m != nil {
		// "... v TO t AS SELECT ... FROM s": qualify t and every table read.
		return qualified(m) + onCluster + qualifyTables(stmt[m[3]:], database), nil
	}
	if m := alterTable.FindStringSubmatchIndex(stmt); m != nil {
		// Not ON CLUSTER: on a cluster every table is Replicated, and a
		// replicated table's ALTER reaches the other replicas through
		// ZooKeeper. Through the DDL queue, the replicas race for it, and
		// ClickHouse 18.16's DDL worker can stop for good on the loser's
		// "Node exists" (every later ON CLUSTER statement then times out on
		// that server until it restarts).
		return qualified(m) + stmt[m[3]:], nil
	}
	if m := dropTable.FindStringSubmatchIndex(stmt); m != nil {
		return qualified(m) + onCluster, nil
	}
	return "", fmt.Errorf("statement cannot run on a cluster (want CREATE TABLE/MATERIALIZED VIEW IF NOT EXISTS, ALTER TABLE or DROP TABLE IF EXISTS): %.60s", stmt)
}

// ObjectName is the table or view a migration statement creates or
// alters ("" for other statements).
func ObjectName(stmt string) string {
	stmt = strings.TrimSpace(stmt)
	for _, re := range []*regexp.Regexp{createTable, createView, alterTable} {
		if m := re.FindStringSubmatch(stmt); m != nil {
			return m[2]
		}
	}
	return ""
}

// qualifyTables prefixes the database to the target of TO and to every
// table after FROM or JOIN that is not qualified already or a table
// function.
func qualifyTables(sql, database string) string {
	sql = viewTarget.ReplaceAllString(sql, "${1}"+database+".${2}")
	var b strings.Builder
	last := 0
	for _, m := range tableRef.FindAllStringSubmatchIndex(sql, -1) {
		end := m[5]
		if end < len(sql) && (sql[end] == '.' || sql[end] == '(') {
			continue
		}
		b.WriteString(sql[last:m[4]])
		b.WriteString(database + ".")
		last = m[4]
	}
	b.WriteString(sql[last:])
	return b.String()
}
