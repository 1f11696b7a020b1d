package usagesink

import (
	"context"
	"log/slog"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/chclient"
	"github.com/moraine-data/moraine/pkg/obs"
)

// runRetention drops the log's and the rollups' months past their
// retention at once and then every RetentionInterval, until ctx ends. A
// failed pass is logged and tried again at the next.
func (s *Sink) runRetention(ctx context.Context, conn driver.Conn, logger *slog.Logger) {
	tables := []struct {
		name      string
		retention time.Duration
	}{
		{"api_requests", s.cfg.LogRetention},
		{"api_requests_by_time", s.cfg.LogRetention},
		{"api_usage_minutes", s.cfg.LogRetention},
		{"api_usage_global_minutes", s.cfg.LogRetention},
		{"api_usage_hours", s.cfg.MetricsRetention},
		{"api_usage_global_hours", s.cfg.MetricsRetention},
		{"api_usage_key_hours", s.cfg.MetricsRetention},
		{"api_usage_days", s.cfg.MetricsRetention},
		{"api_usage_global_days", s.cfg.MetricsRetention},
		{"api_usage_key_days", s.cfg.MetricsRetention},
	}
	for {
		for _, t := range tables {
			if t.retention <= 0 {
				continue
			}
			dctx, cancel := context.WithTimeout(ctx, time.Minute)
			dropped, err := chclient.DropPartitionsBefore(dctx, conn, t.name, s.deps.Now().Add(-t.retention))
			cancel()
			s.m.dropped.Add(float64(len(dropped)))
			switch {
			case err != nil && ctx.Err() == nil:
				logger.Warn("usage retention failed; trying again later", "table", t.name, "err", err, "dropped", dropped)
			case len(dropped) > 0:
				logger.Info("usage retention: dropped old months", "table", t.name, "months", dropped, "retention", t.retention.String())
			}
		}
		if !obs.Sleep(ctx, s.cfg.RetentionInterval) {
			return
		}
	}
}
