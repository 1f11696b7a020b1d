package usageapi

import (
	"math"
	"strconv"
	"time"
)

// usageResponse is UsageMetricsResponseDTO.
type usageResponse struct {
	AggregateDuration string   `json:"aggregateDuration"`
	OrgID             string   `json:"orgId"`
	Metrics           []metric `json:"metrics"`
}

// metric is Metric: one time bucket.
type metric struct {
	Timestamp int64         `json:"timestamp"`
	Values    []metricValue `json:"values"`
}

// metricValue is UsageMetricsValueDTO.
type metricValue struct {
	GroupedBy               string  `json:"groupedBy"`
	GroupValue              any     `json:"groupValue,omitempty"`
	TotalRequests           uint64  `json:"totalRequests"`
	RequestsPerSecond       float64 `json:"requestsPerSecond"`
	SuccessRatePercent      float64 `json:"successRatePercent"`
	MedianResponseTimeMsecs float64 `json:"medianResponseTimeMsecs"`
	InvalidRequests         uint64  `json:"invalidRequests"`
	APICreditsUsed          uint64  `json:"apiCreditsUsed"`
	APICreditsWasted        uint64  `json:"apiCreditsWasted"`
}

// logsResponse is LogsResponseDTO.
type logsResponse struct {
	NextPageToken string     `json:"nextPageToken,omitempty"`
	OrgID         string     `json:"orgId"`
	Logs          []logEntry `json:"logs"`
}

// logEntry is LogsFormat.
type logEntry struct {
	OrgID                string      `json:"orgId"`
	LogID                string      `json:"logId"`
	EventTimestamp       uint64      `json:"eventTimestamp"`
	APIKeyID             string      `json:"apiKeyId"`
	APIKeyAlias          string      `json:"apiKeyAlias"`
	HostRegion           string      `json:"hostRegion"`
	RequestType          string      `json:"requestType"`
	RequestPath          string      `json:"requestPath"`
	APICreditsConsumed   uint32      `json:"apiCreditsConsumed"`
	RequestDurationMsecs float64     `json:"requestDurationMsecs"`
	ResponseCode         uint16      `json:"responseCode"`
	ChainID              string      `json:"chainId,omitempty"`
	Metadata             logMetadata `json:"metadata"`
}

// logMetadata is LogsFormatMetadata.
type logMetadata struct {
	IPAddress string `json:"ipAddress"`
	Host      string `json:"host"`
	UserAgent string `json:"userAgent"`
}

// render turns a metrics read into buckets in time order.
func render(rows []metricRow, interval, groupBy string) []metric {
	out := []metric{}
	for _, r := range rows {
		start, seconds := bucketTime(r.bucket, interval)
		if len(out) == 0 || out[len(out)-1].Timestamp != start {
			out = append(out, metric{Timestamp: start, Values: []metricValue{}})
		}
		v := metricValue{GroupedBy: "None", TotalRequests: r.total, InvalidRequests: r.bad,
			APICreditsUsed: r.units, APICreditsWasted: r.wasted,
			RequestsPerSecond:       round(float64(r.total) / seconds),
			MedianResponseTimeMsecs: round(r.median),
		}
		if r.total > 0 {
			v.SuccessRatePercent = round(100 * float64(r.ok) / float64(r.total))
		}
		if groupBy != "" {
			v.GroupedBy = groupBy
			v.GroupValue = r.group
			if groupBy == "responseCode" {
				n, _ := strconv.Atoi(r.group)
				v.GroupValue = n
			}
		}
		m := &out[len(out)-1]
		m.Values = append(m.Values, v)
	}
	return out
}

// bucketTime is a bucket's start (Unix seconds) and length in seconds; a
// monthly bucket is YYYYMM.
func bucketTime(b uint32, interval string) (int64, float64) {
	if interval == "monthly" {
		start := time.Date(int(b/100), time.Month(b%100), 1, 0, 0, 0, 0, time.UTC)
		return start.Unix(), start.AddDate(0, 1, 0).Sub(start).Seconds()
	}
	return int64(b), bucketSpan[interval].Seconds()
}

// round keeps 6 significant digits: enough for rates and percentages,
// without float noise in the JSON.
func round(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return r
}
