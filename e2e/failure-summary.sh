#!/usr/bin/env bash
# usage: failure-summary.sh FILE [LINES]
#
# FILE holds the output of a failed `go test` run. A failed end-to-end test
# prints the last lines of every process it started (harness_test.go), often
# hundreds of lines after its own failure message; a CI page that shows only
# the output's tail then shows process logs. This repeats, at the end, what
# the tests themselves said last before those logs (their failure messages
# among it) and the failed tests' names.
set -euo pipefail
file=$1
lines=${2:-15}
echo "=== what the failed tests said last, before the logs of their processes (all of it in $file)"
# A test's own lines are "    name_test.go:NNN: ..." (a multi-line message
# goes on indented deeper); the dumps start with "--- last lines of".
awk '/--- last lines of .* log:/ { dump = 1; next }
     /^[[:space:]]+[a-z0-9_]+_test\.go:[0-9]+: / { dump = 0 }
     !dump && /^[[:space:]]+/ && !/level=/ { print }' "$file" | tail -n "$lines"
# A panic's first line, and the seeds that replay a fault suite's run.
grep -E -m 2 '^panic: ' "$file" || true
grep -E -o 'fault suite: seed [0-9]+[^,]*' "$file" | head -n 2 || true
grep -E -- '--- FAIL|^FAIL' "$file" | tail -n 8
