package chclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

func TestLazy(t *testing.T) {
	errDown := errors.New("down")
	var l Lazy
	if conn, err := l.Get(errDown); conn != nil || !errors.Is(err, errDown) {
		t.Fatalf("before Set: %v, %v; want nil and an error wrapping errDown", conn, err)
	}
	var want driver.Conn = fakeConn{}
	l.Set(want)
	if conn, err := l.Get(errDown); err != nil || conn != want {
		t.Fatalf("after Set: %v, %v", conn, err)
	}
}

// fakeConn is a driver.Conn that is never used, only compared.
type fakeConn struct{ driver.Conn }

func TestWithTimeoutEndsTheContext(t *testing.T) {
	ctx, cancel := WithTimeout(context.Background(), 1500*time.Millisecond, nil)
	defer cancel()
	dl, ok := ctx.Deadline()
	if !ok || time.Until(dl) > 1500*time.Millisecond || time.Until(dl) < time.Second {
		t.Fatalf("deadline %v (set %v)", time.Until(dl), ok)
	}
	cancel()
	if ctx.Err() == nil {
		t.Fatal("cancel did not end the context")
	}
}
