package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestAlertSeriesExistFromStartup scrapes the four services right after
// they start and index the C-Chain blocks 1..100 (no error has happened,
// no webhook exists) and checks that every moraine_* selector of
// deploy/prometheus/rules.yml and of the Grafana dashboard matches at least
// one series. A counter that appears only on its first increment is
// invisible to rate() and increase() at that increment, so a rule or a
// panel over an error counter created on first use misses the first errors
// (issue 16: MoraineIngestRPCErrors and MoraineQuery5xxRatioHigh could not
// fire). Histogram buckets are left out: a quantile over no observations
// is empty whether its series exist or not.
func TestAlertSeriesExistFromStartup(t *testing.T) {
	s := runPipeline(t, cchain, 1, pipelineOpts{delivery: true})
	eventually(t, 60*time.Second, "the processor to write block 100", func() bool {
		for _, v := range scrape(t, s.metrics["processor"], "moraine_processor_last_written_block") {
			if v == 100 {
				return true
			}
		}
		return false
	})
	// Consumer lag is a gauge read from the brokers every LagInterval, and a
	// group has lag only once it has committed: wait for the processor's.
	eventually(t, 30*time.Second, "the processor's consumer lag", func() bool {
		return len(scrape(t, s.metrics["processor"], "moraine_kafka_consumer_lag_records")) > 0
	})
	series := map[string][]map[string]string{}
	for name, url := range s.metrics {
		if name == "replay" {
			continue
		}
		for n, ls := range scrapeAll(t, url) {
			series[n] = append(series[n], ls...)
		}
	}
	root := repoRoot(t)
	var exprs []string
	rules, err := os.ReadFile(root + "/deploy/prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	exprs = append(exprs, ruleExprs(string(rules))...)
	raw, err := os.ReadFile(root + "/deploy/grafana/dashboards/moraine.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []dashPanel `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	exprs = append(exprs, panelExprs(dash.Panels)...)
	if len(exprs) < 50 {
		t.Fatalf("found only %d expressions in rules.yml and the dashboard", len(exprs))
	}
	missing := map[string]bool{}
	checked := 0
	for _, e := range exprs {
		for _, sel := range selectors(e) {
			if strings.HasSuffix(sel.name, "_bucket") {
				continue
			}
			checked++
			if absentUntilUsed[sel.name] != "" {
				continue
			}
			if !sel.matchesAny(series[sel.name]) {
				missing[sel.text] = true
			}
		}
	}
	var list []string
	for m := range missing {
		list = append(list, m)
	}
	sort.Strings(list)
	t.Logf("%d selectors of %d expressions checked against %d series names", checked, len(exprs), len(series))
	if len(list) > 0 {
		t.Errorf("%d selectors match no series right after start-up:\n  %s", len(list), strings.Join(list, "\n  "))
	}
}

// absentUntilUsed are gauges that have no series until what they describe
// exists, and why; a gauge is read as it is, not through rate(), so its
// first value is not lost.
var absentUntilUsed = map[string]string{
	"moraine_processor_usage_top_account_requests":      "one series per top account: none before an account's first request",
	"moraine_processor_usage_top_account_compute_units": "one series per top account: none before an account's first request",
	"moraine_processor_usage_top_account_errors":        "one series per top account: none before an account's first request",
	"moraine_query_health_check_up":                     "the result of a check of GET /v1/health-check: none before the first check",
}

type dashPanel struct {
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

func panelExprs(ps []dashPanel) []string {
	var out []string
	for _, p := range ps {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
		out = append(out, panelExprs(p.Panels)...)
	}
	return out
}

// ruleExprs returns the expr of every rule: a one-line "expr: ..." or an
// "expr: |" block of deeper-indented lines.
func ruleExprs(yml string) []string {
	var out []string
	lines := strings.Split(yml, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trimmed := strings.TrimSpace(l)
		if !strings.HasPrefix(trimmed, "expr:") {
			continue
		}
		v := strings.TrimSpace(strings.TrimPrefix(trimmed, "expr:"))
		if v != "|" && v != ">-" && v != "|-" {
			out = append(out, v)
			continue
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		var b []string
		for i+1 < len(lines) {
			n := lines[i+1]
			if strings.TrimSpace(n) != "" && len(n)-len(strings.TrimLeft(n, " ")) <= indent {
				break
			}
			b = append(b, n)
			i++
		}
		out = append(out, strings.Join(b, "\n"))
	}
	return out
}

type matcher struct {
	label, op string
	re        *regexp.Regexp
	value     string
}

type selector struct {
	text, name string
	matchers   []matcher
}

var (
	selectorRe = regexp.MustCompile(`\b(moraine_[a-z_]+)(\{[^}]*\})?`)
	matcherRe  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
)

// selectors parses the moraine_* selectors of a PromQL expression; Grafana
// variables ($chain) match any value.
func selectors(expr string) []selector {
	var out []selector
	for _, m := range selectorRe.FindAllStringSubmatch(expr, -1) {
		s := selector{text: m[0], name: m[1]}
		for _, lm := range matcherRe.FindAllStringSubmatch(m[2], -1) {
			v := lm[3]
			if strings.HasPrefix(v, "$") {
				lm[2], v = "=~", ".*"
			}
			mt := matcher{label: lm[1], op: lm[2], value: v}
			if lm[2] == "=~" || lm[2] == "!~" {
				mt.re = regexp.MustCompile("^(?:" + v + ")$")
			}
			s.matchers = append(s.matchers, mt)
		}
		out = append(out, s)
	}
	return out
}

func (s selector) matchesAny(series []map[string]string) bool {
next:
	for _, ls := range series {
		for _, m := range s.matchers {
			v := ls[m.label]
			ok := false
			switch m.op {
			case "=":
				ok = v == m.value
			case "!=":
				ok = v != m.value
			case "=~":
				ok = m.re.MatchString(v)
			case "!~":
				ok = !m.re.MatchString(v)
			}
			if !ok {
				continue next
			}
		}
		return true
	}
	return false
}

var seriesLineRe = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s`)
var labelRe = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// scrapeAll returns every series of a /metrics page: name to label sets.
func scrapeAll(t *testing.T, url string) map[string][]map[string]string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	out := map[string][]map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := seriesLineRe.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		ls := map[string]string{}
		for _, l := range labelRe.FindAllStringSubmatch(m[3], -1) {
			ls[l[1]] = l[2]
		}
		out[m[1]] = append(out[m[1]], ls)
	}
	return out
}
