package chclient

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// PartitionsStatement lists the partitions a table of the connection's
// database holds (exported for the checks on current ClickHouse).
const PartitionsStatement = `SELECT DISTINCT partition FROM system.parts
WHERE database = currentDatabase() AND table = ? AND active`

// periodPartition is a partition of a table partitioned by UTC month
// (toYYYYMM: "202601") or day (toYYYYMMDD: "20260131").
var periodPartition = regexp.MustCompile(`^[0-9]{6}([0-9]{2})?$`)

// DropPartitionsBefore drops the partitions of table whose period (a UTC
// month or day: the table is partitioned by toYYYYMM or toYYYYMMDD of a
// time in UTC) ends at or before cutoff, and returns their ids. ClickHouse
// 18.16 has no TTL, and dropping a partition removes its files at once,
// where a DELETE mutation would rewrite every part; so a table keeps
// between its retention and its retention plus one period. On a cluster the
// drop of a replicated table reaches every replica. Two instances dropping
// the same partition at once is harmless.
//
// table is moraine's own table name (it is spelled into the ALTER, which
// takes no bound parameters); ctx bounds the whole pass.
func DropPartitionsBefore(ctx context.Context, conn driver.Conn, table string, cutoff time.Time) ([]string, error) {
	rows, err := conn.Query(ctx, PartitionsStatement, table)
	if err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	var parts []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			rows.Close()
			return nil, err
		}
		parts = append(parts, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list partitions of %s: %w", table, err)
	}
	sort.Strings(parts)
	var dropped []string
	for _, p := range parts {
		if !periodPartition.MatchString(p) {
			return dropped, fmt.Errorf("partition %q of %s is not a month (YYYYMM) or a day (YYYYMMDD)", p, table)
		}
		var y, m, d int
		var end time.Time
		if len(p) == 6 {
			fmt.Sscanf(p, "%4d%2d", &y, &m)
			end = time.Date(y, time.Month(m)+1, 1, 0, 0, 0, 0, time.UTC)
		} else {
			fmt.Sscanf(p, "%4d%2d%2d", &y, &m, &d)
			end = time.Date(y, time.Month(m), d+1, 0, 0, 0, 0, time.UTC)
		}
		if end.After(cutoff) {
			continue
		}
		// p is six or eight digits (checked above).
		if err := conn.Exec(ctx, "ALTER TABLE "+table+" DROP PARTITION "+p); err != nil {
			return dropped, fmt.Errorf("drop partition %s of %s: %w", p, table, err)
		}
		dropped = append(dropped, p)
	}
	return dropped, nil
}
