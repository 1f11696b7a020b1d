package nftmeta

import (
	"context"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Reader reads NFT metadata from ClickHouse for the API's routes.
type Reader struct{ store *Store }

// NewReader returns a reader whose reads each get timeout (5 s when 0). It
// does no I/O; hand it its connection with SetConn.
func NewReader(timeout time.Duration) *Reader { return &Reader{store: NewStore(timeout)} }

// SetConn hands the reader its connection; until then Lookup fails with
// ErrUnavailable.
func (r *Reader) SetConn(conn driver.Conn) { r.store.SetConn(conn) }

// Lookup returns the metadata of each ref; a ref never indexed is absent
// from the map (the caller renders {indexStatus: "UNINDEXED"} and tokenUri
// ""). A token whose fetch is being retried has the status of its last
// attempt (THROTTLED_TOKEN_URI, UNREACHABLE_TOKEN_URI, ...) until a retry
// ends otherwise.
func (r *Reader) Lookup(ctx context.Context, refs []Ref) (map[Ref]Metadata, error) {
	rows, err := r.store.Rows(ctx, refs)
	if err != nil {
		return nil, err
	}
	out := make(map[Ref]Metadata, len(rows))
	for ref, row := range rows {
		out[ref] = row.Metadata
	}
	return out, nil
}
