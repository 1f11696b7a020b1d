package chclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
)

func TestErrorClasses(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		err                     error
		unavailable, connFailed bool
	}{
		{"nil", nil, false, false},
		{"connection reset", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true, true},
		{"deadline", context.DeadlineExceeded, true, true},
		{"timeout exception", &clickhouse.Exception{Code: 159}, true, false},
		{"read-only replica (ZooKeeper away)", fmt.Errorf("insert: %w", &clickhouse.Exception{Code: 242}), true, false},
		// A statement the server rejects is a bug: retrying repeats it.
		{"syntax error", &clickhouse.Exception{Code: 62}, false, false},
		{"unknown table", fmt.Errorf("q: %w", &clickhouse.Exception{Code: 60}), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unavailable(tc.err); got != tc.unavailable {
				t.Errorf("Unavailable = %v, want %v", got, tc.unavailable)
			}
			if got := ConnectionFailed(tc.err); got != tc.connFailed {
				t.Errorf("ConnectionFailed = %v, want %v", got, tc.connFailed)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	errDown := errors.New("pkg: clickhouse unavailable")
	outage := Classify(io.ErrUnexpectedEOF, errDown, "pkg", "read")
	if !errors.Is(outage, errDown) || !errors.Is(outage, io.ErrUnexpectedEOF) || outage.Error() != "pkg: clickhouse unavailable: read: unexpected EOF" {
		t.Errorf("outage: %v", outage)
	}
	bug := Classify(&clickhouse.Exception{Code: 62, Message: "syntax"}, errDown, "pkg", "read")
	if errors.Is(bug, errDown) || bug.Error()[:11] != "pkg: read: " {
		t.Errorf("statement error: %v", bug)
	}
}
