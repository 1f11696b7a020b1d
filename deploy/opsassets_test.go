package deploy_test

// Checks of the operator assets (deploy/prometheus, deploy/grafana, deploy/k8s) against the code:
// every moraine_* series a rule or a panel uses is defined by a service, with the labels it is
// selected by; every MORAINE_* variable a manifest sets is the fallback of a real flag; the
// manifests keep the services' contracts (probes, shutdown, matcher ids, shared page-token key).
// The tests read files only: run them with `go test -run Ops .` in deploy.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v2"

	"github.com/moraine-data/moraine/pkg/chains"
)

// services are the four services: module directory, Prometheus subsystem, image and k8s component.
var services = []string{"ingest", "processor", "query", "delivery"}

const modulePath = "github.com/moraine-data/moraine/"

// targetLabels are labels Prometheus adds at scrape time (job, instance) or that the Kubernetes
// scrape config of deploy/prometheus/prometheus.yml adds (namespace, pod).
var targetLabels = []string{"job", "instance", "namespace", "pod"}

// ---------------------------------------------------------------------------------------------
// Metric catalogue from the Go code.

// metricDef is one metric a service defines.
type metricDef struct {
	kind   string   // counter, gauge, histogram, summary
	labels []string // variable and constant labels; nil with unknownLabels
	// unknownLabels: the label names could not be read from the code (the options are not passed
	// straight to a constructor next to a []string literal), so label checks are skipped.
	unknownLabels bool
	where         string
}

var optsKinds = map[string]string{
	"CounterOpts": "counter", "GaugeOpts": "gauge", "HistogramOpts": "histogram", "SummaryOpts": "summary",
}

// goFiles lists the non-test Go files under dir.
func goFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return out
}

// stringConsts maps the identifiers of a file's string constants and variables (any scope) to
// their values, e.g. `const ns, sub = "moraine", "ingest"`.
func stringConsts(f *ast.File) map[string]string {
	m := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Values) != len(vs.Names) {
			return true
		}
		for i, name := range vs.Names {
			if s, ok := stringLit(vs.Values[i]); ok {
				m[name.Name] = s
			}
		}
		return true
	})
	return m
}

func stringLit(e ast.Expr) (string, bool) {
	bl, ok := e.(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(bl.Value)
	return s, err == nil
}

// optsKind returns the metric kind of a prometheus.XxxOpts composite literal.
func optsKind(cl *ast.CompositeLit) string {
	sel, ok := cl.Type.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
		return ""
	}
	return optsKinds[sel.Sel.Name]
}

// stringSlice returns the values of a []string{"a", "b"} literal.
func stringSlice(e ast.Expr) ([]string, bool) {
	cl, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil, false
	}
	at, ok := cl.Type.(*ast.ArrayType)
	if !ok {
		return nil, false
	}
	if id, ok := at.Elt.(*ast.Ident); !ok || id.Name != "string" {
		return nil, false
	}
	var out []string
	for _, el := range cl.Elts {
		s, ok := stringLit(el)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// importers returns, for each Go import path, the services whose code imports it.
func importers(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, svc := range services {
		seen := map[string]bool{}
		for _, p := range goFiles(t, filepath.Join("..", svc)) {
			f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatalf("parse %s: %v", p, err)
			}
			for _, im := range f.Imports {
				path, _ := strconv.Unquote(im.Path.Value)
				if !seen[path] {
					seen[path] = true
					out[path] = append(out[path], svc)
				}
			}
		}
	}
	return out
}

// factoryMethods are the methods of obs.Metrics (the factory every package declares its series
// with): the metric kind, and the index of the first label argument (-1: no labels).
var factoryMethods = map[string]struct {
	kind     string
	labelsAt int
}{
	"Counter": {"counter", -1}, "CounterVec": {"counter", 2},
	"Gauge": {"gauge", -1}, "GaugeVec": {"gauge", 2}, "GaugeFunc": {"gauge", -1},
	"Histogram": {"histogram", -1}, "HistogramVec": {"histogram", 3},
}

// codeMetrics reads every metric declaration in the services and pkg and returns the full metric
// names (Namespace_Subsystem_Name): the obs.Metrics calls (f := obs.NewMetrics(reg, sub), then
// f.CounterVec(name, help, labels...) and the like; obs.Namespace is the namespace), and every
// prometheus.XxxOpts literal. A Subsystem that is not a constant (pkg/watch and pkg/accountdb take
// the host service's) stands for every service that imports the package.
func codeMetrics(t *testing.T) map[string]metricDef {
	t.Helper()
	imp := importers(t)
	defs := map[string]metricDef{}
	fset := token.NewFileSet()
	// dirConsts are the string constants of a package directory's files, for names declared in
	// another file of the package or read through an import (obs.Namespace).
	dirConstsCache := map[string]map[string]string{}
	dirConsts := func(dir string) map[string]string {
		if m, ok := dirConstsCache[dir]; ok {
			return m
		}
		m := map[string]string{}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("read %s: %v", dir, err)
		}
		for _, e := range ents {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
			if err != nil {
				t.Fatalf("parse %s: %v", e.Name(), err)
			}
			for k, v := range stringConsts(f) {
				m[k] = v
			}
		}
		dirConstsCache[dir] = m
		return m
	}
	obsNamespace, ok := dirConsts(filepath.Join("..", "pkg", "obs"))["Namespace"]
	if !ok {
		t.Fatal("pkg/obs declares no Namespace constant")
	}
	roots := append(slices.Clone(services), "pkg")
	for _, root := range roots {
		for _, p := range goFiles(t, filepath.Join("..", root)) {
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				t.Fatalf("parse %s: %v", p, err)
			}
			consts := stringConsts(f)
			// The directories of the moraine packages the file imports, by the name it uses.
			importDirs := map[string]string{}
			for _, im := range f.Imports {
				path, _ := strconv.Unquote(im.Path.Value)
				if !strings.HasPrefix(path, modulePath) {
					continue
				}
				name := path[strings.LastIndex(path, "/")+1:]
				if im.Name != nil {
					name = im.Name.Name
				}
				importDirs[name] = filepath.Join("..", strings.TrimPrefix(path, modulePath))
			}
			resolve := func(e ast.Expr) (string, bool) {
				if s, ok := stringLit(e); ok {
					return s, true
				}
				switch e := e.(type) {
				case *ast.Ident:
					if s, ok := consts[e.Name]; ok {
						return s, true
					}
					s, ok := dirConsts(filepath.Dir(p))[e.Name]
					return s, ok
				case *ast.SelectorExpr:
					if x, ok := e.X.(*ast.Ident); ok && importDirs[x.Name] != "" {
						s, ok := dirConsts(importDirs[x.Name])[e.Sel.Name]
						return s, ok
					}
				}
				return "", false
			}
			define := func(pos token.Pos, kind, ns string, sub string, subOK bool, name string, labels []string, known bool) {
				subs := []string{sub}
				if !subOK {
					rel, _ := filepath.Rel("..", filepath.Dir(p))
					if root == "pkg" {
						subs = imp[modulePath+filepath.ToSlash(rel)]
					} else {
						subs = []string{root}
					}
				}
				for _, s := range subs {
					var parts []string
					for _, part := range []string{ns, s, name} {
						if part != "" {
							parts = append(parts, part)
						}
					}
					defs[strings.Join(parts, "_")] = metricDef{
						kind: kind, labels: slices.Clone(labels), unknownLabels: !known, where: fset.Position(pos).String(),
					}
				}
			}

			// obs.Metrics: the subsystem argument of each factory, by the variable holding it.
			factorySub := func(e ast.Expr) (ast.Expr, bool) {
				call, ok := e.(*ast.CallExpr)
				if !ok || len(call.Args) != 2 {
					return nil, false
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "NewMetrics" {
					return nil, false
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "obs" {
					return nil, false
				}
				return call.Args[1], true
			}
			// A factory variable is local to the function that assigns it: each top-level
			// declaration is read with its own variables.
			for _, decl := range f.Decls {
				factories := map[string]ast.Expr{}
				ast.Inspect(decl, func(n ast.Node) bool {
					as, ok := n.(*ast.AssignStmt)
					if !ok || len(as.Lhs) != len(as.Rhs) {
						return true
					}
					for i, r := range as.Rhs {
						if sub, ok := factorySub(r); ok {
							if id, ok := as.Lhs[i].(*ast.Ident); ok {
								factories[id.Name] = sub
							}
						}
					}
					return true
				})
				ast.Inspect(decl, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					m, ok := factoryMethods[sel.Sel.Name]
					if !ok || len(call.Args) < 2 {
						return true
					}
					subExpr, ok := factorySub(sel.X)
					if id, isID := sel.X.(*ast.Ident); !ok && isID {
						subExpr, ok = factories[id.Name]
					}
					if !ok {
						return true
					}
					name, nameOK := resolve(call.Args[0])
					if !nameOK {
						t.Logf("%s: metric name is not a constant; skipped", fset.Position(call.Pos()))
						return true
					}
					sub, subOK := resolve(subExpr)
					labels, known := []string{}, true
					if m.labelsAt >= 0 {
						if call.Ellipsis.IsValid() || len(call.Args) < m.labelsAt {
							labels, known = nil, false // labels from a slice: unknown
						} else {
							for _, a := range call.Args[m.labelsAt:] {
								l, ok := resolve(a)
								if !ok {
									labels, known = nil, false
									break
								}
								labels = append(labels, l)
							}
						}
					}
					define(call.Pos(), m.kind, obsNamespace, sub, subOK, name, labels, known)
					return true
				})
			}

			// prometheus.XxxOpts literals. The labels of options passed to a constructor with a
			// []string literal.
			labelsOf := map[*ast.CompositeLit][]string{}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				for i, a := range call.Args {
					cl, ok := a.(*ast.CompositeLit)
					if !ok || optsKind(cl) == "" {
						continue
					}
					labelsOf[cl] = []string{}
					if i+1 < len(call.Args) {
						if ls, ok := stringSlice(call.Args[i+1]); ok {
							labelsOf[cl] = ls
						} else if _, isFunc := call.Args[i+1].(*ast.FuncLit); !isFunc {
							delete(labelsOf, cl) // labels from a variable: unknown
						}
					}
				}
				return true
			})
			ast.Inspect(f, func(n ast.Node) bool {
				cl, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				kind := optsKind(cl)
				if kind == "" {
					return true
				}
				var ns, sub, name string
				var nameOK, subOK = false, true
				var constLabels []string
				for _, el := range cl.Elts {
					kv, ok := el.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					key, _ := kv.Key.(*ast.Ident)
					if key == nil {
						continue
					}
					switch key.Name {
					case "Namespace":
						ns, _ = resolve(kv.Value)
					case "Subsystem":
						sub, subOK = resolve(kv.Value)
					case "Name":
						name, nameOK = resolve(kv.Value)
					case "ConstLabels":
						if lc, ok := kv.Value.(*ast.CompositeLit); ok {
							for _, e := range lc.Elts {
								if lkv, ok := e.(*ast.KeyValueExpr); ok {
									if k, ok := stringLit(lkv.Key); ok {
										constLabels = append(constLabels, k)
									}
								}
							}
						}
					}
				}
				if !nameOK {
					// obs.Metrics builds its options from its arguments: its calls are read above.
					if !strings.HasSuffix(p, filepath.Join("pkg", "obs", "metrics.go")) {
						t.Logf("%s: metric name is not a constant; skipped", fset.Position(cl.Pos()))
					}
					return true
				}
				ls, known := labelsOf[cl]
				define(cl.Pos(), kind, ns, sub, subOK, name, append(slices.Clone(ls), constLabels...), known)
				return true
			})
		}
	}
	for name, d := range kpromMetrics(t) {
		defs[name] = d
	}
	return defs
}

// kpromMetrics reads the list of franz-go's client series (kprom, registered by the plugin rather
// than by an Opts literal here) from the doc comment of pkg/kafkautil/metrics.go, which that
// package's tests check against what kprom registers.
func kpromMetrics(t *testing.T) map[string]metricDef {
	t.Helper()
	const file = "../pkg/kafkautil/metrics.go"
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]metricDef{}
	for _, m := range regexp.MustCompile(`(?m)^//\t(moraine_kafka_\w+)\{([^}]*)\}(.*)$`).FindAllStringSubmatch(string(src), -1) {
		if m[1] == "moraine_kafka_consumer_lag_records" {
			continue // an Opts literal of its own, read with the others
		}
		kind := "counter"
		if !strings.HasSuffix(m[1], "_total") || strings.Contains(m[3], "a gauge") {
			kind = "gauge"
		}
		out[m[1]] = metricDef{kind: kind, labels: strings.Split(m[2], ","), where: file}
	}
	if len(out) == 0 {
		t.Fatalf("%s lists no moraine_kafka_* series", file)
	}
	return out
}

// lookupSeries resolves a series name to its metric: itself, or a histogram's (summary's)
// _bucket, _sum or _count.
func lookupSeries(defs map[string]metricDef, series string) (metricDef, bool) {
	if d, ok := defs[series]; ok {
		return d, true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(series, suf)
		if !ok {
			continue
		}
		d, ok := defs[base]
		if ok && (d.kind == "histogram" || (d.kind == "summary" && suf != "_bucket")) {
			if suf == "_bucket" {
				d.labels = append(slices.Clone(d.labels), "le")
			}
			return d, true
		}
	}
	return metricDef{}, false
}

var (
	seriesRe   = regexp.MustCompile(`\bmoraine_[a-z_]+\b`)
	selectorRe = regexp.MustCompile(`\b(moraine_[a-z_]+)\s*\{([^}]*)\}`)
	matcherRe  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"`)
	groupingRe = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	recordedRe = regexp.MustCompile(`\bmoraine:[a-z0-9_:]+`)
)

// checkExpr checks the moraine_* series of one PromQL expression against the code: each is
// defined, each selector matches only labels the metric has, and each grouping (by, on, ...)
// names labels that one of the expression's series has. It returns the series found.
func checkExpr(t *testing.T, defs map[string]metricDef, where, expr string) []string {
	t.Helper()
	series := seriesRe.FindAllString(expr, -1)
	exprLabels := slices.Clone(targetLabels)
	labelsKnown := true
	for _, s := range series {
		d, ok := lookupSeries(defs, s)
		if !ok {
			t.Errorf("%s: %s is not defined by any service (expr: %s)", where, s, expr)
			labelsKnown = false
			continue
		}
		if d.unknownLabels {
			labelsKnown = false
		}
		exprLabels = append(exprLabels, d.labels...)
	}
	for _, m := range selectorRe.FindAllStringSubmatch(expr, -1) {
		d, ok := lookupSeries(defs, m[1])
		if !ok || d.unknownLabels {
			continue
		}
		allowed := append(slices.Clone(d.labels), targetLabels...)
		for _, lm := range matcherRe.FindAllStringSubmatch(m[2], -1) {
			if !slices.Contains(allowed, lm[1]) {
				t.Errorf("%s: %s has no label %q (labels: %v, defined at %s)", where, m[1], lm[1], d.labels, d.where)
			}
		}
	}
	// Groupings over recorded series (moraine:...) or other exporters' series are not checked.
	if labelsKnown && len(series) > 0 && !recordedRe.MatchString(expr) {
		for _, g := range groupingRe.FindAllStringSubmatch(expr, -1) {
			for _, l := range strings.Split(g[1], ",") {
				l = strings.TrimSpace(l)
				if l != "" && l != "le" && !slices.Contains(exprLabels, l) {
					t.Errorf("%s: groups by %q, which none of %v has (expr: %s)", where, l, series, expr)
				}
			}
		}
	}
	return series
}

func TestOpsCodeMetrics(t *testing.T) {
	defs := codeMetrics(t)
	// A few anchors: if these move, the catalogue reader (not the assets) needs a look.
	for name, want := range map[string]metricDef{
		"moraine_ingest_last_produced_block":          {kind: "gauge", labels: []string{"chain"}},
		"moraine_processor_watchlist_ready":           {kind: "gauge", labels: []string{}},
		"moraine_query_http_request_duration_seconds": {kind: "histogram", labels: []string{"route", "method"}},
		"moraine_delivery_attempts_total":             {kind: "counter", labels: []string{"result"}},
		"moraine_query_watch_records_produced_total":  {kind: "counter", labels: []string{"result"}},
		"moraine_delivery_accountdb_duration_seconds": {kind: "histogram", labels: []string{"statement"}},
		"moraine_build_info":                          {kind: "gauge", labels: []string{"service"}},
	} {
		got, ok := defs[name]
		if !ok {
			t.Errorf("catalogue lacks %s", name)
			continue
		}
		if got.kind != want.kind || !slices.Equal(got.labels, want.labels) {
			t.Errorf("%s: got %s %v, want %s %v", name, got.kind, got.labels, want.kind, want.labels)
		}
	}
	if t.Failed() || testing.Verbose() {
		names := make([]string, 0, len(defs))
		for n := range defs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			t.Logf("%s %s %v", n, defs[n].kind, defs[n].labels)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// Prometheus.

type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpsPrometheusRules(t *testing.T) {
	defs := codeMetrics(t)
	var rf ruleFile
	if err := yaml.UnmarshalStrict(readFile(t, "prometheus/rules.yml"), &rf); err != nil {
		t.Fatalf("rules.yml: %v", err)
	}
	recorded := map[string]bool{}
	alerts := map[string]bool{}
	used := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			name := r.Record + r.Alert
			where := "rules.yml " + g.Name + "/" + name
			if (r.Record == "") == (r.Alert == "") {
				t.Errorf("%s: a rule needs exactly one of record and alert", where)
			}
			if strings.TrimSpace(r.Expr) == "" {
				t.Errorf("%s: empty expr", where)
			}
			for _, s := range checkExpr(t, defs, where, r.Expr) {
				used[s] = true
			}
			// Recorded series must be recorded earlier (rules of a group run in order).
			for _, rec := range recordedRe.FindAllString(r.Expr, -1) {
				if !recorded[rec] {
					t.Errorf("%s: uses %s, which no earlier rule records", where, rec)
				}
			}
			if r.Record != "" {
				if !strings.HasPrefix(r.Record, "moraine:") || strings.Count(r.Record, ":") != 2 {
					t.Errorf("%s: recorded names are level:metric:operations", where)
				}
				if recorded[r.Record] {
					t.Errorf("%s: recorded twice", where)
				}
				recorded[r.Record] = true
				continue
			}
			if alerts[r.Alert] {
				t.Errorf("%s: alert name used twice", where)
			}
			alerts[r.Alert] = true
			if !strings.HasPrefix(r.Alert, "Moraine") {
				t.Errorf("%s: alert names start with Moraine", where)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
				t.Errorf("%s: severity %q, want critical, warning or info", where, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs summary and description annotations", where)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", where, r.For, err)
				}
			}
		}
	}
	// What the brief of these rules promised, by the series they watch.
	for _, s := range []string{
		"moraine_ingest_last_produced_block", "moraine_ingest_head_block", "moraine_ingest_reorgs_total",
		"moraine_processor_last_written_block", "moraine_processor_decode_errors_total",
		"moraine_processor_watchlist_ready", "moraine_delivery_attempts_total",
		"moraine_delivery_retries_pending", "moraine_delivery_webhooks_deactivated_total",
		"moraine_query_http_requests_total", "moraine_query_http_request_duration_seconds_bucket",
	} {
		if !used[s] {
			t.Errorf("rules.yml uses no %s", s)
		}
	}
	if !alerts["MoraineServiceDown"] {
		t.Error("rules.yml has no MoraineServiceDown (up == 0)")
	}

	// rules_test.yml (promtool test rules) must at least parse and load rules.yml.
	var rt struct {
		RuleFiles []string         `yaml:"rule_files"`
		Tests     []map[string]any `yaml:"tests"`
	}
	if err := yaml.Unmarshal(readFile(t, "prometheus/rules_test.yml"), &rt); err != nil {
		t.Fatalf("rules_test.yml: %v", err)
	}
	if !slices.Contains(rt.RuleFiles, "rules.yml") || len(rt.Tests) == 0 {
		t.Errorf("rules_test.yml: rule_files %v, %d tests", rt.RuleFiles, len(rt.Tests))
	}
}

// opsDefaults reads each service's default --ops.listen-address from its code.
func opsDefaults(t *testing.T) map[string]string {
	t.Helper()
	re := regexp.MustCompile(`Ops\.RegisterFlags\(fs, "([^"]+)"\)`)
	out := map[string]string{}
	for _, svc := range services {
		for _, p := range goFiles(t, filepath.Join("..", svc, "internal")) {
			if m := re.FindSubmatch(readFile(t, p)); m != nil {
				out[svc] = string(m[1])
			}
		}
		if out[svc] == "" {
			t.Errorf("%s: no Ops.RegisterFlags(fs, \"host:port\") found", svc)
		}
	}
	return out
}

func TestOpsPrometheusConfig(t *testing.T) {
	var cfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(readFile(t, "prometheus/prometheus.yml"), &cfg); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	if !slices.Contains(cfg.RuleFiles, "rules.yml") {
		t.Errorf("prometheus.yml does not load rules.yml: %v", cfg.RuleFiles)
	}
	jobs := map[string][]string{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			jobs[sc.JobName] = append(jobs[sc.JobName], st.Targets...)
		}
	}
	// The local jobs scrape each service's default ops address, under the job name the rules
	// and the dashboard select (moraine-<service>).
	for svc, addr := range opsDefaults(t) {
		if got := jobs["moraine-"+svc]; !slices.Equal(got, []string{addr}) {
			t.Errorf("job moraine-%s targets %v, want [%s] (the default --ops.listen-address)", svc, got, addr)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// Grafana.

type gridPos struct{ H, W, X, Y int }

type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	GridPos    gridPos         `json:"gridPos"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr       string          `json:"expr"`
		RefID      string          `json:"refId"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func TestOpsGrafanaDashboard(t *testing.T) {
	defs := codeMetrics(t)
	var d struct {
		UID           string  `json:"uid"`
		Title         string  `json:"title"`
		SchemaVersion int     `json:"schemaVersion"`
		Panels        []panel `json:"panels"`
		Templating    struct {
			List []struct {
				Name       string          `json:"name"`
				Type       string          `json:"type"`
				Query      json.RawMessage `json:"query"`
				Definition string          `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	dec := json.NewDecoder(bytes.NewReader(readFile(t, "grafana/dashboards/moraine.json")))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("moraine.json: %v", err)
	}
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d", d.UID, d.Title, d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Definition != "" {
			checkExpr(t, defs, "variable "+v.Name, v.Definition)
		}
	}
	if vars["DS_PROMETHEUS"] != "datasource" || vars["chain"] != "query" {
		t.Errorf("variables %v: want DS_PROMETHEUS (datasource) and chain (query)", vars)
	}

	wantDS := `{"type":"prometheus","uid":"${DS_PROMETHEUS}"}`
	sameDS := func(raw json.RawMessage) bool {
		var a, b any
		_ = json.Unmarshal(raw, &a)
		_ = json.Unmarshal([]byte(wantDS), &b)
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		return bytes.Equal(ja, jb)
	}
	var all []panel
	for _, p := range d.Panels {
		all = append(all, p)
		all = append(all, p.Panels...) // collapsed rows hold their panels
	}
	ids := map[int]bool{}
	var rows []string
	used := map[string]bool{}
	for _, p := range all {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if ids[p.ID] {
			t.Errorf("%s: duplicate id", where)
		}
		ids[p.ID] = true
		if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("%s: gridPos %+v outside the 24 columns", where, g)
		}
		switch p.Type {
		case "row":
			rows = append(rows, p.Title)
			continue
		case "text":
			continue
		}
		if !sameDS(p.Datasource) {
			t.Errorf("%s: datasource %s, want %s", where, p.Datasource, wantDS)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no queries", where)
		}
		for _, tg := range p.Targets {
			if !sameDS(tg.Datasource) {
				t.Errorf("%s/%s: datasource %s, want %s", where, tg.RefID, tg.Datasource, wantDS)
			}
			for _, s := range checkExpr(t, defs, where+"/"+tg.RefID, tg.Expr) {
				used[s] = true
			}
		}
	}
	// Panels must not overlap.
	for i, a := range all {
		for _, b := range all[i+1:] {
			ga, gb := a.GridPos, b.GridPos
			if ga.X < gb.X+gb.W && gb.X < ga.X+ga.W && ga.Y < gb.Y+gb.H && gb.Y < ga.Y+ga.H {
				t.Errorf("panels %q and %q overlap", a.Title, b.Title)
			}
		}
	}
	for _, want := range []string{"Ingest", "Processor", "Query", "Delivery"} {
		if !slices.Contains(rows, want) {
			t.Errorf("no %q row (rows: %v)", want, rows)
		}
	}
	// Every series of the four services that carries information appears somewhere.
	var unused []string
	for name := range defs {
		if !strings.HasPrefix(name, "moraine_") || used[name] {
			continue
		}
		if d := defs[name]; d.kind == "histogram" && (used[name+"_bucket"] || used[name+"_sum"] || used[name+"_count"]) {
			continue
		}
		unused = append(unused, name)
	}
	sort.Strings(unused)
	t.Logf("series defined in code and not on the dashboard: %v", unused)
}

func TestOpsGrafanaProvisioning(t *testing.T) {
	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name string `yaml:"name"`
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	if err := yaml.Unmarshal(readFile(t, "grafana/provisioning/datasources/prometheus.yml"), &ds); err != nil {
		t.Fatal(err)
	}
	if ds.APIVersion != 1 || len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL == "" {
		t.Errorf("datasource provisioning: %+v", ds)
	}
	var dp struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	if err := yaml.Unmarshal(readFile(t, "grafana/provisioning/dashboards/moraine.yml"), &dp); err != nil {
		t.Fatal(err)
	}
	if dp.APIVersion != 1 || len(dp.Providers) != 1 || dp.Providers[0].Type != "file" || dp.Providers[0].Options.Path == "" {
		t.Errorf("dashboard provisioning: %+v", dp)
	}
}

// ---------------------------------------------------------------------------------------------
// Kubernetes.

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
		SecretKeyRef *struct {
			Name     string `yaml:"name"`
			Key      string `yaml:"key"`
			Optional bool   `yaml:"optional"`
		} `yaml:"secretKeyRef"`
		ConfigMapKeyRef *struct {
			Name string `yaml:"name"`
			Key  string `yaml:"key"`
		} `yaml:"configMapKeyRef"`
	} `yaml:"valueFrom"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
	TimeoutSeconds int `yaml:"timeoutSeconds"`
}

type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Replicas    *int   `yaml:"replicas"`
		ServiceName string `yaml:"serviceName"`
		Strategy    struct {
			Type string `yaml:"type"`
		} `yaml:"strategy"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
				Containers                    []struct {
					Name    string   `yaml:"name"`
					Image   string   `yaml:"image"`
					Env     []envVar `yaml:"env"`
					EnvFrom []struct {
						ConfigMapRef *struct {
							Name string `yaml:"name"`
						} `yaml:"configMapRef"`
					} `yaml:"envFrom"`
					Ports []struct {
						Name          string `yaml:"name"`
						ContainerPort int    `yaml:"containerPort"`
					} `yaml:"ports"`
					LivenessProbe  *probe `yaml:"livenessProbe"`
					ReadinessProbe *probe `yaml:"readinessProbe"`
					Lifecycle      *struct {
						PreStop *struct {
							Sleep *struct {
								Seconds int `yaml:"seconds"`
							} `yaml:"sleep"`
						} `yaml:"preStop"`
					} `yaml:"lifecycle"`
					VolumeMounts []struct {
						Name string `yaml:"name"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []struct {
					Name      string `yaml:"name"`
					ConfigMap *struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
					Secret *struct {
						SecretName string `yaml:"secretName"`
					} `yaml:"secret"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
		// A Service's selector is a label map; a workload's and a PodDisruptionBudget's hold matchLabels.
		Selector map[string]any `yaml:"selector"`
		// PodDisruptionBudget: an int or a percentage.
		MaxUnavailable any `yaml:"maxUnavailable"`
		MinAvailable   any `yaml:"minAvailable"`
	} `yaml:"spec"`
}

// readManifests parses every document of every YAML file in k8s/ (except kustomization.yaml),
// both as generic YAML (it must parse) and into k8sObject.
func readManifests(t *testing.T) (files []string, objs []k8sObject) {
	t.Helper()
	paths, err := filepath.Glob("k8s/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if filepath.Base(p) == "kustomization.yaml" {
			continue
		}
		files = append(files, filepath.Base(p))
		b := readFile(t, p)
		gen := yaml.NewDecoder(bytes.NewReader(b))
		typed := yaml.NewDecoder(bytes.NewReader(b))
		for i := 0; ; i++ {
			var m map[string]any
			err := gen.Decode(&m)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s document %d: %v", p, i, err)
			}
			var o k8sObject
			if err := typed.Decode(&o); err != nil {
				t.Fatalf("%s document %d: %v", p, i, err)
			}
			if m == nil {
				continue
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Errorf("%s document %d: apiVersion, kind and metadata.name are required", p, i)
			}
			objs = append(objs, o)
		}
	}
	return files, objs
}

// serviceFlags returns the env names (MORAINE_...) of the flags each service registers: those in
// its internal packages and main, and in pkg (shared flags: kafka, clickhouse, log, chains, ...).
func serviceFlags(t *testing.T) map[string]map[string]bool {
	t.Helper()
	varRe := regexp.MustCompile(`\bfs\.(?:[A-Z][A-Za-z0-9]*)?Var\(\s*[^,()]+,\s*"([a-z][a-z0-9.-]*)"`)
	plainRe := regexp.MustCompile(`\bfs\.(?:String|Int|Int64|Uint|Uint64|Bool|Duration|Float64)\(\s*"([a-z][a-z0-9.-]*)"`)
	envName := func(flag string) string {
		return "MORAINE_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(flag))
	}
	scan := func(dirs ...string) map[string]bool {
		out := map[string]bool{}
		for _, dir := range dirs {
			for _, p := range goFiles(t, dir) {
				b := readFile(t, p)
				for _, re := range []*regexp.Regexp{varRe, plainRe} {
					for _, m := range re.FindAllSubmatch(b, -1) {
						out[envName(string(m[1]))] = true
					}
				}
			}
		}
		return out
	}
	shared := scan(filepath.Join("..", "pkg"))
	out := map[string]map[string]bool{}
	for _, svc := range services {
		f := scan(filepath.Join("..", svc, "internal"), filepath.Join("..", svc, "cmd", svc))
		for k := range shared {
			f[k] = true
		}
		out[svc] = f
	}
	return out
}

func TestOpsKubernetes(t *testing.T) {
	files, objs := readManifests(t)

	// kustomization.yaml lists exactly the manifests, each of which exists.
	var kz struct {
		Resources []string `yaml:"resources"`
		Images    []struct {
			Name string `yaml:"name"`
		} `yaml:"images"`
	}
	if err := yaml.Unmarshal(readFile(t, "k8s/kustomization.yaml"), &kz); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	res := slices.Clone(kz.Resources)
	sort.Strings(res)
	sort.Strings(files)
	if !slices.Equal(res, files) {
		t.Errorf("kustomization resources %v, want the manifests %v", res, files)
	}

	flags := serviceFlags(t)
	byKind := map[string]map[string]k8sObject{}
	for _, o := range objs {
		if byKind[o.Kind] == nil {
			byKind[o.Kind] = map[string]k8sObject{}
		}
		if _, dup := byKind[o.Kind][o.Metadata.Name]; dup {
			t.Errorf("%s %s defined twice", o.Kind, o.Metadata.Name)
		}
		byKind[o.Kind][o.Metadata.Name] = o
	}

	// The shared ConfigMaps: every key of an env ConfigMap is some service's flag; the chains
	// file is valid for pkg/chains.
	for name, cm := range byKind["ConfigMap"] {
		if f, ok := cm.Data["chains.json"]; ok {
			if _, err := chains.Parse([]byte(f)); err != nil {
				t.Errorf("ConfigMap %s chains.json: %v", name, err)
			}
			continue
		}
		for k := range cm.Data {
			known := false
			for _, svc := range services {
				known = known || flags[svc][k]
			}
			if !known {
				t.Errorf("ConfigMap %s: %s is no service's flag", name, k)
			}
		}
	}
	secretHas := func(name, key string) bool {
		s, ok := byKind["Secret"][name]
		if !ok {
			return false
		}
		_, inData := s.Data[key]
		_, inString := s.StringData[key]
		return inData || inString
	}

	ops := opsDefaults(t)
	kzImages := map[string]bool{}
	for _, im := range kz.Images {
		kzImages[im.Name] = true
	}
	for _, svc := range services {
		t.Run(svc, func(t *testing.T) {
			var w k8sObject
			found := 0
			for _, kind := range []string{"Deployment", "StatefulSet"} {
				for _, o := range byKind[kind] {
					if o.Spec.Template.Metadata.Labels["app.kubernetes.io/component"] == svc {
						w = o
						found++
					}
				}
			}
			if found != 1 {
				t.Fatalf("%d workloads with component %s, want 1", found, svc)
			}
			ps := w.Spec.Template.Spec
			if len(ps.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(ps.Containers))
			}
			c := ps.Containers[0]
			if want := "moraine/" + svc; !strings.HasPrefix(c.Image, want+":") || !kzImages[want] {
				t.Errorf("image %q, want %s:<tag> listed in kustomization images", c.Image, want)
			}

			env := map[string]envVar{}
			for _, e := range c.Env {
				env[e.Name] = e
				if strings.HasPrefix(e.Name, "MORAINE_") && !flags[svc][e.Name] {
					t.Errorf("env %s is not a flag of %s", e.Name, svc)
				}
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					r := e.ValueFrom.SecretKeyRef
					if !secretHas(r.Name, r.Key) {
						t.Errorf("env %s: Secret %s has no key %s", e.Name, r.Name, r.Key)
					}
				}
			}
			for _, ef := range c.EnvFrom {
				if ef.ConfigMapRef == nil {
					continue
				}
				if _, ok := byKind["ConfigMap"][ef.ConfigMapRef.Name]; !ok {
					t.Errorf("envFrom ConfigMap %s is not defined", ef.ConfigMapRef.Name)
				}
			}
			for _, v := range ps.Volumes {
				if v.ConfigMap != nil {
					if _, ok := byKind["ConfigMap"][v.ConfigMap.Name]; !ok {
						t.Errorf("volume %s: ConfigMap %s is not defined", v.Name, v.ConfigMap.Name)
					}
				}
			}

			// Ops server on all interfaces, on the service's usual port, scraped.
			addr := env["MORAINE_OPS_LISTEN_ADDRESS"].Value
			host, port, err := net.SplitHostPort(addr)
			if err != nil || host != "0.0.0.0" {
				t.Errorf("MORAINE_OPS_LISTEN_ADDRESS %q, want 0.0.0.0:<port>", addr)
			}
			if _, defPort, _ := net.SplitHostPort(ops[svc]); port != defPort {
				t.Errorf("ops port %s, want the default %s", port, defPort)
			}
			opsPort := 0
			for _, p := range c.Ports {
				if p.Name == "ops" {
					opsPort = p.ContainerPort
				}
			}
			if strconv.Itoa(opsPort) != port {
				t.Errorf("containerPort ops %d, want %s", opsPort, port)
			}
			ann := w.Spec.Template.Metadata.Annotations
			if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != port {
				t.Errorf("scrape annotations %v, want scrape true on port %s", ann, port)
			}
			if w.Spec.Template.Metadata.Labels["app.kubernetes.io/part-of"] != "moraine" {
				t.Error("pod label app.kubernetes.io/part-of=moraine is what the scrape config keeps")
			}

			// Probes on the ops port; /readyz gives its checks 3s. query's
			// liveness is the API's own /v1/live-check (package health):
			// it proves the API listener answers, not only the ops one.
			live, livePort := "/healthz", "ops"
			if svc == "query" {
				live, livePort = "/v1/live-check", "http"
			}
			for _, pr := range []struct {
				name, path, port string
				p                *probe
			}{{"liveness", live, livePort, c.LivenessProbe}, {"readiness", "/readyz", "ops", c.ReadinessProbe}} {
				if pr.p == nil || pr.p.HTTPGet == nil || pr.p.HTTPGet.Path != pr.path || pr.p.HTTPGet.Port != pr.port {
					t.Errorf("%s probe: want GET %s on port %s", pr.name, pr.path, pr.port)
					continue
				}
				if pr.p.TimeoutSeconds <= 3 {
					t.Errorf("%s probe timeoutSeconds %d, want more than 3", pr.name, pr.p.TimeoutSeconds)
				}
			}

			// The grace period outlasts a preStop pause plus --shutdown.timeout.
			st, err := time.ParseDuration(env["MORAINE_SHUTDOWN_TIMEOUT"].Value)
			if err != nil {
				t.Fatalf("MORAINE_SHUTDOWN_TIMEOUT: %v", err)
			}
			need := st
			if lc := c.Lifecycle; lc != nil && lc.PreStop != nil && lc.PreStop.Sleep != nil {
				need += time.Duration(lc.PreStop.Sleep.Seconds) * time.Second
			}
			if g := ps.TerminationGracePeriodSeconds; g == nil {
				t.Errorf("terminationGracePeriodSeconds unset (30s), want it explicit and more than %s", need)
			} else if time.Duration(*g)*time.Second <= need {
				t.Errorf("terminationGracePeriodSeconds %d, want more than %s", *g, need)
			}

			// A PodDisruptionBudget lets a drain take only some of the pods at once.
			podName := w.Spec.Template.Metadata.Labels["app.kubernetes.io/name"]
			pdbs := 0
			for _, o := range byKind["PodDisruptionBudget"] {
				ml, _ := o.Spec.Selector["matchLabels"].(map[any]any)
				if ml["app.kubernetes.io/name"] == podName {
					pdbs++
					if (o.Spec.MaxUnavailable == nil) == (o.Spec.MinAvailable == nil) {
						t.Errorf("PodDisruptionBudget %s: want exactly one of maxUnavailable and minAvailable", o.Metadata.Name)
					}
				}
			}
			if pdbs != 1 {
				t.Errorf("%d PodDisruptionBudgets select the %s pods, want 1", pdbs, podName)
			}

			switch svc {
			case "ingest":
				// One active writer per chain and a standby: a lost pod is taken over, an update replaces
				// one pod at a time.
				if w.Kind != "Deployment" || w.Spec.Replicas == nil || *w.Spec.Replicas < 2 || w.Spec.Strategy.Type != "RollingUpdate" {
					t.Error("ingest: want a Deployment with 2 or more replicas and strategy RollingUpdate")
				}
			case "processor":
				e := env["MORAINE_MATCHER_TRANSACTIONAL_ID"]
				if w.Kind != "StatefulSet" || w.Spec.ServiceName == "" || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil ||
					e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
					t.Error("processor: want a StatefulSet with MORAINE_MATCHER_TRANSACTIONAL_ID from metadata.name")
				}
				if svcObj, ok := byKind["Service"][w.Spec.ServiceName]; !ok || svcObj.Spec.Selector["app.kubernetes.io/name"] != w.Spec.Template.Metadata.Labels["app.kubernetes.io/name"] {
					t.Errorf("processor: governing Service %q missing or selecting other pods", w.Spec.ServiceName)
				}
			case "query":
				e := env["MORAINE_API_PAGE_TOKEN_SECRET"]
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Optional {
					t.Error("query: MORAINE_API_PAGE_TOKEN_SECRET must come from a (required) Secret key shared by all replicas")
				}
				if w.Spec.Replicas == nil || env["MORAINE_RATELIMIT_INSTANCES"].Value != strconv.Itoa(*w.Spec.Replicas) {
					t.Errorf("query: MORAINE_RATELIMIT_INSTANCES %q must equal replicas", env["MORAINE_RATELIMIT_INSTANCES"].Value)
				}
				if _, p, _ := net.SplitHostPort(env["MORAINE_HTTP_LISTEN_ADDRESS"].Value); p == "" {
					t.Error("query: MORAINE_HTTP_LISTEN_ADDRESS must be set (the default listens on loopback)")
				}
			}
		})
	}
}

// TestOpsDockerfile checks what deploy/docker/Dockerfile assumes of each service: a main at
// <service>/cmd/<service>, and a go.mod that builds with GOWORK=off (replace directives for the
// workspace modules it requires).
func TestOpsDockerfile(t *testing.T) {
	df := string(readFile(t, "docker/Dockerfile"))
	for _, want := range []string{"ARG SERVICE", "./cmd/${SERVICE}", "GOWORK=off"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	reqRe := regexp.MustCompile(`(?m)^\s*(?:require\s+)?(` + regexp.QuoteMeta(modulePath) + `[a-z]+)\s+v`)
	for _, svc := range services {
		if _, err := os.Stat(filepath.Join("..", svc, "cmd", svc, "main.go")); err != nil {
			t.Errorf("%s: %v", svc, err)
		}
		gomod := string(readFile(t, filepath.Join("..", svc, "go.mod")))
		for _, m := range reqRe.FindAllStringSubmatch(gomod, -1) {
			dir := strings.TrimPrefix(m[1], modulePath)
			if !regexp.MustCompile(regexp.QuoteMeta(m[1]) + `\s*=>\s*\.\./` + dir).MatchString(gomod) {
				t.Errorf("%s/go.mod requires %s without `replace ... => ../%s`: GOWORK=off builds fail", svc, m[1], dir)
			}
			if dir != "pkg" && dir != "schemas" {
				t.Errorf("%s/go.mod requires %s, which the Dockerfile does not copy", svc, m[1])
			}
		}
	}
}
