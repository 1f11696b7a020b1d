package usageapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moraine-data/moraine/pkg/chclient"
)

// ErrUnavailable means ClickHouse cannot answer right now.
var ErrUnavailable = errors.New("usageapi: clickhouse unavailable")

// ErrTooManyValues means a metrics answer would hold more than the store's
// maxValues (time bucket, group) values.
var ErrTooManyValues = errors.New("usageapi: too many values")

// Store reads the request log and its rollups.
type Store struct {
	conn     *chclient.Lazy
	timeout  time.Duration
	duration *prometheus.HistogramVec
	// maxValues bounds a metrics answer (MaxValues; tests set fewer).
	maxValues int
}

// scope is the accounts a read covers.
type scope struct {
	all     bool   // every account (an operator without orgId)
	account string // else this one
}

// where builds the WHERE clause of a read over time column col in [from,
// to) and the filters, with its arguments.
func where(col string, from, to uint64, s scope, f filters) (string, []any) {
	conds := []string{col + " >= ?", col + " < ?"}
	args := []any{from, to}
	if !s.all {
		conds = append(conds, "account_id = ?")
		args = append(args, s.account)
	}
	add := func(cond string, v any) {
		conds = append(conds, cond)
		args = append(args, v)
	}
	if f.chainID != "" {
		add("chain_id = ?", f.chainID)
	}
	if f.status != 0 {
		add("status = ?", uint16(f.status))
	}
	if f.keyID != "" {
		add("key_id = ?", f.keyID)
	}
	if f.route != "" {
		add("route = ?", f.route)
	}
	if f.requestType == "rpc" {
		conds = append(conds, "0") // moraine serves no RPC
	}
	return strings.Join(conds, " AND "), args
}

// rollups are the rollup of each interval ("minutes": api_usage_minutes
// per account, api_usage_global_minutes over every account), and the
// bucket each groups by (weeks start on Monday: 1970-01-01 was a Thursday;
// months as YYYYMM).
var rollups = map[string]struct{ table, bucket string }{
	"minute":  {"minutes", "bucket"},
	"hourly":  {"hours", "bucket"},
	"daily":   {"days", "bucket"},
	"weekly":  {"days", "toUInt32(bucket - ((intDiv(bucket, 86400) + 3) % 7) * 86400)"},
	"monthly": {"days", "toUInt32(toYYYYMM(toDateTime(bucket, 'UTC')))"},
}

// table is the rollup a read of sc uses: over every account without a key
// in its groups or filters, the global one (a few rows per bucket instead
// of about one per request of the sparse accounts); over every account by
// key with no other filter, hours or longer, the per-key one.
func table(rollup string, sc scope, f filters, groupBy string) string {
	switch {
	case sc.all && f.keyID == "" && groupBy != "apiKeyId":
		return "api_usage_global_" + rollup
	case sc.all && groupBy == "apiKeyId" && rollup != "minutes" && f.chainID == "" && f.status == 0 && f.route == "":
		return "api_usage_key_" + rollup
	}
	return "api_usage_" + rollup
}

// perKey reports whether tbl is a per-key rollup, whose answer classes are
// sums of their own rather than a status column.
func perKey(tbl string) bool { return strings.HasPrefix(tbl, "api_usage_key_") }

// groupColumns is the group of each groupBy.
var groupColumns = map[string]string{
	"":             "''",
	"requestPath":  "route",
	"responseCode": "toString(status)",
	"chainId":      "chain_id",
	"apiKeyId":     "key_id",
	"requestType":  "'data'",
}

// metricsQuery is the SELECT of one metrics read of tbl. The per-key
// rollups hold their durations histogram in two columns (migration
// *_usage_key_duration_counts): a dense one and, for rows written before
// it, the sparse one; the read sums both. The histograms come as text
// ("[1,0,3]"): the driver scans an array into a slice by reflection, an
// element at a time, which cost an operator's month of usage by key (4,000
// rows of arrays) as much CPU in the query service as ClickHouse spent
// reading it.
func metricsQuery(tbl, interval, groupBy, cond string) string {
	classes := `countMergeIf(requests, status < 400), countMergeIf(requests, status >= 400 AND status < 500),
    sumMerge(compute_units), sumMergeIf(compute_units, status >= 400 AND status < 500)`
	dense := `'[]'`
	if perKey(tbl) {
		classes = `sumMerge(succeeded), sumMerge(invalid), sumMerge(units), sumMerge(wasted_units)`
		dense = `toString(sumForEachMerge(duration_counts))`
	}
	return `SELECT ` + rollups[interval].bucket + ` AS b, ` + groupColumns[groupBy] + ` AS g, countMerge(requests),
    ` + classes + `,
    toString(tupleElement(sumMapMerge(durations) AS d, 1)), toString(tupleElement(d, 2)), ` + dense + `
FROM ` + tbl + `
WHERE ` + cond + `
GROUP BY b, g ORDER BY b, g`
}

// metricRow is one (bucket, group) of a metrics read.
type metricRow struct {
	bucket         uint32
	group          string
	total, ok, bad uint64
	units, wasted  uint64
	// median is in milliseconds, from the durations histogram.
	median float64
}

// Metrics reads the rollup of interval over f.
func (s *Store) Metrics(ctx context.Context, sc scope, f filters, interval, groupBy string) ([]metricRow, error) {
	tbl := table(rollups[interval].table, sc, f, groupBy)
	cond, args := where("bucket", uint64(f.from.Unix()), uint64(f.to.Unix()), sc, f)
	var out []metricRow
	// ClickHouse stops the aggregation once it holds more groups than the
	// answer may (TOO_MANY_ROWS, checked after each block read), so a read
	// that would be refused costs little instead of running into the
	// timeout. That is group_by_overflow_mode's default, "throw"; the driver
	// cannot send a text setting to 18.16 (its protocol revision sends
	// settings as numbers), so the default is relied on.
	limit := clickhouse.Settings{"max_rows_to_group_by": s.maxValues}
	err := s.read(ctx, "metrics_"+strings.TrimPrefix(tbl, "api_usage_"), metricsQuery(tbl, interval, groupBy, cond), args, limit, func(r driver.Rows) error {
		var m metricRow
		var buckets, counts, dense string
		if err := r.Scan(&m.bucket, &m.group, &m.total, &m.ok, &m.bad, &m.units, &m.wasted, &buckets, &counts, &dense); err != nil {
			return err
		}
		hist, err := histogram(dense, buckets, counts)
		if err != nil {
			return err
		}
		m.median = medianMs(hist)
		out = append(out, m)
		return nil
	})
	if chclient.TooManyRows(err) {
		return nil, fmt.Errorf("%w: the answer would hold more than %d (time bucket, group) values", ErrTooManyValues, s.maxValues)
	}
	return out, err
}

// histogram is a durations histogram, dense (counts by bucket): dense
// plus the sparse buckets and counts, as sumMap returns them; each an
// array as ClickHouse writes it ("[1,0,3]").
func histogram(dense, buckets, counts string) ([]uint64, error) {
	h, err := parseUints(dense)
	if err != nil {
		return nil, err
	}
	bs, err := parseUints(buckets)
	if err != nil {
		return nil, err
	}
	cs, err := parseUints(counts)
	if err != nil {
		return nil, err
	}
	if len(bs) != len(cs) {
		return nil, fmt.Errorf("durations histogram: %d buckets, %d counts", len(bs), len(cs))
	}
	for i, b := range bs {
		if b > 255 {
			return nil, fmt.Errorf("durations histogram: bucket %d", b)
		}
		if int(b) >= len(h) {
			h = append(h, make([]uint64, int(b)+1-len(h))...)
		}
		h[b] += cs[i]
	}
	return h, nil
}

// parseUints reads an array of unsigned integers as ClickHouse writes it:
// "[1,0,3]", "[]".
func parseUints(s string) ([]uint64, error) {
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return nil, fmt.Errorf("not an array: %.40q", s)
	}
	s = s[1 : len(s)-1]
	if s == "" {
		return nil, nil
	}
	out := make([]uint64, 0, strings.Count(s, ",")+1)
	for f := range strings.SplitSeq(s, ",") {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("array element: %w", err)
		}
		out = append(out, v)
	}
	return out, nil
}

// medianMs reads the median duration, in milliseconds, from a dense
// durations histogram: bucket b holds durations from 0.1 ms x 2^(b/4) to
// the next bucket's start, and the median is interpolated geometrically
// within its bucket.
func medianMs(hist []uint64) float64 {
	var total uint64
	for _, c := range hist {
		total += c
	}
	if total == 0 {
		return 0
	}
	half := float64(total) / 2
	var seen float64
	for b, c := range hist {
		if c > 0 && seen+float64(c) >= half {
			f := (half - seen) / float64(c)
			return 0.1 * math.Pow(2, (float64(b)+f)/4)
		}
		seen += float64(c)
	}
	return 0.1 * math.Pow(2, float64(len(hist))/4)
}

// logTable is the log a read of sc uses: one account's rows are together
// in api_requests; every account's read by time from api_requests_by_time.
func logTable(sc scope) string {
	if sc.all {
		return "api_requests_by_time"
	}
	return "api_requests"
}

// logColumns are the columns of a log row.
const logColumns = `account_id, at, request_id, key_id, key_alias, route, status, duration_us, compute_units, chain_id,
    client_ip, host, user_agent, region`

// logRow is one request of the log.
type logRow struct {
	account, keyID, keyAlias, route, chain, ip, host, agent, region string
	at                                                              uint64
	id                                                              string // 16 bytes
	status                                                          uint16
	durationUS                                                      uint64
	units                                                           uint32
}

// logCursor is the position after a page's last row: the next page holds
// rows strictly before it in (at DESC, request_id DESC) order.
type logCursor struct {
	at uint64
	id string
}

// logsFirstSpan is the shortest time range the first read of a page
// covers; the range grows eightfold until the page is full or reaches the
// start of the filter's range.
const logsFirstSpan = uint64(time.Minute / time.Millisecond)

// Logs returns up to limit requests of f before cursor (nil: from the
// newest), newest first. ClickHouse 18.16 cannot stop an ORDER BY ...
// LIMIT early, so it reads a bounded time range below the cursor, sized
// from the hour rollup's count of such requests, widening it until the
// page is full or the range is exhausted.
func (s *Store) Logs(ctx context.Context, sc scope, f filters, after *logCursor, limit int, now time.Time) ([]logRow, error) {
	lo, hi := uint64(f.from.UnixMilli()), uint64(f.to.UnixMilli())
	// Nothing arrives from the future: the rest of today is not read.
	hi = max(lo, min(hi, uint64(now.Add(time.Minute).UnixMilli())))
	top := hi
	if after != nil {
		top = min(hi, after.at+1)
	}
	// The first window: as long as the hour rollup says holds twice a page
	// of these requests on average (at least a minute); none at all, no
	// read of the log.
	n, err := s.count(ctx, sc, f)
	if err != nil || n == 0 {
		return nil, err
	}
	first := max(logsFirstSpan, (hi-lo)/n*uint64(2*limit))
	var out []logRow
	for span := first; ; span *= 8 {
		from := lo
		if top > lo+span {
			from = top - span
		}
		cond, args := where("at", from, top, sc, f)
		if after != nil {
			cond += " AND (at < ? OR (at = ? AND request_id < ?))"
			args = append(args, after.at, after.at, after.id)
		}
		q := `SELECT ` + logColumns + ` FROM ` + logTable(sc) + ` WHERE ` + cond + ` ORDER BY at DESC, request_id DESC LIMIT ?`
		out = out[:0]
		err := s.read(ctx, "logs", q, append(args, uint64(limit)), nil, func(r driver.Rows) error {
			var l logRow
			if err := r.Scan(&l.account, &l.at, &l.id, &l.keyID, &l.keyAlias, &l.route, &l.status, &l.durationUS, &l.units,
				&l.chain, &l.ip, &l.host, &l.agent, &l.region); err != nil {
				return err
			}
			out = append(out, l)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(out) >= limit || from == lo {
			return out, nil
		}
	}
}

// count is how many requests of f the hour rollup holds, for sizing log
// reads (whole hours: a little more than f's range).
func (s *Store) count(ctx context.Context, sc scope, f filters) (uint64, error) {
	tbl := table("hours", sc, f, "")
	cond, args := where("bucket", uint64(f.from.Truncate(time.Hour).Unix()), uint64(f.to.Unix()), sc, f)
	var n uint64
	err := s.read(ctx, "logs_count", `SELECT countMerge(requests) FROM `+tbl+` WHERE `+cond, args, nil, func(r driver.Rows) error {
		return r.Scan(&n)
	})
	return n, err
}

// read runs q under the read timeout, with settings (nil for none), and
// calls row for every row.
func (s *Store) read(ctx context.Context, name, q string, args []any, settings clickhouse.Settings, row func(driver.Rows) error) error {
	conn, err := s.conn.Get(ErrUnavailable)
	if err != nil {
		return err
	}
	ctx, cancel := chclient.WithTimeout(ctx, s.timeout, settings)
	defer cancel()
	defer func(start time.Time) { s.duration.WithLabelValues(name).Observe(time.Since(start).Seconds()) }(time.Now())
	rows, err := conn.Query(ctx, q, args...)
	if err != nil {
		return chclient.Classify(err, ErrUnavailable, "usageapi", name)
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return fmt.Errorf("usageapi: %s: scan: %w", name, err)
		}
	}
	if err := rows.Err(); err != nil {
		return chclient.Classify(err, ErrUnavailable, "usageapi", name)
	}
	return nil
}

// Bucket is one (time bucket, group) of a usage read, for readers outside
// HTTP (moraine-admin usage).
type Bucket struct {
	// Start is the bucket's start (UTC); Group its group value ("" without
	// a groupBy).
	Start time.Time
	Group string
	// Requests, of which OK answered below 400 and Invalid 4xx; Units
	// charged, of which Wasted on invalid requests.
	Requests, OK, Invalid, Units, Wasted uint64
	MedianMs                             float64
}

// ReadMetrics reads usage as getApiUsageMetrics does: of account (every
// account when all), in [from, to) (whole UTC days), per interval
// ("minute", "hourly", "daily", "weekly", "monthly") and groupBy ("" or a
// UsageMetricsGroupByEnum value).
func ReadMetrics(ctx context.Context, conn driver.Conn, timeout time.Duration, account string, all bool,
	from, to time.Time, interval, groupBy string) ([]Bucket, error) {
	if _, ok := rollups[interval]; !ok {
		return nil, fmt.Errorf("usageapi: interval %q is none of minute, hourly, daily, weekly, monthly", interval)
	}
	if _, ok := groupColumns[groupBy]; !ok {
		return nil, fmt.Errorf("usageapi: groupBy %q is none of requestPath, responseCode, chainId, apiKeyId, requestType", groupBy)
	}
	var lazy chclient.Lazy
	lazy.Set(conn)
	s := &Store{conn: &lazy, timeout: timeout, maxValues: MaxValues, duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "unused"}, []string{"read"})}
	rows, err := s.Metrics(ctx, scope{all: all, account: account}, filters{from: from, to: to}, interval, groupBy)
	if err != nil {
		return nil, err
	}
	out := make([]Bucket, len(rows))
	for i, r := range rows {
		start, _ := bucketTime(r.bucket, interval)
		out[i] = Bucket{Start: time.Unix(start, 0).UTC(), Group: r.group, Requests: r.total, OK: r.ok, Invalid: r.bad,
			Units: r.units, Wasted: r.wasted, MedianMs: round(r.median)}
	}
	return out, nil
}
