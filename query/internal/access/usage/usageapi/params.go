package usageapi

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/moraine-data/moraine/query/internal/server/apierr"
	"github.com/moraine-data/moraine/query/internal/server/queryparam"
)

// Enum values (OpenAPI TimeIntervalGranularityExtended,
// UsageMetricsGroupByEnum, the requestType enum).
var (
	intervals    = []string{"minute", "hourly", "daily", "weekly", "monthly"}
	groupings    = []string{"requestPath", "responseCode", "chainId", "apiKeyId", "requestType"}
	requestTypes = []string{"data", "rpc"}
)

// MaxBuckets bounds the time buckets of one answer: a week of minutes.
const MaxBuckets = 7 * 24 * 60

// MaxValues bounds the (time bucket, group) values of one metrics answer,
// which MaxBuckets alone does not: an operator's week of hours grouped by
// apiKeyId over every account holds a value per hour and key (hundreds of
// thousands), tens of megabytes that no dashboard draws.
const MaxValues = 100_000

// defaultDays is the range without timestamps: the 7 days ending today.
const defaultDays = 7

// filters are what both routes filter on.
type filters struct {
	orgID       string
	hasOrg      bool
	from, to    time.Time // [from, to), whole UTC days
	chainID     string
	status      int // 0: any
	requestType string
	keyID       string
	route       string
}

// reader collects validation failures, reported together.
type reader struct {
	c    *gin.Context
	now  time.Time
	errs []string
}

func (r *reader) fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// valid writes the 400 listing every failure, if any.
func (r *reader) valid() bool {
	if r.errs != nil {
		apierr.Write(r.c, apierr.Validation(r.errs...))
		return false
	}
	return true
}

func (r *reader) enum(name string, values []string) string {
	raw, ok := r.c.GetQuery(name)
	if !ok {
		return ""
	}
	for _, v := range values {
		if raw == v {
			return raw
		}
	}
	r.fail("%s must be one of the following values: %s", name, strings.Join(values, ", "))
	return ""
}

// timestamp reads a Unix-seconds parameter and rounds it down to its day.
func (r *reader) timestamp(name string) (time.Time, bool) {
	raw, ok := r.c.GetQuery(name)
	if !ok {
		return time.Time{}, false
	}
	v, failures, valid := queryparam.Int(name, raw, 0, math.MaxInt64/2)
	if !valid {
		r.errs = append(r.errs, failures...)
		return time.Time{}, false
	}
	if v > 253402300799 { // 9999-12-31T23:59:59Z
		r.fail("%s must not be after 9999-12-31 (Unix seconds, not milliseconds)", name)
		return time.Time{}, false
	}
	return time.Unix(int64(v), 0).UTC().Truncate(24 * time.Hour), true
}

// OpenAPI path parameters written as gin's (a requestPath may be given in
// either form).
var openAPIParam = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// filters reads the parameters both routes share.
func (r *reader) filters() filters {
	var f filters
	f.orgID, f.hasOrg = r.c.GetQuery("orgId")
	start, hasStart := r.timestamp("startTimestamp")
	end, hasEnd := r.timestamp("endTimestamp")
	today := r.now.UTC().Truncate(24 * time.Hour)
	switch {
	case !hasEnd && !hasStart:
		end = today
		start = end.AddDate(0, 0, -(defaultDays - 1))
	case !hasEnd:
		end = today
		if start.After(today) {
			end = start
		}
	case !hasStart:
		start = end.AddDate(0, 0, -(defaultDays - 1))
	}
	if start.After(end) {
		r.fail("startTimestamp must not be after endTimestamp (both are rounded down to 0:00 UTC of their day)")
	}
	f.from, f.to = start, end.AddDate(0, 0, 1)
	f.chainID = r.c.Query("chainId")
	if raw, ok := r.c.GetQuery("responseCode"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(raw))
		if err != nil || n < 100 || n > 599 {
			r.fail("responseCode must be an HTTP status code (100 to 599)")
		}
		f.status = n
	}
	f.requestType = r.enum("requestType", requestTypes)
	f.keyID = r.c.Query("apiKeyId")
	f.route = openAPIParam.ReplaceAllString(r.c.Query("requestPath"), ":$1")
	return f
}

// pageSize reads pageSize (1..100, default 10).
func (r *reader) pageSize() int {
	raw, ok := r.c.GetQuery("pageSize")
	if !ok {
		return 10
	}
	v, failures, valid := queryparam.Int("pageSize", raw, 1, 100)
	if !valid {
		r.errs = append(r.errs, failures...)
		return 10
	}
	return int(v)
}

// bucketSpan is the length of the buckets of an interval (months vary:
// monthLength).
var bucketSpan = map[string]time.Duration{
	"minute": time.Minute, "hourly": time.Hour, "daily": 24 * time.Hour, "weekly": 7 * 24 * time.Hour,
}

// buckets is how many buckets of interval cover [from, to).
func buckets(interval string, from, to time.Time) int {
	if interval == "monthly" {
		return (to.Year()-from.Year())*12 + int(to.Month()) - int(from.Month()) + 1
	}
	return int((to.Sub(from) + bucketSpan[interval] - 1) / bucketSpan[interval])
}
