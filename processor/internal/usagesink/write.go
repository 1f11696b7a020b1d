package usagesink

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/schemas/record"
)

// row is one request record with where it came from.
type row struct {
	rec       *record.ApiRequest
	partition int32
	offset    int64
}

const (
	iRequests = `INSERT INTO api_requests (account_id, at, request_id, key_id, key_alias, route, operation, method, chain_id,
    status, duration_us, compute_units, client_ip, user_agent, host, region, kafka_partition, kafka_offset)`
	// qMarks reads the highest offset written per partition.
	qMarks = `SELECT kafka_partition, max(kafka_offset) FROM api_requests WHERE kafka_partition IN ? GROUP BY kafka_partition`
)

// insert writes rows in one block. The context is detached from the
// caller's cancellation and cancelled only once the deadline has passed
// (pkg/accountdb's insert says why: clickhouse-go closes a connection
// already back in its pool when an insert's context ends late).
func insert(ctx context.Context, conn driver.Conn, timeout time.Duration, rows []row) error {
	if len(rows) == 0 {
		return nil
	}
	ictx, cancel := chclient.WithTimeout(context.WithoutCancel(ctx), timeout, nil)
	defer time.AfterFunc(timeout, cancel)
	batch, err := conn.PrepareBatch(ictx, iRequests)
	if err != nil {
		return fmt.Errorf("prepare insert: %w", err)
	}
	for _, r := range rows {
		a := r.rec
		if err := batch.Append(a.AccountId, a.At, string(a.Id), a.KeyId, a.KeyAlias, a.Route, a.Operation, a.Method, a.ChainId,
			uint16(a.Status), a.DurationMicros, a.ComputeUnits, a.ClientIp, a.UserAgent, a.Host, a.Region,
			uint32(r.partition), uint64(r.offset)); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("append: %w", err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert %d request records: %w", len(rows), err)
	}
	return nil
}

// readMarks returns the highest offset in api_requests of each partition
// that has rows.
func readMarks(ctx context.Context, conn driver.Conn, timeout time.Duration, parts []int32) (map[int32]int64, error) {
	qctx, cancel := chclient.WithTimeout(ctx, timeout, nil)
	defer cancel()
	set := make([]any, len(parts))
	for i, p := range parts {
		set[i] = uint32(p)
	}
	rows, err := conn.Query(qctx, qMarks, clickhouse.GroupSet{Value: set})
	if err != nil {
		return nil, fmt.Errorf("read written offsets: %w", err)
	}
	defer rows.Close()
	out := map[int32]int64{}
	for rows.Next() {
		var p uint32
		var o uint64
		if err := rows.Scan(&p, &o); err != nil {
			return nil, err
		}
		out[int32(p)] = int64(o)
	}
	return out, rows.Err()
}
