package export

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/moraine-data/moraine/pkg/chclient"
)

// ErrUnavailable means ClickHouse cannot answer right now.
var ErrUnavailable = errors.New("export: clickhouse unavailable")

// errNotFound: no such operation (or another account's).
var errNotFound = errors.New("export: operation not found")

// operation is one version of an operation's state (table operations).
type operation struct {
	ID, AccountID, Type, Status, Code, Message string
	// Request is the job's spec as JSON.
	Request string
	// NextDate is the day a truncated export stopped before.
	NextDate string
	// Attempt is the number of the last attempt started (0: none yet);
	// Parts the parts of its file to serve once it completed.
	Attempt, Parts uint32
	Rows, Bytes    uint64
	// CreatedAt and UpdatedAt are Unix milliseconds.
	CreatedAt, UpdatedAt, Version uint64
}

const (
	opCols      = `id, account_id, type, status, code, message, request, next_date, attempt, parts, rows, bytes, created_at, updated_at, version`
	iOperation  = `INSERT INTO operations (` + opCols + `)`
	qOperation  = `SELECT ` + opCols + ` FROM operations FINAL WHERE id = ?`
	qStale      = `SELECT id FROM (SELECT id, status, updated_at FROM operations FINAL) WHERE status = 'RUNNING' AND updated_at < ?`
	iFile       = `INSERT INTO operation_files (operation_id, attempt, part, created_at, data)`
	qFile       = `SELECT data FROM operation_files FINAL WHERE operation_id = ? AND attempt = ? AND part < ? ORDER BY part`
	insertGrace = 5 * time.Second
)

// db reads and writes operations.
type db struct {
	conn    *chclient.Lazy
	timeout time.Duration
}

func (d *db) get() (driver.Conn, error) { return d.conn.Get(ErrUnavailable) }

func classify(name string, err error) error {
	return chclient.Classify(err, ErrUnavailable, "export", name)
}

// put writes a version of an operation.
func (d *db) put(ctx context.Context, o operation) error {
	return d.insert(ctx, "put_operation", iOperation, [][]any{{o.ID, o.AccountID, o.Type, o.Status, o.Code, o.Message, o.Request,
		o.NextDate, o.Attempt, o.Parts, o.Rows, o.Bytes, o.CreatedAt, o.UpdatedAt, o.Version}})
}

// operation reads the latest version of id.
func (d *db) operation(ctx context.Context, id string) (operation, error) {
	conn, err := d.get()
	if err != nil {
		return operation{}, err
	}
	ctx, cancel := chclient.WithTimeout(ctx, d.timeout, nil)
	defer cancel()
	var o operation
	err = conn.QueryRow(ctx, qOperation, id).Scan(&o.ID, &o.AccountID, &o.Type, &o.Status, &o.Code, &o.Message, &o.Request,
		&o.NextDate, &o.Attempt, &o.Parts, &o.Rows, &o.Bytes, &o.CreatedAt, &o.UpdatedAt, &o.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return operation{}, errNotFound
	}
	if err != nil {
		return operation{}, classify("operation", err)
	}
	return o, nil
}

// stale lists operations RUNNING without an update since before.
func (d *db) stale(ctx context.Context, before time.Time) ([]string, error) {
	conn, err := d.get()
	if err != nil {
		return nil, err
	}
	ctx, cancel := chclient.WithTimeout(ctx, d.timeout, nil)
	defer cancel()
	rows, err := conn.Query(ctx, qStale, uint64(before.UnixMilli()))
	if err != nil {
		return nil, classify("stale_operations", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// putPart writes one part of an attempt's file.
func (d *db) putPart(ctx context.Context, o operation, part uint32, data []byte) error {
	return d.insert(ctx, "put_file_part", iFile, [][]any{{o.ID, o.Attempt, part, o.CreatedAt, string(data)}})
}

// copyFile writes the first parts parts of an attempt's file to w, in
// order, as ClickHouse streams them.
func (d *db) copyFile(ctx context.Context, o operation, w io.Writer) error {
	conn, err := d.get()
	if err != nil {
		return err
	}
	rows, err := conn.Query(ctx, qFile, o.ID, o.Attempt, o.Parts)
	if err != nil {
		return classify("file", err)
	}
	defer rows.Close()
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return err
		}
		if _, err := io.WriteString(w, data); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return classify("file", err)
	}
	return nil
}

// insert appends rows in one block. The context is detached from the
// caller's and cancelled only after its deadline (pkg/accountdb's insert
// says why).
func (d *db) insert(ctx context.Context, name, q string, rows [][]any) error {
	conn, err := d.get()
	if err != nil {
		return err
	}
	timeout := d.timeout + insertGrace
	ictx, cancel := chclient.WithTimeout(context.WithoutCancel(ctx), timeout, nil)
	defer time.AfterFunc(timeout, cancel)
	b, err := conn.PrepareBatch(ictx, q)
	if err != nil {
		return classify(name, err)
	}
	for _, r := range rows {
		if err := b.Append(r...); err != nil {
			_ = b.Abort()
			return fmt.Errorf("export: %s: append: %w", name, err)
		}
	}
	if err := b.Send(); err != nil {
		return classify(name, err)
	}
	return nil
}
