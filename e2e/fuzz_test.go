package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fuzzBudget bounds the schemathesis run (its --max-time): make test runs
// it, and CI runs make test within a budget. Its phases (examples,
// coverage, fuzzing, stateful) repeat until the budget is spent.
const fuzzBudget = 60 * time.Second

// TestSchemathesis fuzzes the query service from its own OpenAPI document:
// schemathesis (deploy/stack/schemathesis.sh installs it; make test sets
// MORAINE_SCHEMATHESIS) reads /api-json and sends generated requests,
// valid and invalid, to every operation, with an API key of an account
// that has webhooks to read. Zero server errors and zero answers that break
// the document (status codes, content types, headers, body schemas) are
// allowed. The service runs as in production: rate limits on, the delivery
// target policy refusing internal URLs; the C-Chain blocks 1..100 are
// indexed through the real pipeline, so block reads find data.
func TestSchemathesis(t *testing.T) {
	st := os.Getenv("MORAINE_SCHEMATHESIS")
	if st == "" {
		t.Fatal("MORAINE_SCHEMATHESIS is not set: `make test` installs schemathesis, or run `export MORAINE_SCHEMATHESIS=$(deploy/stack/schemathesis.sh install)`")
	}
	s := runPipeline(t, cchain, 1, pipelineOpts{queryArgs: []string{
		"--ratelimit.enabled=true", "--delivery.allow-private-targets=false", "--log.level", "warn"}})
	out, err := exec.Command(filepath.Join(binaries(t), "moraine-admin"), "dev-key", "--out", filepath.Join(t.TempDir(), "key"),
		"--plan", "enterprise", "--clickhouse.addr", s.ch.Addr, "--clickhouse.database", s.ch.Database).Output()
	if err != nil {
		t.Fatalf("moraine-admin dev-key: %v", err)
	}
	key := strings.TrimSpace(string(out))
	// A webhook to read, update and list the addresses and deliveries of.
	var hook struct {
		ID string `json:"id"`
	}
	if code := call(t, "POST", s.api+"/v1/webhooks", key, map[string]any{
		"eventType": "address_activity", "url": "https://93.184.215.14/hook", "chainId": "43114",
		"metadata": map[string]any{"addresses": []string{"0x9702230A8Ea53601f5cD2dc00fDBc13d4dF4A8c7"}},
	}, &hook); code != 201 {
		t.Fatalf("create webhook: %d", code)
	}

	run := func() (string, time.Duration, error) {
		cmd := exec.Command(st, "run", s.api+"/api-json",
			"--header", "x-glacier-api-key: "+key,
			"--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance",
			"--max-time", strconv.Itoa(int(fuzzBudget.Seconds())),
			// One worker: with two, the tool's threads parse Python source
			// at once, and CPython 3.11's AST converter keeps its recursion
			// counter per interpreter, not per thread ("SystemError: AST
			// constructor recursion depth mismatch", CPython gh-106905),
			// which ended two runs in a row.
			"--workers", "1", "--request-timeout", "10",
			"--generation-database", "none", "--no-color")
		cmd.Dir = t.TempDir() // schemathesis writes its state here
		start := time.Now()
		out, err := cmd.CombinedOutput()
		return string(out), time.Since(start), err
	}
	text, took, err := run()
	if err != nil && toolCrashed(text) {
		// The tool crashed (a CPython error inside its generator), which
		// says nothing about the service: run it once more. A finding is
		// never retried.
		t.Logf("schemathesis crashed without a finding after %s; running it again:\n%s", took.Round(time.Second), text[max(0, len(text)-2000):])
		text, took, err = run()
	}
	if err != nil {
		t.Fatalf("schemathesis failed after %s: %v\n%s", took.Round(time.Second), err, text)
	}
	// Exit status 0 means no check failed; the summary says how much ran.
	summary := regexp.MustCompile(`(?m)^\s*\d+ generated, \d+ passed.*$`).FindString(text)
	ops := regexp.MustCompile(`Operations:\s+(\d+ selected / \d+ total)`).FindStringSubmatch(text)
	if summary == "" || len(ops) < 2 {
		t.Fatalf("schemathesis output without its summary after %s:\n%s", took.Round(time.Second), text)
	}
	t.Logf("schemathesis: %s in %s, operations %s", strings.TrimSpace(summary), took.Round(time.Second), ops[1])
}

// toolCrashed reports whether a schemathesis run ended on an internal error
// of the tool and not on a check that failed: its summary lists a runtime
// error and no failure.
func toolCrashed(out string) bool {
	return strings.Contains(out, "Runtime Error") && strings.Contains(out, "SystemError:") && !strings.Contains(out, "Failures:")
}
