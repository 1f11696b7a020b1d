package usagesink

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/obs"
)

// topN is how many accounts the top-accounts gauges name.
const topN = 10

// keyless is the account label of requests without a valid key.
const keyless = "none"

const (
	// qTop sums the last hour of the minute rollup per account, failed
	// (4xx, 5xx) and not apart.
	qTop = `SELECT account_id, status >= 400 AS failed, countMerge(requests), sumMerge(compute_units)
FROM api_usage_minutes WHERE bucket >= ? GROUP BY account_id, failed`
	qAccountNames = `SELECT id, name FROM accounts FINAL WHERE id IN ?`
)

type accountUsage struct {
	id               string
	requests, errors uint64
	units            uint64
}

// runTop refreshes the top-accounts gauges every TopInterval until ctx
// ends.
func (s *Sink) runTop(ctx context.Context, conn driver.Conn, logger *slog.Logger) {
	for {
		if err := s.refreshTop(ctx, conn); err != nil && ctx.Err() == nil {
			logger.Debug("top accounts not refreshed", "err", err)
		}
		if !obs.Sleep(ctx, s.cfg.TopInterval) {
			return
		}
	}
}

func (s *Sink) refreshTop(ctx context.Context, conn driver.Conn) error {
	qctx, cancel := chclient.WithTimeout(ctx, 30*time.Second, nil)
	defer cancel()
	since := uint32(s.deps.Now().Add(-time.Hour).Unix())
	rows, err := conn.Query(qctx, qTop, since)
	if err != nil {
		return err
	}
	by := map[string]*accountUsage{}
	for rows.Next() {
		var id string
		var failed uint8
		var n, cu uint64
		if err := rows.Scan(&id, &failed, &n, &cu); err != nil {
			rows.Close()
			return err
		}
		u := by[id]
		if u == nil {
			u = &accountUsage{id: id}
			by[id] = u
		}
		u.requests += n
		u.units += cu
		if failed == 1 {
			u.errors += n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	all := make([]*accountUsage, 0, len(by))
	for _, u := range by {
		all = append(all, u)
	}
	top := func(less func(a, b *accountUsage) bool) []*accountUsage {
		sort.Slice(all, func(i, j int) bool {
			if less(all[i], all[j]) != less(all[j], all[i]) {
				return less(all[i], all[j])
			}
			return all[i].id < all[j].id
		})
		return append([]*accountUsage(nil), all[:min(topN, len(all))]...)
	}
	byRequests := top(func(a, b *accountUsage) bool { return a.requests > b.requests })
	byUnits := top(func(a, b *accountUsage) bool { return a.units > b.units })
	var ids []any
	for _, u := range append(byRequests, byUnits...) {
		if u.id != "" {
			ids = append(ids, u.id)
		}
	}
	names := map[string]string{}
	if len(ids) > 0 {
		nrows, err := conn.Query(qctx, qAccountNames, clickhouse.GroupSet{Value: ids})
		if err != nil {
			return err
		}
		for nrows.Next() {
			var id, name string
			if err := nrows.Scan(&id, &name); err != nil {
				nrows.Close()
				return err
			}
			names[id] = name
		}
		nrows.Close()
	}
	label := func(u *accountUsage) (string, string) {
		if u.id == "" {
			return keyless, "keyless requests"
		}
		return u.id, names[u.id]
	}
	s.m.topRequests.Reset()
	s.m.topErrors.Reset()
	s.m.topUnits.Reset()
	for _, u := range byRequests {
		id, name := label(u)
		s.m.topRequests.WithLabelValues(id, name).Set(float64(u.requests))
		s.m.topErrors.WithLabelValues(id, name).Set(float64(u.errors))
	}
	for _, u := range byUnits {
		id, name := label(u)
		s.m.topUnits.WithLabelValues(id, name).Set(float64(u.units))
	}
	return nil
}
