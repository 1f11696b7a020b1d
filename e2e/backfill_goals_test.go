package e2e

import (
	"strings"
	"testing"
	"time"
)

// The reads' windows are judged from querybench's interval lines: the
// format the benchmark parses is the one querybench prints.
func TestReadWindowsJudgeIntervalLines(t *testing.T) {
	var w readWindows
	for _, tc := range []struct {
		line string
		want string // the verdict
	}{
		{"interval 10:00:00..10:00:10 n=2000 err=0 dropped=0 p50=2.1ms p90=5ms p99=40ms max=80ms", "goal met"},
		// Fast, but a tenth of the offered load never went out.
		{"interval 10:00:10..10:00:20 n=1800 err=0 dropped=200 p50=2.1ms p90=5ms p99=40ms max=80ms", "goal missed"},
		{"interval 10:00:20..10:00:30 n=2000 err=0 dropped=0 p50=20ms p90=80ms p99=101ms max=2s", "goal missed"},
		{"interval 10:00:30..10:00:40 n=2000 err=3 dropped=0 p50=2ms p90=5ms p99=40ms max=80ms", "goal missed"},
		// 1.2 s: the line prints a bare number of seconds as querybench does.
		{"interval 10:00:40..10:00:50 n=500 err=0 dropped=0 p50=700ms p90=1.1s p99=1.2s max=2s", "goal missed"},
	} {
		got := w.add(tc.line, 200, 10*time.Second)
		if !strings.HasSuffix(got, tc.want) {
			t.Errorf("%s: %q, want %s", tc.line, got, tc.want)
		}
	}
	if w.n != 5 || w.met != 1 || w.worst != 1200*time.Millisecond || w.minRate != 50 {
		t.Errorf("windows %d, met %d, worst %s, least served %.0f", w.n, w.met, w.worst, w.minRate)
	}
	if s := w.summary(200); !strings.Contains(s, "goal met in 1 of 5 windows") {
		t.Error(s)
	}
}

func TestCPUPerTx(t *testing.T) {
	before := map[string]float64{"ingest": 1, "processor": 2, "clickhouse": 3, "kafka": 4, "query": 0, "replay": 0}
	after := map[string]float64{"ingest": 2, "processor": 3, "clickhouse": 6, "kafka": 5, "query": 1, "replay": 1}
	// 10,000 transactions: ingest 1 s = 100 µs each, ClickHouse 300, ...
	got := cpuPerTx(before, after, 10000)
	want := "all 600 (ingest 100, processor 100, clickhouse 300, kafka 100), query 100, replay 100"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if cpuPerTx(before, after, 0) != "-" {
		t.Error("no transactions: no rate")
	}
}
