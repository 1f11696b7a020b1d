package chclient

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Lazy holds a connection that is set once ClickHouse answers (Open may wait
// long for it), so a server can listen, and answer "unavailable", before its
// database is up. The zero value holds none.
type Lazy struct{ p atomic.Pointer[driver.Conn] }

// Set hands over the connection.
func (l *Lazy) Set(conn driver.Conn) { l.p.Store(&conn) }

// Get returns the connection, or an error wrapping unavailable (the
// caller's sentinel, which its callers test for) until Set.
func (l *Lazy) Get(unavailable error) (driver.Conn, error) {
	p := l.p.Load()
	if p == nil {
		return nil, fmt.Errorf("%w: not connected yet", unavailable)
	}
	return *p, nil
}

// WithTimeout bounds a statement on both ends: the returned context ends
// after timeout, and ClickHouse's max_execution_time (whole seconds, rounded
// up, as the server counts them) stops the work on the server too, which a
// client that gave up would otherwise leave running. settings are sent with
// it (nil for none); max_execution_time is added to them.
func WithTimeout(ctx context.Context, timeout time.Duration, settings clickhouse.Settings) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	all := clickhouse.Settings{"max_execution_time": int((timeout + time.Second - 1) / time.Second)}
	for k, v := range settings {
		all[k] = v
	}
	return clickhouse.Context(ctx, clickhouse.WithSettings(all)), cancel
}
