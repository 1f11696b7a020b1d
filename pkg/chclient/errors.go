package chclient

import (
	"errors"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Unavailable reports whether err means that ClickHouse could not answer
// right now (an outage: the request may succeed later or on another
// replica), as opposed to a server exception about the statement itself (a
// bug, which retrying repeats). The statements are fixed and tested, so
// every failure that is not such an exception is an outage: refused or
// reset connections, EOF, deadlines, an exhausted pool, and the server
// exceptions that report timeouts, overload, network trouble and memory.
func Unavailable(err error) bool {
	var ex *clickhouse.Exception
	if !errors.As(err, &ex) {
		return err != nil
	}
	switch ex.Code {
	case 159, // TIMEOUT_EXCEEDED
		160, // TOO_SLOW
		202, // TOO_MANY_SIMULTANEOUS_QUERIES
		203, // NO_FREE_CONNECTION
		209, // SOCKET_TIMEOUT
		210, // NETWORK_ERROR
		241, // MEMORY_LIMIT_EXCEEDED
		242, // TABLE_IS_READ_ONLY: a replica without its ZooKeeper session
		279, // ALL_CONNECTION_TRIES_FAILED
		394: // QUERY_WAS_CANCELLED
		return true
	}
	return false
}

// Classify names the failed statement name of package pkg: an outage
// (Unavailable) is wrapped in unavailable, the package's sentinel that
// callers test with errors.Is (to answer 503, say); any other failure reads
// "pkg: name: err".
func Classify(err, unavailable error, pkg, name string) error {
	if Unavailable(err) {
		return fmt.Errorf("%w: %s: %w", unavailable, name, err)
	}
	return fmt.Errorf("%s: %s: %w", pkg, name, err)
}

// TooManyRows reports ClickHouse's refusal of a read over one of its row
// bounds (TOO_MANY_ROWS): max_rows_to_read, refused from the index before
// any data is read, or max_rows_to_group_by, refused once the aggregation
// holds more groups. Callers set such a bound to have a read too large for
// them answered at once instead of running to the timeout.
func TooManyRows(err error) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && ex.Code == 158
}

// ConnectionFailed reports whether err is a failure of the connection
// itself (no answer from the server at all), which a read may retry at once
// on a new connection: the pool dials the replicas again in order, so a
// replica that died mid-query is skipped.
func ConnectionFailed(err error) bool {
	var ex *clickhouse.Exception
	return err != nil && !errors.As(err, &ex)
}
