package usagesink

import (
	"context"
	"errors"
	"fmt"
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
	for {
		if err := s.retentionPass(ctx, conn, logger); err != nil && ctx.Err() == nil {
			logger.Warn("usage retention failed; trying again later", "err", err)
		}
		if !obs.Sleep(ctx, s.cfg.RetentionInterval) {
			return
		}
	}
}

// retentionPass drops, in each table, the months past its retention; it
// goes on past a table that fails and returns the failures.
func (s *Sink) retentionPass(ctx context.Context, conn driver.Conn, logger *slog.Logger) error {
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
	var errs []error
	for _, t := range tables {
		if t.retention <= 0 {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		dropped, err := chclient.DropPartitionsBefore(dctx, conn, t.name, s.deps.Now().Add(-t.retention))
		cancel()
		s.m.dropped.Add(float64(len(dropped)))
		if len(dropped) > 0 {
			logger.Info("usage retention: dropped old months", "table", t.name, "months", dropped, "retention", t.retention.String())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.name, err))
		}
	}
	return errors.Join(errs...)
}
