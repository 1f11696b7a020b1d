#!/usr/bin/env bash
# make lint: every flag a service binary defines appears in its README (as `--flag`), so the READMEs'
# flag tables cannot fall behind the code. Builds the four services into a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for s in ingest processor query delivery; do
    (cd "$s" && go build -o "$tmp/$s" "./cmd/$s")
    # -h prints the usage on stderr and exits 0 (flag.ContinueOnError) or 2 (ExitOnError): either is fine.
    flags=$("$tmp/$s" -h 2>&1 | grep -oE '^  --[a-z0-9.-]+' | sed 's/^  //' || true)
    [ -n "$flags" ] || { echo "docs: $s -h listed no flags"; fail=1; continue; }
    for f in $flags; do
        grep -qF -- "\`$f\`" "$s/README.md" || { echo "docs: $s/README.md does not describe $f"; fail=1; }
    done
done
exit $fail
